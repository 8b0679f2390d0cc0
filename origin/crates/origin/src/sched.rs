//! Which response on a connection sends next: the scheduler (`round-robin`, `sequential`,
//! `rfc9218`), the RFC 9218 priority of a response, and the decision itself, without I/O.
//!
//! - **HTTP/2** (hyper + h2): h2 keeps, per connection, a queue of the streams that have
//!   response data buffered and writes one DATA frame (at most the peer's
//!   SETTINGS_MAX_FRAME_SIZE, 16 KiB unless raised) from the stream at its head, then puts
//!   that stream at the back: round-robin per frame among the responses whose bytes are
//!   in h2's buffers. It has no priority API and reads no priority signal. `round-robin`
//!   leaves it so. `sequential` and `rfc9218` gate each response body: a body hands its
//!   next 16 KiB to hyper only when [`Queue::head`] names its stream, and h2 may buffer at
//!   most `body::GATED_SEND_BUF` (one frame) per stream; a response keeps its turn until
//!   its END_STREAM frame or a reset is written (tap.rs sees them), so h2 cannot write a
//!   next response's frame before the last one of the response before; a response whose
//!   end is never written gives its turn up after [`RELEASE_AFTER`] with none of its
//!   frames written (gate.rs), and its exchange says so.
//! - **HTTP/3** (h3 + quinn): quinn keeps a heap of the streams with unsent data, ordered
//!   by a per-stream `i32` priority (higher first) and, within one priority, round-robin
//!   per STREAM frame (its `send_fairness`, on by default). All streams have priority 0
//!   by default: round-robin per packet. `sequential` and `rfc9218` put each response
//!   through the same [`Queue`] before it hands a chunk to quinn, keyed by the order
//!   requests arrived (a browser may send a later stream's request first over QUIC),
//!   and give its stream the priority [`quinn_priority`] computes, so that what quinn
//!   still holds of the response before goes out first.
//!
//! A response takes its place in the queue when its request arrives (tcp.rs, quic.rs),
//! so it waits for every response asked before it, also one still being read or held.
//!
//! RFC 9218 section 10: higher urgency first; non-incremental responses of one urgency
//! one at a time in ascending stream ID (request order); incremental responses of one
//! urgency share the bandwidth round-robin. Where incremental and non-incremental
//! responses share an urgency the RFC says nothing; origin serves the non-incremental
//! ones first, as quiche and lsquic do.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

/// A connection's stream scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheduler {
    /// The stacks' own: h2's round-robin per DATA frame, quinn's per STREAM frame.
    #[default]
    RoundRobin,
    /// One response at a time, in request (stream ID) order.
    Sequential,
    /// RFC 9218: urgency first, then non-incremental in stream order, incremental
    /// round-robin.
    Rfc9218,
}

impl Scheduler {
    pub const NAMES: [&'static str; 3] = ["round-robin", "sequential", "rfc9218"];

    pub fn name(self) -> &'static str {
        match self {
            Self::RoundRobin => "round-robin",
            Self::Sequential => "sequential",
            Self::Rfc9218 => "rfc9218",
        }
    }

    /// Whether response bodies pass through a [`Queue`] (HTTP/2) and streams get
    /// priorities (HTTP/3); `round-robin` leaves both stacks as they are.
    pub fn orders(self) -> bool {
        self != Self::RoundRobin
    }
}

impl fmt::Display for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Scheduler {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// An unknown scheduler name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheduler {0:?} (expected round-robin, sequential, rfc9218)")]
pub struct UnknownScheduler(pub String);

impl FromStr for Scheduler {
    type Err = UnknownScheduler;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "round-robin" => Ok(Self::RoundRobin),
            "sequential" => Ok(Self::Sequential),
            "rfc9218" => Ok(Self::Rfc9218),
            other => Err(UnknownScheduler(other.into())),
        }
    }
}

/// RFC 9218 section 4: a response's urgency (0 most urgent .. 7) and incremental flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Priority {
    pub urgency: u8,
    pub incremental: bool,
}

