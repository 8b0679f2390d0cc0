//! The terminal's pool of pre-opened hop connections (accelerated mode), as logic without
//! I/O: how many connections to open now, which one a client gets, what happens to one
//! that comes back. Time is an argument (milliseconds on any monotonic clock) and
//! liveness a caller's predicate, so that tests run on a simulated clock with
//! connections that are plain numbers.
//!
//! - The pool keeps `size` connections ready. Whenever fewer are ready (a client took
//!   one, one died, an open failed), it asks for new ones, at most `max_opening` at a
//!   time; after a failed open it waits `retry_ms`, doubling up to `retry_max_ms`.
//! - A client takes the most recently returned ready connection first (the warmest:
//!   its windows have grown); connections opened by the refill go to the back. A
//!   connection found dead when taken (closed by the peer while idle) is discarded and
//!   the next one tried; with none ready the client opens its own (a miss).
//! - A connection whose stream ended cleanly comes back and is ready again, in front;
//!   with more than `size + spare` ready, the one at the back (the coldest) is retired.

use serde::Serialize;

/// The pool's settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolSettings {
    /// Ready connections the pool keeps.
    pub size: usize,
    /// Connections being opened at once, at most (the refill's pace).
    pub max_opening: usize,
    /// Ready connections kept beyond `size` when clients give theirs back.
    pub spare: usize,
    /// The wait after a failed open, doubled after each further failure.
    pub retry_ms: u64,
    /// The longest wait after failed opens.
    pub retry_max_ms: u64,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            size: 8,
            max_opening: 4,
            spare: 8,
            retry_ms: 200,
            retry_max_ms: 5_000,
        }
    }
}

/// What the pool did since its counters were last reset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PoolCounters {
    /// Connections opened by the refill and made ready.
    pub opened: u64,
    /// Opens that failed (the refill then waits).
    pub open_failed: u64,
    /// Clients that got a ready (pre-opened) connection.
    pub taken_ready: u64,
    /// Clients that found none ready and opened their own.
    pub missed: u64,
    /// Ready connections found dead (closed by the peer while idle) and discarded.
    pub discarded_dead: u64,
    /// Connections that came back after a clean stream and were made ready again.
    pub returned: u64,
    /// Ready connections closed because more than `size + spare` were ready.
    pub retired: u64,
}

/// The pool: `C` is a connection (a socket in the proxy, a number in tests).
#[derive(Debug)]
pub struct Pool<C> {
    settings: PoolSettings,
    /// Ready connections; the last is the next one given.
    ready: Vec<C>,
    opening: usize,
    failures: u32,
    retry_at_ms: Option<u64>,
    counters: PoolCounters,
}

/// What `take` found: a ready connection or none, and the dead ones it discarded (the
/// caller closes them).
#[derive(Debug)]
pub struct Taken<C> {
    pub conn: Option<C>,
    pub dead: Vec<C>,
}

impl<C> Pool<C> {
    pub fn new(settings: PoolSettings) -> Self {
        Self {
            settings,
            ready: Vec::new(),
            opening: 0,
            failures: 0,
            retry_at_ms: None,
            counters: PoolCounters::default(),
        }
    }

    pub fn settings(&self) -> &PoolSettings {
        &self.settings
    }

    /// How many opens the caller should start now; they count as opening until
    /// `opened` or `open_failed` says how each ended.
    pub fn start_opens(&mut self, now_ms: u64) -> usize {
        if self.retry_at_ms.is_some_and(|at| now_ms < at) {
            return 0;
        }
        let wanted = self
            .settings
            .size
            .saturating_sub(self.ready.len() + self.opening);
        let n = wanted.min(self.settings.max_opening.saturating_sub(self.opening));
        self.opening += n;
        n
    }

    /// An open succeeded: the connection is ready, behind the warmer ones.
    pub fn opened(&mut self, conn: C) {
        self.opening = self.opening.saturating_sub(1);
        self.failures = 0;
        self.retry_at_ms = None;
        self.counters.opened += 1;
        self.ready.insert(0, conn);
    }

