//! Thin wrappers over the Linux calls satlink needs: the monotonic clock, TUN devices,
//! socket buffers, timer slack, batched UDP (recvmmsg/sendmmsg) and signals.

use std::fs::{File, OpenOptions};
use std::io;
use std::mem;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use anyhow::{bail, Context, Result};

/// Nanoseconds on CLOCK_MONOTONIC (the clock shared by every namespace of a host).
pub fn now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds since the Unix epoch (for the event log's header only).
pub fn unix_now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl IfReq {
    fn new(name: &str) -> Result<Self> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') {
            bail!("invalid device name {name:?} (1 to 15 characters, no '/')");
        }
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            flags: 0,
            _pad: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        Ok(req)
    }
}

/// Bytes of the due time (u64, big endian, ns on CLOCK_MONOTONIC) at the start of every
/// carrier datagram.
pub const DUE_HDR: usize = 8;

/// Bytes of the virtio_net_hdr in front of every packet read from or written to the
/// TUN device (IFF_VNET_HDR), and carried in every carrier datagram.
pub const VNET_HDR: usize = 10;

/// Create (or attach to) the TUN device `name` (IFF_TUN | IFF_NO_PI | IFF_VNET_HDR) and
/// bring it up.
pub fn open_tun(name: &str) -> Result<File> {
    let mut req = IfReq::new(name)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .context("cannot open /dev/net/tun (TUN driver missing, or not permitted)")?;
    req.flags = (libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes an ifreq.
    if unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
        return Err(io::Error::last_os_error())
            .with_context(|| format!("cannot create TUN device {name} (TUNSETIFF)"));
    }
    set_up(name).with_context(|| format!("cannot bring {name} up"))?;
    Ok(file)
}

/// Let the kernel hand over TCP segmentation offload packets (up to 64 KB, checksum
/// left to the receiver's kernel) or not (then every read is one MTU-sized packet).
pub fn set_offload(tun: &File, on: bool) -> io::Result<()> {
    let flags: libc::c_uint = if on {
        libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6
    } else {
        0
    };
    // SAFETY: TUNSETOFFLOAD takes the flags by value.
    if unsafe { libc::ioctl(tun.as_raw_fd(), libc::TUNSETOFFLOAD, flags as libc::c_ulong) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_up(name: &str) -> io::Result<()> {
    let mut req = IfReq::new(name).map_err(io::Error::other)?;
    // SAFETY: plain socket and SIOC[GS]IFFLAGS ioctls on an ifreq.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut rc = libc::ioctl(s, libc::SIOCGIFFLAGS, &mut req);
        if rc == 0 {
            req.flags |= libc::IFF_UP as libc::c_short;
            rc = libc::ioctl(s, libc::SIOCSIFFLAGS, &mut req);
        }
        let err = io::Error::last_os_error();
        libc::close(s);
        if rc < 0 {
            return Err(err);
        }
    }
    Ok(())
}

/// Ask for `bytes` of socket buffer each way (forced when permitted).
pub fn set_buffers(sock: &UdpSocket, bytes: i32) {
    let fd = sock.as_raw_fd();
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if setsockopt_int(fd, force, bytes).is_err() {
            let _ = setsockopt_int(fd, plain, bytes);
        }
    }
}