/// RFC 9218 4.1: the urgency of a request that says none.
pub const DEFAULT_URGENCY: u8 = 3;
const MAX_URGENCY: u8 = 7;

impl Default for Priority {
    fn default() -> Self {
        Self {
            urgency: DEFAULT_URGENCY,
            incremental: false,
        }
    }
}

impl Priority {
    /// The priority a Priority header or a PRIORITY_UPDATE frame's field value gives
    /// (an RFC 8941 dictionary such as `u=5, i`). Every parameter it omits takes its
    /// default (RFC 9218 7: a PRIORITY_UPDATE carries the whole priority), and a
    /// parameter with an unusable value is ignored (4.1, 4.2), as are unknown ones.
    pub fn parse(field: &str) -> Self {
        let mut p = Self::default();
        for member in field.split(',') {
            let member = member.trim();
            // Parameters of a member (";...") carry nothing RFC 9218 defines.
            let member = member.split(';').next().unwrap_or("").trim();
            let (key, value) = match member.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (member, None),
            };
            match (key, value) {
                ("u", Some(v)) => {
                    if let Ok(u) = v.parse::<u8>() {
                        if u <= MAX_URGENCY && !v.starts_with('+') {
                            p.urgency = u;
                        }
                    }
                }
                ("i", None) | ("i", Some("?1")) => p.incremental = true,
                ("i", Some("?0")) => p.incremental = false,
                _ => {}
            }
        }
        p
    }
}

/// The quinn priority of an HTTP/3 response stream (quinn sends higher values first and
/// shares one value round-robin). `index` is the request's place in the connection's
/// request order (lower first).
pub fn quinn_priority(scheduler: Scheduler, index: u64, priority: Priority) -> i32 {
    // Room for 2^24 - 1 request streams per urgency; later ones share the last slot.
    const SLOTS: u64 = 1 << 24;
    let order = index.min(SLOTS - 2);
    match scheduler {
        Scheduler::RoundRobin => 0,
        Scheduler::Sequential => -(order as i32),
        Scheduler::Rfc9218 => {
            let within = if priority.incremental {
                SLOTS - 1 // one level shared by every incremental response of the urgency
            } else {
                order
            };
            -((u64::from(priority.urgency) * SLOTS + within) as i32)
        }
    }
}

/// How long an HTTP/2 response that has handed its last bytes to the stack keeps its turn
/// while none of its frames is written (its END_STREAM frame included): then the next
/// response goes. The stack may hold its last frame for want of flow-control credit, which
/// the client grants a round trip later (GEO: about 0.6 s; a few seconds under losses);
/// a response whose end is never written (a stream the stack dropped without a frame
/// origin sees) must not stall the connection.
pub const RELEASE_AFTER: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy)]
struct Entry {
    priority: Priority,
    /// When it last sent a chunk (0: never): round-robin serves the least recent.
    last: u64,
    /// Its last bytes are with the stack: it keeps its turn until this time (pushed back
    /// whenever one of its frames is written), or until it is closed.
    release_at: Option<Instant>,
}

/// The responses of one connection that have bytes to send, and which may send its
/// next chunk ([`Queue::head`]). Streams are keyed by their ID, which orders requests.
#[derive(Debug, Clone)]
pub struct Queue {
    scheduler: Scheduler,
    streams: BTreeMap<u64, Entry>,
    /// Counts the chunks sent, to order turns.
    clock: u64,
    /// [`RELEASE_AFTER`] unless a test wants it shorter.
    release_after: Duration,
}

impl Queue {
    pub fn new(scheduler: Scheduler) -> Self {
        Self {
            scheduler,
            streams: BTreeMap::new(),
            clock: 0,
            release_after: RELEASE_AFTER,
        }
    }

    /// How long a finishing response keeps its turn with nothing of it written.
    pub fn release_after(mut self, after: Duration) -> Self {
        self.release_after = after;
        self
    }

    pub fn scheduler(&self) -> Scheduler {
        self.scheduler
    }