    /// An open failed: no further open before the retry wait has passed.
    pub fn open_failed(&mut self, now_ms: u64) {
        self.opening = self.opening.saturating_sub(1);
        self.failures = self.failures.saturating_add(1);
        self.counters.open_failed += 1;
        let doublings = (self.failures - 1).min(20);
        let wait = self
            .settings
            .retry_ms
            .saturating_mul(1 << doublings)
            .min(self.settings.retry_max_ms);
        self.retry_at_ms = Some(now_ms.saturating_add(wait));
    }

    /// A ready connection for a client, the warmest first; connections `alive` says are
    /// dead are discarded on the way. None (a miss): the client opens its own.
    pub fn take(&mut self, mut alive: impl FnMut(&C) -> bool) -> Taken<C> {
        let mut dead = Vec::new();
        while let Some(conn) = self.ready.pop() {
            if alive(&conn) {
                self.counters.taken_ready += 1;
                return Taken {
                    conn: Some(conn),
                    dead,
                };
            }
            self.counters.discarded_dead += 1;
            dead.push(conn);
        }
        self.counters.missed += 1;
        Taken { conn: None, dead }
    }

    /// A connection back from a client whose stream ended cleanly: ready again, in
    /// front. Returns the connection to close when that makes too many ready.
    pub fn give_back(&mut self, conn: C) -> Option<C> {
        self.counters.returned += 1;
        self.ready.push(conn);
        if self.ready.len() > self.settings.size + self.settings.spare {
            self.counters.retired += 1;
            return Some(self.ready.remove(0));
        }
        None
    }

    /// The ready connections `alive` says are dead, removed (the caller closes them).
    pub fn sweep(&mut self, mut alive: impl FnMut(&C) -> bool) -> Vec<C> {
        let mut dead = Vec::new();
        let mut kept = Vec::with_capacity(self.ready.len());
        for conn in self.ready.drain(..) {
            if alive(&conn) {
                kept.push(conn);
            } else {
                dead.push(conn);
            }
        }
        self.counters.discarded_dead += dead.len() as u64;
        self.ready = kept;
        dead
    }

    /// Every ready connection, removed (the caller closes them: the proxy stops).
    pub fn drain(&mut self) -> Vec<C> {
        std::mem::take(&mut self.ready)
    }

    pub fn ready(&self) -> usize {
        self.ready.len()
    }

    pub fn opening(&self) -> usize {
        self.opening
    }

    pub fn counters(&self) -> &PoolCounters {
        &self.counters
    }

