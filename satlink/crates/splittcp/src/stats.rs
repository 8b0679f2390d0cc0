//! What a proxy counts, and lists per connection, since its stats were last reset.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::tcpinfo::TcpInfo;

/// At most this many connections are listed in the stats (counters keep counting).
pub const MAX_LISTED: usize = 4096;

/// The hop connection a client's connection took (accelerated mode).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HopUse {
    /// The hop connection's number (the terminal's, named in its HELLO).
    pub id: u64,
    /// Taken from the pool of pre-opened connections (false: opened for this client).
    pub pre_opened: bool,
    /// How many streams the hop connection has carried, this one included.
    pub streams: u64,
    /// How long it had been idle before this stream, in milliseconds.
    pub idle_ms: u64,
}

/// One relayed connection as the stats list it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ConnInfo {
    /// The peer of the accepted connection (the client, or the terminal's proxy).
    pub accepted_from: String,
    /// The destination the peer asked for.
    pub destination: String,
    /// The local address of the proxy's own connection ("" when it failed).
    pub relayed_from: String,
    /// The congestion control in force on the satellite-hop socket.
    pub hop_cc: String,
    pub bytes_to_server: u64,
    pub bytes_to_client: u64,
    pub error: Option<String>,
    pub open: bool,
    /// Accelerated: the stream's number, the same in the terminal's and the gateway's row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<u64>,
    /// Accelerated: the hop connection that carried the stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop: Option<HopUse>,
    /// The hop socket's TCP_INFO as this proxy sent the connection's first bytes onto
    /// the hop (the terminal: the client's; the gateway: the server's): the window
    /// that first write went out with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop_first_data: Option<TcpInfo>,
}

/// Why a connection was closed without anything relayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It came from outside the allowed sources.
    Source,
    /// It was for a destination outside the allowed ones.
    Destination,
    /// It was for an address of the proxy's own host (a relay to itself).
    OwnAddress,
    /// The proxy had as many connections as it may.
    Limit,
    /// A hop connection that did not prove the key in time.
    Auth,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    relayed: AtomicU64,
    failed: AtomicU64,
    bytes_to_server: AtomicU64,
    bytes_to_client: AtomicU64,
    hops_opened: AtomicU64,
    hops_accepted: AtomicU64,
    refused_source: AtomicU64,
    refused_destination: AtomicU64,
    refused_own_address: AtomicU64,
    refused_limit: AtomicU64,
    refused_auth: AtomicU64,
}

impl Counters {
    fn all(&self) -> [&AtomicU64; 12] {
        [
            &self.accepted,
            &self.relayed,
            &self.failed,
            &self.bytes_to_server,
            &self.bytes_to_client,
            &self.hops_opened,
            &self.hops_accepted,
            &self.refused_source,
            &self.refused_destination,
            &self.refused_own_address,
            &self.refused_limit,
            &self.refused_auth,
        ]
    }
}

/// The proxy's counters and the list of its connections since the last reset.
#[derive(Default)]
pub struct Stats {
    counters: Counters,
    conns: Mutex<Vec<ConnInfo>>,
    generation: AtomicU64,
}

/// Connections refused, by reason.
#[derive(Debug, Default, Serialize)]
pub struct Refusals {
    pub source: u64,
    pub destination: u64,
    pub own_address: u64,
    pub limit: u64,
    pub auth: u64,
}

/// What the control socket's `stats` answers (with the pool's, where there is one).
#[derive(Debug, Serialize)]
pub struct Snapshot {
    pub accepted: u64,
    pub relayed: u64,
    pub failed: u64,
    pub bytes_to_server: u64,
    pub bytes_to_client: u64,
    /// The terminal: hop connections it opened and the gateway accepted (pool and
    /// clients that found none ready).
    pub hops_opened: u64,
    /// The gateway: hop connections that proved the key.
    pub hops_accepted: u64,
    /// Connections closed without anything relayed (by reason in `refusals`).
    pub refused: u64,
    pub refusals: Refusals,
    pub connections: Vec<ConnInfo>,
}

/// A connection's place in the list: (generation, index), None when not listed.
pub type Slot = Option<(u64, usize)>;

impl Stats {
    pub fn snapshot(&self) -> Snapshot {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let refusals = Refusals {
            source: get(&c.refused_source),
            destination: get(&c.refused_destination),
            own_address: get(&c.refused_own_address),
            limit: get(&c.refused_limit),
            auth: get(&c.refused_auth),
        };
        Snapshot {
            accepted: get(&c.accepted),
            relayed: get(&c.relayed),
            failed: get(&c.failed),
            bytes_to_server: get(&c.bytes_to_server),
            bytes_to_client: get(&c.bytes_to_client),
            hops_opened: get(&c.hops_opened),
            hops_accepted: get(&c.hops_accepted),
            refused: refusals.source
                + refusals.destination
                + refusals.own_address
                + refusals.limit
                + refusals.auth,
            refusals,
            connections: self.conns.lock().map(|v| v.clone()).unwrap_or_default(),
        }
    }

    /// Zero the counters and forget listed connections (open ones stop being updated).
    pub fn reset(&self) {
        for counter in self.counters.all() {
            counter.store(0, Ordering::Relaxed);
        }
        self.generation.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut v) = self.conns.lock() {
            v.clear();
        }
    }

    pub fn accepted(&self) {
        self.counters.accepted.fetch_add(1, Ordering::Relaxed);
    }

    pub fn relayed(&self) {
        self.counters.relayed.fetch_add(1, Ordering::Relaxed);
    }

    pub fn failed(&self) {
        self.counters.failed.fetch_add(1, Ordering::Relaxed);
    }

    pub fn hop_opened(&self) {
        self.counters.hops_opened.fetch_add(1, Ordering::Relaxed);
    }

    pub fn hop_accepted(&self) {
        self.counters.hops_accepted.fetch_add(1, Ordering::Relaxed);
    }

    pub fn refused(&self, why: Refusal) {
        let c = &self.counters;
        let counter = match why {
            Refusal::Source => &c.refused_source,
            Refusal::Destination => &c.refused_destination,
            Refusal::OwnAddress => &c.refused_own_address,
            Refusal::Limit => &c.refused_limit,
            Refusal::Auth => &c.refused_auth,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes relayed towards the server (`up`) or the client, for a listed connection.
    pub fn bytes(&self, slot: Slot, up: bool, n: u64) {
        let c = &self.counters;
        if up {
            c.bytes_to_server.fetch_add(n, Ordering::Relaxed);
            self.update(slot, |i| i.bytes_to_server += n);
        } else {
            c.bytes_to_client.fetch_add(n, Ordering::Relaxed);
            self.update(slot, |i| i.bytes_to_client += n);
        }
    }

    /// A connection that failed before anything was relayed: counted as failed and
    /// listed, closed, with `error`.
    pub fn failed_before_relay(&self, mut info: ConnInfo, error: String) {
        self.failed();
        info.error = Some(error);
        info.open = false;
        self.open(info);
    }

    /// List a new connection; its slot for later updates.
    pub fn open(&self, info: ConnInfo) -> Slot {
        let generation = self.generation.load(Ordering::Relaxed);
        let mut v = self.conns.lock().ok()?;
        if v.len() >= MAX_LISTED {
            return None;
        }
        v.push(info);
        Some((generation, v.len() - 1))
    }

    pub fn update(&self, slot: Slot, f: impl FnOnce(&mut ConnInfo)) {
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