fn setsockopt_int(fd: RawFd, opt: libc::c_int, v: i32) -> io::Result<()> {
    // SAFETY: an int option.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            &v as *const i32 as *const libc::c_void,
            mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Timer slack of the calling thread, in ns (the kernel's default is 50 us).
pub fn set_timer_slack(ns: u64) {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

/// Block SIGTERM, SIGINT and SIGHUP in this thread and the threads it spawns later.
pub fn block_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local.
    unsafe {
        let mut set: libc::sigset_t = mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Wait for one of the blocked signals; returns its name.
pub fn wait_signal(set: &libc::sigset_t) -> &'static str {
    let mut sig = 0;
    // SAFETY: set was filled by block_signals.
    unsafe { libc::sigwait(set, &mut sig) };
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "SIGHUP",
    }
}

/// Up to BATCH datagrams at once, with their sources, in preallocated buffers.
pub const BATCH: usize = 32;
pub const DGRAM_MAX: usize = 65536;

pub struct MmsgBuffers {
    bufs: Vec<Vec<u8>>,
    addrs: Vec<libc::sockaddr_in>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in iovs/hdrs point into this struct's own heap buffers.
unsafe impl Send for MmsgBuffers {}

impl MmsgBuffers {
    pub fn new() -> Self {
        let mut m = MmsgBuffers {
            bufs: (0..BATCH).map(|_| vec![0u8; DGRAM_MAX]).collect(),
            // SAFETY: sockaddr_in and mmsghdr are plain data.
            addrs: vec![unsafe { mem::zeroed() }; BATCH],
            iovs: Vec::with_capacity(BATCH),
            hdrs: Vec::with_capacity(BATCH),
        };
        for i in 0..BATCH {
            m.iovs.push(libc::iovec {
                iov_base: m.bufs[i].as_mut_ptr() as *mut libc::c_void,
                iov_len: DGRAM_MAX,
            });
        }
        for i in 0..BATCH {
            // SAFETY: zeroed mmsghdr, then pointers into our own vectors.
            let mut h: libc::mmsghdr = unsafe { mem::zeroed() };
            h.msg_hdr.msg_iov = &mut m.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_name = &mut m.addrs[i] as *mut _ as *mut libc::c_void;
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as u32;
            m.hdrs.push(h);
        }
        m
    }

    /// Block until at least one datagram arrives; returns how many were received.
    pub fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        for h in self.hdrs.iter_mut() {
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as u32;
            h.msg_hdr.msg_flags = 0;
        }
        loop {
            // SAFETY: hdrs describe BATCH valid buffers.
            let n = unsafe {
                libc::recvmmsg(
                    sock.as_raw_fd(),
                    self.hdrs.as_mut_ptr(),
                    BATCH as u32,
                    libc::MSG_WAITFORONE,
                    std::ptr::null_mut(),
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// [`MmsgBuffers::recv`] until a batch arrives: an ICMP port unreachable (a peer
    /// not up yet) is passed over, any other error logged (naming `bind`, the socket's
    /// address) and tried again 10 ms later.
    pub fn recv_batch(&mut self, sock: &UdpSocket, bind: SocketAddr) -> usize {
        loop {
            match self.recv(sock) {
                Ok(n) => return n,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => {
                    crate::warn!("udp receive failed bind={bind} error={e}");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
        }
    }

    /// Datagram `i` of the last recv: (payload, source, truncated).
    pub fn get(&self, i: usize) -> (&[u8], SocketAddr, bool) {
        let len = (self.hdrs[i].msg_len as usize).min(DGRAM_MAX);
        let a = &self.addrs[i];
        let src = SocketAddr::V4(SocketAddrV4::new(
            u32::from_be(a.sin_addr.s_addr).into(),
            u16::from_be(a.sin_port),
        ));
        let truncated = self.hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        (&self.bufs[i][..len], src, truncated)
    }

    /// Send datagram `i` of the last recv (in place) to `dst` as part of a batch:
    /// `send_batch` sends every datagram in `picks` with one sendmmsg per batch.
    pub fn send_batch(
        &mut self,
        sock: &UdpSocket,
        picks: &[(usize, SocketAddr)],
    ) -> (usize, usize) {
        if picks.is_empty() {
            return (0, 0);
        }
        let mut out: Vec<libc::mmsghdr> = Vec::with_capacity(picks.len());
        let mut names: Vec<libc::sockaddr_in> = Vec::with_capacity(picks.len());
        let mut iovs: Vec<libc::iovec> = Vec::with_capacity(picks.len());
        for &(i, dst) in picks {
            names.push(sockaddr(dst));
            iovs.push(libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr() as *mut libc::c_void,
                iov_len: self.hdrs[i].msg_len as usize,
            });
        }
        for k in 0..picks.len() {
            // SAFETY: pointers into names/iovs, which outlive the call.
            let mut h: libc::mmsghdr = unsafe { mem::zeroed() };
            h.msg_hdr.msg_iov = &mut iovs[k];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_name = &mut names[k] as *mut _ as *mut libc::c_void;
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as u32;
            out.push(h);
        }
        let (mut sent, mut failed) = (0, 0);
        while sent + failed < out.len() {
            // SAFETY: out[sent+failed..] are valid headers.
            let n = unsafe {
                libc::sendmmsg(
                    sock.as_raw_fd(),
                    out.as_mut_ptr().add(sent + failed),
                    (out.len() - sent - failed) as u32,
                    0,
                )
            };
            if n > 0 {
                sent += n as usize;
            } else if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                failed += 1; // skip the datagram that failed
            }
        }
        (sent, failed)
    }
}

fn sockaddr(a: SocketAddr) -> libc::sockaddr_in {
    // SAFETY: plain data.
    let mut s: libc::sockaddr_in = unsafe { mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    if let SocketAddr::V4(v4) = a {
        s.sin_port = v4.port().to_be();
        s.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
    }
    s
}

/// Run the calling thread under SCHED_FIFO at `prio` (0: leave it as it is), so that
/// other work on the host does not delay the packet path. Returns false when refused.
pub fn set_realtime(prio: i32) -> bool {
    if prio == 0 {
        return true;
    }
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: pid 0 is the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

/// [`set_realtime`] for the calling thread, named `thread` in the warning logged when
/// the host refuses it (the thread then runs at normal priority).
pub fn realtime_or_warn(thread: &str, prio: i32) {
    if !set_realtime(prio) {
        crate::warn!(
            "SCHED_FIFO refused thread={thread} priority={prio} (runs at normal priority)"
        );
    }
}

/// Start a thread named `name` running `body` on a shared role.
pub fn spawn_named<R: Send + Sync + 'static>(
    role: &std::sync::Arc<R>,
    name: &str,
    body: fn(&R),
) -> std::io::Result<()> {
    let role = role.clone();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || body(&role))?;
    Ok(())
}
