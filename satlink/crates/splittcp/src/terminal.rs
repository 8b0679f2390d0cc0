//! The accelerated mode at the terminal: it answers the client's connection itself
//! (TPROXY) and carries it over a hop connection to the gateway's hop listener, taken
//! ready from a pool that a background thread keeps full (pool.rs): a client
//! connection costs no handshake across the satellite when one is ready. Its first
//! bytes follow the OPEN frame at once; a hop connection whose stream ended cleanly
//! goes back to the pool, warm, for the next client.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::frame::{self, Open};
use crate::guard::{Guard, Permit};
use crate::pool::{Pool, PoolSettings};
use crate::relay;
use crate::stats::{ConnInfo, HopUse, Stats};
use crate::sys::{self, HopOptions};
use crate::{Destination, Serve};

/// How long a hop connection may take to be accepted (handshake and key proof).
pub const HOP_OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How often idle pooled connections are checked for a peer that closed them.
const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// An open, authenticated hop connection.
#[derive(Debug)]
pub struct Hop {
    pub stream: TcpStream,
    pub id: u64,
    /// Streams it has carried.
    pub streams: u64,
    pub idle_since: Instant,
}

/// Opens hop connections to the gateway's hop listener.
#[derive(Debug)]
pub struct Dialer {
    pub gateway: SocketAddr,
    pub key: Vec<u8>,
    pub hop: HopOptions,
    next_id: AtomicU64,
}

impl Dialer {
    pub fn new(gateway: SocketAddr, key: Vec<u8>, hop: HopOptions) -> Self {
        Self {
            gateway,
            key,
            hop,
            next_id: AtomicU64::new(1),
        }
    }

    /// A new hop connection, once the gateway has accepted its HELLO.
    pub fn dial(&self) -> io::Result<Hop> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let stream = sys::connect(self.gateway, Some(&self.hop))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(HOP_OPEN_TIMEOUT))?;
        let mut challenge = [0u8; frame::CHALLENGE_LEN];
        (&stream).read_exact(&mut challenge)?;
        let nonce = frame::parse_challenge(&challenge)?;
        (&stream).write_all(&frame::hello(&self.key, &nonce, id))?;
        let mut accepted = [0u8; 5];
        (&stream).read_exact(&mut accepted)?;
        frame::check_accepted(&accepted)?;
        stream.set_read_timeout(None)?;
        Ok(Hop {
            stream,
            id,
            streams: 0,
            idle_since: Instant::now(),
        })
    }
}

/// The pool behind a lock, with the refill's wake-up and what it last failed on.
pub struct SharedPool {
    pool: Mutex<Pool<Hop>>,
    wake: Condvar,
    epoch: Instant,
    last_error: Mutex<Option<String>>,
}

