//! splittcp: Clarke's split-TCP performance-enhancing proxy (PEP), run at both ends of
//! the satellite hop (the terminal and the gateway). UDP (QUIC) is never touched: only
//! TCP is handed to it (iptables TPROXY, or a plain listener with a fixed destination
//! in tests). Two modes (docs/peps.md):
//!
//! - `split` (split.rs): each station relays every connection over one of its own; the
//!   hop carries the terminal's own connection, opened when the client's arrives.
//! - `accelerated` (terminal.rs, gateway.rs): the terminal answers the client and
//!   sends its bytes over a hop connection it opened beforehand (pool.rs) to the
//!   gateway's hop listener, with a small header naming the destination (frame.rs);
//!   the gateway connects to the server. The hop's sockets carry the settings that let
//!   it start at the link's rate (sys::HopOptions, and the route's initcwnd the
//!   station's agent sets).
//!
//! Every listener takes only what it is there for (guard.rs): the transparent one
//! listens on loopback and relays only to the server's LAN, never to the proxy's own
//! host; the hop listener takes only the terminal's link address and a connection that
//! proves the testbed's key; connections at once are bounded.

pub mod control;
pub mod frame;
pub mod gateway;
pub mod guard;
pub mod pool;
pub mod relay;
pub mod split;
pub mod stats;
pub mod sys;
pub mod tcpinfo;
pub mod terminal;

use std::io;
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

pub use guard::{Guard, Limit, Prefix};
pub use split::Proxy;
pub use stats::{ConnInfo, Refusal, Snapshot, Stats};
pub use sys::HopOptions;

/// Which of a relayed connection's two sockets crosses the satellite hop (the pure
/// split).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HopSide {
    /// The proxy's own outbound connection (the terminal).
    Outbound,
    /// The connection the proxy accepted (the gateway).
    Inbound,
}

/// Where each accepted connection is relayed to.
#[derive(Clone, Copy, Debug)]
pub enum Destination {
    /// Where the client was going (TPROXY: the accepted socket's local address).
    Original,
    /// Always here (a plain listener: tests and local experiments).
    Fixed(SocketAddrV4),
}

impl Destination {
    /// Where `conn` from `peer` goes, if the guard lets it; otherwise it is counted as
    /// refused and closed.
    pub fn of(
        &self,
        conn: &TcpStream,
        peer: SocketAddr,
        guard: &Guard,
        stats: &Stats,
    ) -> Option<SocketAddrV4> {
        let to = match self {
            Destination::Fixed(to) => Ok(*to),
            Destination::Original => conn.local_addr().and_then(sys::v4),
        };
        let verdict = match (to, sys::v4(peer)) {
            (Ok(to), Ok(peer)) => guard.check(peer, to, sys::is_local).map(|()| to),
            _ => Err(Refusal::Destination),
        };
        match verdict {
            Ok(to) => Some(to),
            Err(why) => {
                stats.refused(why);
                let _ = conn.shutdown(Shutdown::Both);
                None
            }
        }
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNABORTED | libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// A listening side of the proxy (the split proxy, the accelerated terminal, the
/// gateway's hop listener): each accepted connection handled in a thread of its own.
pub trait Serve: Send + Sync + Sized + 'static {
    /// The name of each connection's thread.
    const THREAD: &'static str;

    /// One accepted connection from `peer`, holding its permit until it ends.
    fn handle(&self, conn: TcpStream, peer: SocketAddr, stats: &Stats, permit: guard::Permit);

    /// What runs beside the connections from the start (the terminal's pool refill).
    fn start_beside(self: &Arc<Self>, _stats: &Arc<Stats>) -> io::Result<()> {
        Ok(())
    }

    /// Accept until the listener fails; each connection within the limit is handled in
    /// a thread of its own, holding its permit; the others are closed at once
    /// (refused: limit). Out of file descriptors, the loop waits a little instead of
    /// spinning.
    fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        stats: Arc<Stats>,
        limit: Arc<Limit>,
    ) -> io::Result<()> {
        self.start_beside(&stats)?;
        loop {
            let (conn, peer) = match listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_transient(&e) => {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Some(permit) = limit.try_acquire() else {
                stats.refused(Refusal::Limit);
                continue; // dropped: closed
            };
            let (role, stats_of_thread) = (Arc::clone(&self), Arc::clone(&stats));
            let spawned = std::thread::Builder::new()
                .name(Self::THREAD.into())
                .spawn(move || role.handle(conn, peer, &stats_of_thread, permit));
            if spawned.is_err() {
                stats.refused(Refusal::Limit); // no thread to be had
            }
        }
    }
}

/// What the control socket reports: the stats, the bound on connections and, at the
/// accelerated terminal, its pool.
pub struct Reporter {
    pub stats: Arc<Stats>,
    pub limit: Arc<Limit>,
    pub pool: Option<Arc<terminal::SharedPool>>,
}

impl Reporter {
    pub fn stats(&self) -> Value {
        let mut out = serde_json::to_value(self.stats.snapshot()).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut out {
            map.insert("open_connections".into(), json!(self.limit.in_use()));
            map.insert("max_connections".into(), json!(self.limit.max()));
            if let Some(pool) = &self.pool {
                map.insert("pool".into(), pool.snapshot());
            }
        }
        out
    }

    pub fn reset(&self) {
        self.stats.reset();
        if let Some(pool) = &self.pool {
            pool.reset_counters();
        }
    }
}

#[cfg(test)]
mod tests;