    /// A response starts sending.
    pub fn open(&mut self, stream: u64, priority: Priority) {
        self.streams.insert(
            stream,
            Entry {
                priority,
                last: 0,
                release_at: None,
            },
        );
    }

    /// A PRIORITY_UPDATE for a response that is sending (ignored for others).
    pub fn reprioritize(&mut self, stream: u64, priority: Priority) {
        if let Some(e) = self.streams.get_mut(&stream) {
            e.priority = priority;
        }
    }

    /// A response has handed over its last byte (or was cancelled).
    pub fn close(&mut self, stream: u64) {
        self.streams.remove(&stream);
    }

    pub fn contains(&self, stream: u64) -> bool {
        self.streams.contains_key(&stream)
    }

    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// The stream whose next chunk goes out now: under `round-robin` the one that sent
    /// least recently (a new one first, the lowest ID among new ones), under `sequential`
    /// the lowest ID, under `rfc9218` the most urgent, then the lowest ID among its
    /// non-incremental ones, else its incremental one that sent least recently.
    pub fn head(&self) -> Option<u64> {
        let least_recent = |it: &mut dyn Iterator<Item = (&u64, &Entry)>| {
            it.min_by_key(|(id, e)| (e.last, **id)).map(|(id, _)| *id)
        };
        match self.scheduler {
            Scheduler::RoundRobin => least_recent(&mut self.streams.iter()),
            Scheduler::Sequential => self.streams.keys().next().copied(),
            Scheduler::Rfc9218 => {
                let urgency = self.streams.values().map(|e| e.priority.urgency).min()?;
                let mut same = self.streams.iter().filter(|(_, e)| e.priority.urgency == urgency);
                if let Some((id, _)) = same.clone().find(|(_, e)| !e.priority.incremental) {
                    return Some(*id); // BTreeMap order: the lowest ID first
                }
                least_recent(&mut same)
            }
        }
    }

    /// `stream` has handed its last bytes to the stack at `now`: it keeps its place until
    /// it is closed (its END_STREAM frame written, or a reset) or [`RELEASE_AFTER`] (see
    /// [`Queue::release_after`]) has passed with none of its frames written.
    pub fn finishing(&mut self, stream: u64, now: Instant) {
        if let Some(e) = self.streams.get_mut(&stream) {
            e.release_at = Some(now + self.release_after);
        }
    }

    /// A frame of `stream` was written at `now`: a finishing response is making progress.
    pub fn progressed(&mut self, stream: u64, now: Instant) {
        if let Some(e) = self.streams.get_mut(&stream) {
            if e.release_at.is_some() {
                e.release_at = Some(now + self.release_after);
            }
        }
    }

    /// The earliest time a finishing response gives its place up if nothing is written.
    pub fn next_release(&self) -> Option<Instant> {
        self.streams.values().filter_map(|e| e.release_at).min()
    }

    /// Closes the finishing responses whose time is up at `now`; their streams.
    pub fn release_overdue(&mut self, now: Instant) -> Vec<u64> {
        let overdue: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, e)| e.release_at.is_some_and(|t| t <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in &overdue {
            self.streams.remove(id);
        }
        overdue
    }

