//! Socket options and calls the proxy needs that std does not offer: IP_TRANSPARENT
//! (TPROXY), TCP_CONGESTION, forced buffer sizes and SO_MAX_PACING_RATE, all set before
//! bind/connect so that the window scale the SYN announces fits the buffers; TCP_INFO;
//! whether an idle connection is still open; whether an address is this host's own.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::tcpinfo::TcpInfo;

/// What the satellite-hop socket gets (the LAN-side socket keeps the kernel's defaults
/// but TCP_NODELAY).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HopOptions {
    /// TCP_CONGESTION name (reno, cubic, bbr); None keeps the namespace's default.
    pub cc: Option<String>,
    /// SO_SNDBUF/SO_RCVBUF, forced past net.core.*mem_max (root); 0 keeps autotuning.
    /// On this kernel the receive buffer set before the SYN is also the window the
    /// socket advertises from the start (docs/peps.md).
    pub buffer_bytes: usize,
    /// SO_MAX_PACING_RATE in bytes per second (0: none). It turns on TCP's own pacing
    /// (no fq qdisc needed), so a large first window leaves at this rate, not at once.
    pub max_pacing_rate: u64,
}

const SO_MAX_PACING_RATE: libc::c_int = 47;

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: fd is a valid socket; the option value is a c_int of the size given.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
}

fn tcp_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    check(fd)?;
    // SAFETY: fd was just created and is not owned elsewhere.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// The IPv4 address of a socket address (the proxy is IPv4 only, as the testbed is).
pub fn v4(addr: SocketAddr) -> io::Result<SocketAddrV4> {
    match addr {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => Err(io::Error::new(io::ErrorKind::Unsupported, "IPv4 only")),
    }
}

fn bind(fd: RawFd, addr: SocketAddrV4) -> io::Result<()> {
    let sa = sockaddr(addr);
    // SAFETY: sa is a valid sockaddr_in of the size given.
    check(unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    })
}

/// Set the hop's congestion control, buffers and pacing cap on a socket.
pub fn apply_hop(fd: RawFd, hop: &HopOptions) -> io::Result<()> {
    if let Some(cc) = &hop.cc {
        // SAFETY: fd is a valid socket; the name is passed with its length.
        check(unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                cc.as_ptr().cast(),
                cc.len() as libc::socklen_t,
            )
        })
        .map_err(|e| io::Error::new(e.kind(), format!("TCP_CONGESTION {cc}: {e}")))?;
    }
    if hop.buffer_bytes > 0 {
        let bytes = libc::c_int::try_from(hop.buffer_bytes).unwrap_or(libc::c_int::MAX);
        // The FORCE variants ignore net.core.[rw]mem_max (CAP_NET_ADMIN); without the
        // capability fall back to the capped ones.
        for (force, plain) in [
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        ] {
            if set_int(fd, libc::SOL_SOCKET, force, bytes).is_err() {
                set_int(fd, libc::SOL_SOCKET, plain, bytes)?;
            }
        }
    }
    if hop.max_pacing_rate > 0 {
        let rate: u64 = hop.max_pacing_rate;
        // SAFETY: fd is a valid socket; the kernel reads a u64 when given 8 bytes.
        check(unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                SO_MAX_PACING_RATE,
                (&rate as *const u64).cast(),
                size_of::<u64>() as libc::socklen_t,
            )
        })
        .map_err(|e| io::Error::new(e.kind(), format!("SO_MAX_PACING_RATE {rate}: {e}")))?;
    }
    Ok(())
}

/// A TCP-level socket option read into N bytes, and how many of them the kernel wrote.
fn tcp_option<const N: usize>(fd: RawFd, option: libc::c_int) -> io::Result<([u8; N], usize)> {
    let mut buf = [0u8; N];
    let mut len = N as libc::socklen_t;
    // SAFETY: buf is writable for len bytes; len is updated by the kernel.
    check(unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            option,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    Ok((buf, (len as usize).min(N)))
}

/// The congestion control in force on a socket.
pub fn congestion(fd: RawFd) -> io::Result<String> {
    let (buf, len) = tcp_option::<32>(fd, libc::TCP_CONGESTION)?;
    let name = &buf[..len];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// The socket's TCP_INFO, as far as this kernel reports it.
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let (buf, len) = tcp_option::<512>(fd, libc::TCP_INFO)?;
    TcpInfo::parse(&buf[..len])
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "TCP_INFO too short"))
}

/// A listening socket; `transparent` sets IP_TRANSPARENT so that it takes connections
/// TPROXY hands it for any destination (its local address is then the destination the
/// client asked for). `hop` applies to every accepted connection (children inherit).
pub fn listen(
    addr: SocketAddr,
    transparent: bool,
    hop: Option<&HopOptions>,
) -> io::Result<TcpListener> {
    let fd = tcp_socket()?;
    let raw = fd.as_raw_fd();
    set_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if transparent {
        set_int(raw, libc::SOL_IP, libc::IP_TRANSPARENT, 1).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("IP_TRANSPARENT (needs CAP_NET_ADMIN): {e}"),
            )
        })?;
    }
    if let Some(hop) = hop {
        apply_hop(raw, hop)?;
    }
    bind(raw, v4(addr)?)?;
    // SAFETY: a bound stream socket.
    check(unsafe { libc::listen(raw, 1024) })?;
    Ok(TcpListener::from(fd))
}

/// A connection to `to` with `hop` set before the SYN leaves.
pub fn connect(to: SocketAddr, hop: Option<&HopOptions>) -> io::Result<TcpStream> {
    let fd = tcp_socket()?;
    let raw = fd.as_raw_fd();
    if let Some(hop) = hop {
        apply_hop(raw, hop)?;
    }
    let sa = sockaddr(v4(to)?);
    loop {
        // SAFETY: sa is a valid sockaddr_in of the size given.
        let ret = unsafe {
            libc::connect(
                raw,
                (&sa as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        match check(ret) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => other?,
        }
        break;
    }
    Ok(TcpStream::from(fd))
}

/// Whether `ip` is an address of this host (of this network namespace): a plain socket
/// may bind to it. A proxy never relays to itself.
pub fn is_local(ip: Ipv4Addr) -> bool {
    if ip.is_loopback() || ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
        return true;
    }
    let Ok(fd) = tcp_socket() else {
        return true; // cannot tell: refuse rather than risk a loop
    };
    bind(fd.as_raw_fd(), SocketAddrV4::new(ip, 0)).is_ok()
}

/// Whether an idle connection is still usable: nothing to read, no hang-up, no error.
/// Its peer sends nothing while it is idle, so anything readable (an end of stream, a
/// reset, or stray bytes) means it must not be handed to a client.
pub fn idle_and_open(stream: &TcpStream) -> bool {
    let mut pfd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd; a zero timeout never blocks.
    let ready = unsafe { libc::poll(&mut pfd, 1, 0) };
    ready == 0
}

/// Raise the soft limit of open files to the hard one; the soft limit in force after.
pub fn raise_open_files() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a valid rlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: a valid rlimit within the hard limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return raised.rlim_cur;
        }
    }
    lim.rlim_cur
}

/// 32 bytes from the kernel's random source.
pub fn random_bytes() -> io::Result<[u8; 32]> {
    let mut buf = [0u8; 32];
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: the rest of buf is writable for the length given.
        let n =
            unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        filled += n as usize;
    }
    Ok(buf)
}
