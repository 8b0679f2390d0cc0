//! Socket options the proxy needs that std does not offer: IP_TRANSPARENT (TPROXY),
//! TCP_CONGESTION and forced buffer sizes, all set before bind/connect so that the
//! window scale the SYN announces fits the buffers.

use std::io;
use std::mem::size_of;
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// What the satellite-hop socket gets (the LAN-side socket keeps the kernel's defaults
/// but TCP_NODELAY).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HopOptions {
    /// TCP_CONGESTION name (reno, cubic, bbr); None keeps the namespace's default.
    pub cc: Option<String>,
    /// SO_SNDBUF/SO_RCVBUF, forced past net.core.*mem_max (root); 0 keeps autotuning.
    pub buffer_bytes: usize,
}

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

fn v4(addr: SocketAddr) -> io::Result<SocketAddrV4> {
    match addr {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => Err(io::Error::new(io::ErrorKind::Unsupported, "IPv4 only")),
    }
}

/// Set the hop's congestion control and buffers on a socket.
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
    Ok(())
}

/// The congestion control in force on a socket.
pub fn congestion(fd: RawFd) -> io::Result<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is writable for len bytes; len is updated by the kernel.
    check(unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    let name = &buf[..len as usize];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
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
    let sa = sockaddr(v4(addr)?);
    // SAFETY: sa is a valid sockaddr_in of the size given.
    check(unsafe {
        libc::bind(
            raw,
            (&sa as *const libc::sockaddr_in).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    })?;
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
