//! splittcp: a transparent split-TCP performance-enhancing proxy (PEP).
//!
//! Each instance terminates the TCP connections it takes (from TPROXY, or on a plain
//! listener with a fixed destination in tests) and relays their bytes over a
//! connection of its own to the destination the client asked for. Run at both ends of
//! a satellite hop, the hop carries only the proxies' own connection, whose congestion
//! control and buffers are chosen for it (`HopOptions`), while each LAN side keeps a
//! short, fast connection. UDP (QUIC) is never touched: only TCP is intercepted.
//!
//! Which socket is the satellite hop's: the outbound one at the terminal (it crosses
//! the link towards the gateway), the accepted one at the gateway.

pub mod control;
pub mod sys;

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use serde::Serialize;

pub use sys::HopOptions;

/// At most this many connections are listed in the stats (counters keep counting).
pub const MAX_LISTED: usize = 4096;
const RELAY_BUFFER: usize = 256 * 1024;

/// Which of a relayed connection's two sockets crosses the satellite hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HopSide {
    /// The proxy's own outbound connection (the terminal).
    Outbound,
    /// The connection the proxy accepted (the gateway).
    Inbound,
}

/// One relayed connection as the stats list it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ConnInfo {
    /// The peer of the accepted connection (the client, or the terminal's proxy).
    pub accepted_from: String,
    /// The destination the peer asked for (the accepted socket's local address).
    pub destination: String,
    /// The local address of the proxy's own connection ("" when it failed).
    pub relayed_from: String,
    /// The congestion control in force on the satellite-hop socket.
    pub hop_cc: String,
    pub bytes_to_server: u64,
    pub bytes_to_client: u64,
    pub error: Option<String>,
    pub open: bool,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    relayed: AtomicU64,
    failed: AtomicU64,
    bytes_to_server: AtomicU64,
    bytes_to_client: AtomicU64,
}

/// The proxy's counters and the list of its connections since the last reset.
#[derive(Default)]
pub struct Stats {
    counters: Counters,
    conns: Mutex<Vec<ConnInfo>>,
    generation: AtomicU64,
}

/// What the control socket's `stats` answers.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    pub accepted: u64,
    pub relayed: u64,
    pub failed: u64,
    pub bytes_to_server: u64,
    pub bytes_to_client: u64,
    pub connections: Vec<ConnInfo>,
}

impl Stats {
    pub fn snapshot(&self) -> Snapshot {
        let c = &self.counters;
        Snapshot {
            accepted: c.accepted.load(Ordering::Relaxed),
            relayed: c.relayed.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            bytes_to_server: c.bytes_to_server.load(Ordering::Relaxed),
            bytes_to_client: c.bytes_to_client.load(Ordering::Relaxed),
            connections: self.conns.lock().map(|v| v.clone()).unwrap_or_default(),
        }
    }

    /// Zero the counters and forget listed connections (open ones stop being updated).
    pub fn reset(&self) {
        let c = &self.counters;
        for counter in [
            &c.accepted,
            &c.relayed,
            &c.failed,
            &c.bytes_to_server,
            &c.bytes_to_client,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        self.generation.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut v) = self.conns.lock() {
            v.clear();
        }
    }

    /// Register a new connection; its slot (generation, index) for later updates.
    fn open(&self, info: ConnInfo) -> Option<(u64, usize)> {
        let generation = self.generation.load(Ordering::Relaxed);
        let mut v = self.conns.lock().ok()?;
        if v.len() >= MAX_LISTED {
            return None;
        }
        v.push(info);
        Some((generation, v.len() - 1))
    }

    fn update(&self, slot: Option<(u64, usize)>, f: impl FnOnce(&mut ConnInfo)) {
        let Some((generation, i)) = slot else { return };
        if self.generation.load(Ordering::Relaxed) != generation {
            return; // reset since: the slot belongs to someone else now
        }
        if let Ok(mut v) = self.conns.lock() {
            if let Some(info) = v.get_mut(i) {
                f(info);
            }
        }
    }
}

/// Where each accepted connection is relayed to.
#[derive(Clone, Copy, Debug)]
pub enum Destination {
    /// Where the client was going (TPROXY: the accepted socket's local address).
    Original,
    /// Always here (a plain listener: tests and local experiments).
    Fixed(SocketAddr),
}