    pub fn reset_counters(&mut self) {
        self.counters = PoolCounters::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn settings(size: usize, max_opening: usize) -> PoolSettings {
        PoolSettings {
            size,
            max_opening,
            spare: 2,
            retry_ms: 100,
            retry_max_ms: 1_000,
        }
    }

    /// Open what the pool asks for, numbering connections from `next`.
    fn fill(pool: &mut Pool<u32>, next: &mut u32, now_ms: u64) -> usize {
        let n = pool.start_opens(now_ms);
        for _ in 0..n {
            pool.opened(*next);
            *next += 1;
        }
        n
    }

    #[test]
    fn refill_keeps_size_ready_at_most_max_opening_at_a_time() {
        let mut pool = Pool::new(settings(5, 2));
        assert_eq!(pool.start_opens(0), 2);
        assert_eq!(pool.start_opens(0), 0, "two opening already");
        pool.opened(1);
        assert_eq!((pool.ready(), pool.opening()), (1, 1));
        assert_eq!(pool.start_opens(1), 1);
        pool.opened(2);
        pool.opened(3);
        let mut next = 4;
        assert_eq!(fill(&mut pool, &mut next, 2), 2);
        assert_eq!(pool.ready(), 5);
        assert_eq!(pool.start_opens(3), 0, "full");
        // A client takes one: the refill replaces it.
        assert!(pool.take(|_| true).conn.is_some());
        assert_eq!(pool.start_opens(4), 1);
        assert_eq!(pool.counters().opened, 5);
    }

    #[test]
    fn exhaustion_is_a_miss_and_the_client_opens_its_own() {
        let mut pool = Pool::new(settings(2, 2));
        let mut next = 1;
        fill(&mut pool, &mut next, 0);
        let a = pool.take(|_| true).conn;
        let b = pool.take(|_| true).conn;
        assert!(a.is_some() && b.is_some() && a != b);
        let none = pool.take(|_| true);
        assert!(none.conn.is_none() && none.dead.is_empty());
        let c = pool.counters();
        assert_eq!((c.taken_ready, c.missed), (2, 1));
        // The refill was asked for both as soon as they were taken.
        assert_eq!(pool.start_opens(1), 2);
    }

    #[test]
    fn a_connection_that_died_while_idle_is_never_handed_out() {
        let mut pool = Pool::new(settings(3, 3));
        let mut next = 1;
        fill(&mut pool, &mut next, 0); // ready: 3 2 1 (1 given first)
        let dead: HashSet<u32> = [1, 2].into();
        let taken = pool.take(|c| !dead.contains(c));
        assert_eq!(taken.conn, Some(3));
        assert_eq!(taken.dead, vec![1, 2], "discarded for the caller to close");
        assert_eq!(pool.counters().discarded_dead, 2);
        assert_eq!(pool.ready(), 0);
        // All three are replaced.
        assert_eq!(pool.start_opens(1), 3);
    }

    #[test]
    fn sweep_removes_idle_connections_the_peer_closed() {
        let mut pool = Pool::new(settings(4, 4));
        let mut next = 1;
        fill(&mut pool, &mut next, 0);
        let dead = pool.sweep(|c| c % 2 == 1);
        assert_eq!(dead, vec![4, 2]);
        assert_eq!(pool.ready(), 2);
        assert_eq!(pool.start_opens(1), 2);
        // What is left is handed out as before.
        assert!(pool.take(|_| true).conn.is_some_and(|c| c % 2 == 1));
    }

    #[test]
    fn a_returned_connection_is_given_first_and_the_coldest_retired() {
        let mut pool = Pool::new(settings(2, 2)); // keeps at most 2 + 2 ready
        let mut next = 1;
        fill(&mut pool, &mut next, 0); // ready: 2 1
        let warm = pool.take(|_| true).conn.unwrap();
        assert_eq!(warm, 1);
        fill(&mut pool, &mut next, 1); // the refill: 3 2
        assert_eq!(pool.give_back(warm), None);
        assert_eq!(pool.take(|_| true).conn, Some(1), "the warm one again");
        assert_eq!(pool.give_back(1), None);
        assert_eq!(pool.give_back(10), None);
        assert_eq!(pool.ready(), 4);
        assert_eq!(pool.give_back(11), Some(3), "the coldest goes");
        let c = pool.counters();
        assert_eq!((c.returned, c.retired), (4, 1));
    }

    #[test]
    fn failed_opens_back_off_and_a_success_resets_the_wait() {
        let mut pool = Pool::new(settings(1, 1));
        assert_eq!(pool.start_opens(0), 1);
        pool.open_failed(0);
        assert_eq!(pool.start_opens(99), 0, "waits 100 ms");
        assert_eq!(pool.start_opens(100), 1);
        pool.open_failed(100);
        assert_eq!(pool.start_opens(299), 0, "then 200 ms");
        assert_eq!(pool.start_opens(300), 1);
        for at in [300, 700, 1500, 2500] {
            pool.open_failed(at);
            assert_eq!(pool.start_opens(at), 0);
            assert_eq!(pool.start_opens(at + 1_000), 1, "at most 1 s");
        }
        pool.opened(7);
        pool.take(|_| true);
        assert_eq!(pool.start_opens(3_500), 1, "no wait after a success");
        assert_eq!(pool.counters().open_failed, 6);
    }

    #[test]
    fn counters_reset_without_losing_connections() {
        let mut pool = Pool::new(settings(2, 2));
        let mut next = 1;
        fill(&mut pool, &mut next, 0);
        pool.take(|_| true);
        pool.reset_counters();
        assert_eq!(pool.counters(), &PoolCounters::default());
        assert_eq!(pool.ready(), 1);
        assert_eq!(pool.drain(), vec![2]);
        assert_eq!(pool.ready(), 0);
    }
}