    /// `stream` sent a chunk.
    pub fn served(&mut self, stream: u64) {
        if let Some(e) = self.streams.get_mut(&stream) {
            self.clock += 1;
            e.last = self.clock;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(urgency: u8, incremental: bool) -> Priority {
        Priority { urgency, incremental }
    }

    /// Requests arrive at given chunk ticks with a number of chunks each; at every tick
    /// the queue's head sends one chunk (a DATA frame). The frames' stream IDs, in order.
    fn frames_out(scheduler: Scheduler, requests: &[(u64, u64, u64, Priority)]) -> Vec<u64> {
        let mut q = Queue::new(scheduler);
        let mut left: BTreeMap<u64, u64> = BTreeMap::new();
        let mut out = Vec::new();
        let total: u64 = requests.iter().map(|r| r.2).sum();
        let mut tick = 0;
        while (out.len() as u64) < total {
            for &(id, at, chunks, prio) in requests {
                if at == tick {
                    q.open(id, prio);
                    left.insert(id, chunks);
                }
            }
            if let Some(id) = q.head() {
                out.push(id);
                q.served(id);
                let n = left.get_mut(&id).unwrap();
                *n -= 1;
                if *n == 0 {
                    q.close(id);
                }
            }
            tick += 1;
            assert!(tick < 10_000, "the queue stalled: {out:?}");
        }
        out
    }

    const D: Priority = Priority {
        urgency: DEFAULT_URGENCY,
        incremental: false,
    };

    #[test]
    fn sequential_sends_one_response_at_a_time_in_request_order() {
        // A triangular page's objects as chunks: 1, 2, 3, 2, 1; all asked at once.
        let reqs = [
            (1, 0, 1, D),
            (3, 0, 2, D),
            (5, 0, 3, D),
            (7, 0, 2, D),
            (9, 0, 1, D),
        ];
        assert_eq!(
            frames_out(Scheduler::Sequential, &reqs),
            [1, 3, 3, 5, 5, 5, 7, 7, 9]
        );
        // Whatever priorities the browser sends.
        let reqs = [(1, 0, 2, p(7, true)), (3, 0, 2, p(0, false))];
        assert_eq!(frames_out(Scheduler::Sequential, &reqs), [1, 1, 3, 3]);
    }

    #[test]
    fn sequential_takes_a_late_earlier_request_first_once_it_arrives() {
        // Stream 3 is answered before stream 1 is ready (a held response): 1 then
        // preempts it, as the lowest ID.
        let reqs = [(3, 0, 3, D), (1, 1, 2, D)];
        assert_eq!(frames_out(Scheduler::Sequential, &reqs), [3, 1, 1, 3, 3]);
    }

    #[test]
    fn round_robin_interleaves_one_frame_each() {
        let reqs = [(1, 0, 1, D), (3, 0, 2, D), (5, 0, 3, D)];
        assert_eq!(frames_out(Scheduler::RoundRobin, &reqs), [1, 3, 5, 3, 5, 5]);
        // A response arriving later joins the rotation at once.
        let reqs = [(1, 0, 3, D), (3, 2, 2, D)];
        assert_eq!(frames_out(Scheduler::RoundRobin, &reqs), [1, 1, 3, 1, 3]);
    }

    #[test]
    fn rfc9218_urgency_first_then_stream_order_then_round_robin() {
        // Non-incremental at one urgency: sequential by stream ID.
        let reqs = [(1, 0, 2, p(3, false)), (3, 0, 2, p(3, false))];
        assert_eq!(frames_out(Scheduler::Rfc9218, &reqs), [1, 1, 3, 3]);
        // A more urgent later request goes first.
        let reqs = [(1, 0, 2, p(5, false)), (3, 0, 2, p(1, false))];
        assert_eq!(frames_out(Scheduler::Rfc9218, &reqs), [3, 3, 1, 1]);
        // Incremental at one urgency: round-robin.
        let reqs = [
            (1, 0, 2, p(4, true)),
            (3, 0, 2, p(4, true)),
            (5, 0, 1, p(4, true)),
        ];
        assert_eq!(frames_out(Scheduler::Rfc9218, &reqs), [1, 3, 5, 1, 3]);
        // Mixed at one urgency: non-incremental first (quiche, lsquic), then the others
        // round-robin; a less urgent one last.
        let reqs = [
            (1, 0, 2, p(2, true)),
            (3, 0, 1, p(2, false)),
            (5, 0, 2, p(2, true)),
            (7, 0, 1, p(6, false)),
        ];
        assert_eq!(frames_out(Scheduler::Rfc9218, &reqs), [3, 1, 5, 1, 5, 7]);
    }

    #[test]
    fn rfc9218_follows_a_priority_update() {
        let mut q = Queue::new(Scheduler::Rfc9218);
        q.open(1, p(3, false));
        q.open(3, p(3, false));
        assert_eq!(q.head(), Some(1));
        q.reprioritize(3, p(0, false));
        assert_eq!(q.head(), Some(3));
        q.reprioritize(99, p(0, false)); // not sending: ignored
        q.close(3);
        q.close(1);
        assert_eq!(q.head(), None);
        assert!(q.is_empty());
    }

    #[test]
    fn a_finishing_response_whose_end_is_never_written_gives_its_place_up() {
        let t0 = Instant::now();
        let mut q = Queue::new(Scheduler::Sequential);
        q.open(1, D);
        q.open(3, D);
        assert_eq!(q.next_release(), None);
        q.finishing(1, t0);
        assert_eq!(q.next_release(), Some(t0 + RELEASE_AFTER));
        // Until its time is up it keeps its turn, and each frame of it written pushes
        // the time back.
        let later = t0 + RELEASE_AFTER / 2;
        assert!(q.release_overdue(later).is_empty());
        q.progressed(1, later);
        assert!(q.release_overdue(t0 + RELEASE_AFTER).is_empty());
        assert_eq!(q.head(), Some(1));
        // Nothing written for RELEASE_AFTER: the next response goes.
        assert_eq!(q.release_overdue(later + RELEASE_AFTER), [1]);
        assert_eq!(q.head(), Some(3));
        assert_eq!(q.next_release(), None);
        // A response still sending (not finishing) never times out, and progress of one
        // that is not finishing sets no time.
        q.progressed(3, later);
        assert!(q.release_overdue(later + RELEASE_AFTER * 100).is_empty());
        assert_eq!(q.head(), Some(3));
    }

    #[test]
    fn parses_priority_fields() {
        assert_eq!(Priority::parse(""), D);
        assert_eq!(Priority::parse("u=5"), p(5, false));
        assert_eq!(Priority::parse("u=0, i"), p(0, true));
        assert_eq!(Priority::parse("i"), p(3, true));
        assert_eq!(Priority::parse("i=?1,u=2"), p(2, true));
        assert_eq!(Priority::parse("u=1, i=?0"), p(1, false));
        // Out of range or malformed values are ignored; unknown keys too.
        assert_eq!(Priority::parse("u=8, i"), p(3, true));
        assert_eq!(Priority::parse("u=-1"), D);
        assert_eq!(Priority::parse("u=1.5"), D);
        assert_eq!(Priority::parse("i=1"), D);
        assert_eq!(Priority::parse("x=1, u=6;foo=bar"), p(6, false));
    }

    #[test]
    fn quinn_priorities_order_streams_as_the_queue_does() {
        let rr = |i| quinn_priority(Scheduler::RoundRobin, i, p(0, false));
        assert_eq!((rr(0), rr(9)), (0, 0));
        let seq = |i| quinn_priority(Scheduler::Sequential, i, D);
        assert!(seq(0) > seq(1) && seq(1) > seq(200));
        let rfc = |i, u, inc| quinn_priority(Scheduler::Rfc9218, i, p(u, inc));
        // Urgency beats request order; non-incremental before incremental of one
        // urgency; non-incremental ones by request order; incremental ones share a level.
        assert!(rfc(9, 0, true) > rfc(0, 1, false));
        assert!(rfc(9, 3, false) > rfc(0, 3, true));
        assert!(rfc(1, 3, false) > rfc(2, 3, false));
        assert_eq!(rfc(1, 4, true), rfc(7, 4, true));
        assert!(rfc(u64::MAX, 7, true) < rfc(u64::MAX, 7, false));
        assert!(rfc(u64::MAX, 7, true) > i32::MIN);
    }

    #[test]
    fn names_round_trip_and_unknown_ones_are_refused() {
        for n in Scheduler::NAMES {
            assert_eq!(n.parse::<Scheduler>().unwrap().name(), n);
        }
        let e = "fifo".parse::<Scheduler>().unwrap_err();
        assert!(e.to_string().contains("round-robin, sequential, rfc9218"));
        assert!(!Scheduler::RoundRobin.orders());
        assert!(Scheduler::Rfc9218.orders());
    }
}