impl SharedPool {
    pub fn new(settings: PoolSettings) -> Arc<Self> {
        Arc::new(Self {
            pool: Mutex::new(Pool::new(settings)),
            wake: Condvar::new(),
            epoch: Instant::now(),
            last_error: Mutex::new(None),
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pool<Hop>> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A ready hop connection (dead ones discarded and closed), or None.
    pub fn take(&self) -> Option<Hop> {
        let taken = self.lock().take(|h| sys::idle_and_open(&h.stream));
        self.wake.notify_all();
        drop(taken.dead);
        taken.conn
    }

    /// A hop connection whose stream ended cleanly: ready again (or closed, if the
    /// pool has enough).
    pub fn give_back(&self, mut hop: Hop) {
        hop.idle_since = Instant::now();
        let surplus = self.lock().give_back(hop);
        drop(surplus);
        self.wake.notify_all();
    }

    pub fn snapshot(&self) -> Value {
        let pool = self.lock();
        json!({
            "settings": pool.settings(),
            "ready": pool.ready(),
            "opening": pool.opening(),
            "counters": pool.counters(),
            "last_error": *self.last_error.lock().unwrap_or_else(|e| e.into_inner()),
        })
    }

    pub fn reset_counters(&self) {
        self.lock().reset_counters();
    }

    /// Keep the pool full until the process ends: open what it asks for (each on its
    /// own thread, at most `max_opening` at once) and discard idle connections the
    /// gateway closed.
    pub fn refill_forever(self: Arc<Self>, dialer: Arc<Dialer>, stats: Arc<Stats>) {
        let mut last_sweep = Instant::now();
        loop {
            let mut pool = self.lock();
            let n = pool.start_opens(self.now_ms());
            for _ in 0..n {
                let (shared, dialer, stats) =
                    (Arc::clone(&self), Arc::clone(&dialer), Arc::clone(&stats));
                let spawned = thread::Builder::new()
                    .name("hop-open".into())
                    .spawn(move || shared.open_one(&dialer, &stats));
                if spawned.is_err() {
                    pool.open_failed(self.now_ms());
                }
            }
            if last_sweep.elapsed() >= SWEEP_EVERY {
                last_sweep = Instant::now();
                drop(pool.sweep(|h| sys::idle_and_open(&h.stream)));
            }
            let _unused = self
                .wake
                .wait_timeout(pool, SWEEP_EVERY)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    fn open_one(&self, dialer: &Dialer, stats: &Stats) {
        let opened = dialer.dial();
        let now = self.now_ms();
        match opened {
            Ok(hop) => {
                stats.hop_opened();
                self.lock().opened(hop);
            }
            Err(e) => {
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                    "opening a hop connection to {}: {e}",
                    dialer.gateway
                ));
                self.lock().open_failed(now);
            }
        }
        self.wake.notify_all();
    }
}

/// The accelerated terminal's settings.
pub struct Terminal {
    pub destination: Destination,
    pub guard: Guard,
    pub dialer: Arc<Dialer>,
    pub pool: Arc<SharedPool>,
    next_stream: AtomicU64,
}

impl Terminal {
    pub fn new(
        destination: Destination,
        guard: Guard,
        dialer: Arc<Dialer>,
        pool: Arc<SharedPool>,
    ) -> Self {
        Self {
            destination,
            guard,
            dialer,
            pool,
            next_stream: AtomicU64::new(1),
        }
    }
}

impl Serve for Terminal {
    const THREAD: &'static str = "client";

    /// The pool's refill, for as long as the terminal serves.
    fn start_beside(self: &Arc<Self>, stats: &Arc<Stats>) -> io::Result<()> {
        let (pool, dialer, stats) = (
            Arc::clone(&self.pool),
            Arc::clone(&self.dialer),
            Arc::clone(stats),
        );
        thread::Builder::new()
            .name("refill".into())
            .spawn(move || pool.refill_forever(dialer, stats))?;
        Ok(())
    }

    fn handle(&self, client: TcpStream, peer: SocketAddr, stats: &Stats, _permit: Permit) {
        let Some(to) = self.destination.of(&client, peer, &self.guard, stats) else {
            return;
        };
        stats.accepted();
        let _ = client.set_nodelay(true);
        let mut info = ConnInfo {
            accepted_from: peer.to_string(),
            destination: to.to_string(),
            open: true,
            ..ConnInfo::default()
        };
        let (mut hop, pre_opened) = match self.pool.take() {
            Some(hop) => (hop, true),
            None => match self.dialer.dial() {
                Ok(hop) => {
                    stats.hop_opened();
                    (hop, false)
                }
                Err(e) => {
                    stats.failed_before_relay(info, format!("no hop connection: {e}"));
                    let _ = client.shutdown(Shutdown::Both);
                    return;
                }
            },
        };
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
        info.stream = Some(stream);
        relay::note_relay(&mut info, &hop.stream, hop.stream.as_raw_fd());
        info.hop = Some(HopUse {
            id: hop.id,
            pre_opened,
            streams: hop.streams + 1,
            idle_ms: hop.idle_since.elapsed().as_millis() as u64,
        });
        let open = Open {
            stream,
            destination: to,
            client: sys::v4(peer).unwrap_or(to),
            pre_opened,
        };
        if let Err(e) = frame::write_open(&mut &hop.stream, &open) {
            stats.failed_before_relay(info, format!("hop connection {}: {e}", hop.id));
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        stats.relayed();
        let slot = stats.open(info);
        let relayed = relay::with_hop(&client, &hop.stream, stats, slot, true);
        if relayed.is_ok() {
            hop.streams += 1;
            self.pool.give_back(hop);
        }
    }
}