/// The proxy's settings.
#[derive(Clone, Debug)]
pub struct Proxy {
    pub destination: Destination,
    pub hop_side: HopSide,
    pub hop: HopOptions,
}

impl Proxy {
    /// Accept and relay until the listener fails; one thread per direction of each
    /// connection (a page load opens a handful).
    pub fn serve(self: Arc<Self>, listener: TcpListener, stats: Arc<Stats>) -> io::Result<()> {
        loop {
            let (inbound, peer) = match listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_transient(&e) => continue,
                Err(e) => return Err(e),
            };
            stats.counters.accepted.fetch_add(1, Ordering::Relaxed);
            let proxy = Arc::clone(&self);
            let stats = Arc::clone(&stats);
            thread::Builder::new()
                .name("conn".into())
                .spawn(move || proxy.handle(inbound, peer, &stats))?;
        }
    }

    fn handle(&self, inbound: TcpStream, peer: SocketAddr, stats: &Stats) {
        let wanted = match (self.destination, inbound.local_addr()) {
            (Destination::Fixed(to), _) => Ok(to),
            (Destination::Original, Ok(local)) => Ok(local),
            (Destination::Original, Err(e)) => Err(e),
        };
        let mut info = ConnInfo {
            accepted_from: peer.to_string(),
            open: true,
            ..ConnInfo::default()
        };
        let _ = inbound.set_nodelay(true);
        if self.hop_side == HopSide::Inbound {
            // Inherited from the listener already where the kernel does; set again so
            // that the hop's algorithm is certain before any data is sent.
            let _ = sys::apply_hop(
                inbound.as_raw_fd(),
                &HopOptions {
                    buffer_bytes: 0,
                    ..self.hop.clone()
                },
            );
        }
        let outbound = wanted.and_then(|to| {
            info.destination = to.to_string();
            let hop = (self.hop_side == HopSide::Outbound).then_some(&self.hop);
            sys::connect(to, hop)
        });
        let outbound = match outbound {
            Ok(s) => s,
            Err(e) => {
                stats.counters.failed.fetch_add(1, Ordering::Relaxed);
                info.error = Some(e.to_string());
                info.open = false;
                stats.open(info);
                let _ = inbound.shutdown(Shutdown::Both);
                return;
            }
        };
        let _ = outbound.set_nodelay(true);
        stats.counters.relayed.fetch_add(1, Ordering::Relaxed);
        info.relayed_from = outbound
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let hop_fd = match self.hop_side {
            HopSide::Outbound => outbound.as_raw_fd(),
            HopSide::Inbound => inbound.as_raw_fd(),
        };
        info.hop_cc = sys::congestion(hop_fd).unwrap_or_default();
        let slot = stats.open(info);
        relay(inbound, outbound, stats, slot);
        stats.update(slot, |c| c.open = false);
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNABORTED | libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Copy both directions until each has ended: an end of stream is passed on as a
/// half-close (shutdown of writing), an error resets both sides.
fn relay(inbound: TcpStream, outbound: TcpStream, stats: &Stats, slot: Option<(u64, usize)>) {
    let (Ok(in2), Ok(out2)) = (inbound.try_clone(), outbound.try_clone()) else {
        let _ = inbound.shutdown(Shutdown::Both);
        let _ = outbound.shutdown(Shutdown::Both);
        return;
    };
    thread::scope(|s| {
        s.spawn(|| pump(&inbound, &out2, stats, slot, true));
        pump(&outbound, &in2, stats, slot, false);
    });
}

fn pump(
    mut from: &TcpStream,
    mut to: &TcpStream,
    stats: &Stats,
    slot: Option<(u64, usize)>,
    up: bool,
) {
    let mut buf = vec![0u8; RELAY_BUFFER];
    let result = loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => break Err(e),
        };
        if let Err(e) = to.write_all(&buf[..n]) {
            break Err(e);
        }
        let n = n as u64;
        let c = &stats.counters;
        if up {
            c.bytes_to_server.fetch_add(n, Ordering::Relaxed);
            stats.update(slot, |i| i.bytes_to_server += n);
        } else {
            c.bytes_to_client.fetch_add(n, Ordering::Relaxed);
            stats.update(slot, |i| i.bytes_to_client += n);
        }
    };
    match result {
        Ok(()) => {
            let _ = to.shutdown(Shutdown::Write);
        }
        Err(e) => {
            stats.update(slot, |i| {
                i.error.get_or_insert_with(|| e.to_string());
            });
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests;
