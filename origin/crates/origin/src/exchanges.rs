//! Per connection, one record per request and its response ("exchange"): its order of
//! arrival, its stream, the priority signals it got, and when its bytes left; and the
//! connection's priority signals and the order of its DATA frames (HTTP/2). Kept with the
//! connection's statistics until `POST /stats/reset` (stats.rs).
//!
//! When a response's bytes left, by protocol:
//! - `handed_*`: when the body's first and last bytes were handed to the protocol stack
//!   (hyper for h1 and h2, quinn for h3);
//! - `written_last_unix_ms` (h2): when its DATA frame with END_STREAM was written to the
//!   TLS stream, i.e. into the socket's buffer (the kernel sends a socket's bytes in
//!   order, so these times order the responses as the wire does);
//! - `fin_sent_unix_ms` (h3): when quinn first wrote a STREAM frame with its FIN into a
//!   packet (quic_fin.rs): quinn buffers a whole response at once, so the time it was
//!   handed says nothing of when it went out; this is the order origin sent the
//!   responses' ends in;
//! - `acked_unix_ms` (h3): when the client had acknowledged all of it (quinn's
//!   `SendStream::stopped`, noted by one task per connection: acks.rs), later than the
//!   first FIN by a round trip, and by the retransmission of whatever packet the client
//!   did not acknowledge.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::frames::Rfc7540Priority;
use crate::sched::{Priority, Scheduler};

/// Exchanges kept per connection and window; a page has tens of objects.
pub const MAX_EXCHANGES: usize = 1000;
/// Runs of DATA frames kept per connection and window.
pub const MAX_FRAME_RUNS: usize = 4096;

/// Wall-clock milliseconds with microseconds.
pub fn now_unix_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as f64 / 1000.0)
        .unwrap_or(0.0)
}

/// A PRIORITY_UPDATE frame as received.
#[derive(Debug, Clone, Serialize)]
pub struct PriorityUpdate {
    pub unix_ms: f64,
    pub value: String,
}

/// One request and its response.
#[derive(Debug, Clone, Serialize)]
pub struct Exchange {
    /// Its stream (h2, h3); none for HTTP/1.1.
    pub stream: Option<u64>,
    /// 1-based, in the order requests arrived on the connection.
    pub order: u32,
    pub path: String,
    /// A replayed site's request: the origin it asked (`:authority` or Host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authority: Option<String>,
    /// A replayed site's request: how its recorded exchange was found (`exact`,
    /// `query`, `prefix`), or `miss` (answered 404).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<&'static str>,
    /// The Priority request header as received (RFC 9218 5), if any.
    pub priority: Option<String>,
    /// PRIORITY_UPDATE frames for its stream, in arrival order.
    pub priority_updates: Vec<PriorityUpdate>,
    /// The RFC 9218 priority in force for it: its header, then its updates, defaults for
    /// what they omit.
    pub urgency: u8,
    pub incremental: bool,
    /// RFC 7540 priority (h2): of its HEADERS frame, or the last PRIORITY frame for it.
    pub rfc7540: Option<Rfc7540Priority>,
    /// Body bytes handed to the protocol stack.
    pub bytes: u64,
    pub request_unix_ms: f64,
    pub handed_first_unix_ms: Option<f64>,
    pub handed_last_unix_ms: Option<f64>,
    /// h2: DATA frames written for it, and when the one with END_STREAM was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_frames: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written_last_unix_ms: Option<f64>,
    /// h3: when quinn first wrote a STREAM frame with its FIN into a packet (quic_fin.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fin_sent_unix_ms: Option<f64>,
    /// h3: when the client had acknowledged all of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acked_unix_ms: Option<f64>,
    /// h2 under a scheduler that orders: its last bytes were with h2 but none of its
    /// frames was written for sched::RELEASE_AFTER, so the next response went before its
    /// end (the order of completion is not the scheduler's from there).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub turn_released_unwritten: bool,
    #[serde(skip)]
    key: u64,
    #[serde(skip)]
    claimed: bool,
}

impl Exchange {
    fn priority(&self) -> Priority {
        Priority {
            urgency: self.urgency,
            incremental: self.incremental,
        }
    }
}

/// The priority signals a connection received.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Signals {
    /// The client's SETTINGS (identifier: value; h2 and h3 identifiers as numbers).
    pub settings: BTreeMap<String, u64>,
    pub priority_headers: u32,
    /// h2: HEADERS frames with the PRIORITY flag, PRIORITY frames.
    pub rfc7540_headers: u32,
    pub rfc7540_frames: u32,
    /// PRIORITY_UPDATE frames (h2 type 0x10, h3 type 0xF0700).
    pub priority_updates: u32,
}

/// What a connection's record adds about its exchanges.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExchangesView {
    pub scheduler: Option<Scheduler>,
    pub exchanges: Vec<Exchange>,
    pub signals: Signals,
    /// h2: the DATA frames origin wrote, as runs of [stream, frames] in order.
    pub data_frames: Vec<(u64, u32)>,
}

#[derive(Debug, Default)]
struct Inner {
    view: ExchangesView,
    next_key: u64,
    next_order: u32,
    /// The highest h2 stream seen opening: a HEADERS frame above it opens a stream.
    last_h2_stream: u64,
    /// PRIORITY_UPDATEs for streams not open yet (RFC 9218 7: they may come first).
    early_updates: HashMap<u64, Vec<PriorityUpdate>>,
}

/// A connection's exchanges, shared by its handlers, its frame readers and the stats.
#[derive(Debug, Default)]
pub struct ExchangeLog {
    inner: Mutex<Inner>,
}

impl ExchangeLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_scheduler(&self, scheduler: Scheduler) {
        self.lock().view.scheduler = Some(scheduler);
    }

    pub fn view(&self) -> ExchangesView {
        self.lock().view.clone()
    }

    /// A new window (`POST /stats/reset`): its exchanges are the new requests'.
    pub fn clear(&self) {
        let mut g = self.lock();
        g.view.exchanges.clear();
        g.view.data_frames.clear();
        g.view.signals.priority_headers = 0;
        g.view.signals.rfc7540_headers = 0;
        g.view.signals.rfc7540_frames = 0;
        g.view.signals.priority_updates = 0;
        g.early_updates.clear();
    }

    fn push(g: &mut Inner, stream: Option<u64>, path: String) -> u64 {
        g.next_key += 1;
        g.next_order += 1;
        let key = g.next_key;
        if g.view.exchanges.len() < MAX_EXCHANGES {
            let d = Priority::default();
            g.view.exchanges.push(Exchange {
                stream,
                order: g.next_order,
                path,
                authority: None,
                replay: None,
                priority: None,
                priority_updates: Vec::new(),
                urgency: d.urgency,
                incremental: d.incremental,
                rfc7540: None,
                bytes: 0,
                request_unix_ms: now_unix_ms(),
                handed_first_unix_ms: None,
                handed_last_unix_ms: None,
                data_frames: None,
                written_last_unix_ms: None,
                fin_sent_unix_ms: None,
                acked_unix_ms: None,
                turn_released_unwritten: false,
                key,
                claimed: stream.is_none(),
            });
        }
        key
    }

    fn by_key(g: &mut Inner, key: u64) -> Option<&mut Exchange> {
        g.view.exchanges.iter_mut().rev().find(|e| e.key == key)
    }

    fn by_stream(g: &mut Inner, stream: u64) -> Option<&mut Exchange> {
        g.view
            .exchanges
            .iter_mut()
            .rev()
            .find(|e| e.stream == Some(stream))
    }

    /// Sets its path and Priority header, applies updates that came first; its priority.
    fn describe(g: &mut Inner, key: u64, path: &str, header: Option<&str>) -> Priority {
        let mut early = Vec::new();
        if let Some(stream) = g
            .view
            .exchanges
            .iter()
            .rev()
            .find(|e| e.key == key)
            .and_then(|e| e.stream)
        {
            early = g.early_updates.remove(&stream).unwrap_or_default();
        }
        if header.is_some() {
            g.view.signals.priority_headers += 1;
        }
        let Some(e) = Self::by_key(g, key) else {
            return header.map(Priority::parse).unwrap_or_default();
        };
        e.path = path.to_owned();
        e.priority = header.map(str::to_owned);
        let mut p = header.map(Priority::parse).unwrap_or_default();
        for u in early {
            p = Priority::parse(&u.value);
            e.priority_updates.push(u);
        }
        e.urgency = p.urgency;
        e.incremental = p.incremental;
        e.priority()
    }

    /// An HTTP/1.1 or HTTP/3 request has arrived: (its key, its priority).
    pub fn begin(&self, stream: Option<u64>, path: &str, header: Option<&str>) -> (u64, Priority) {
        let mut g = self.lock();
        let key = Self::push(&mut g, stream, String::new());
        let p = Self::describe(&mut g, key, path, header);
        (key, p)
    }

    /// The HTTP/2 frame reader saw a HEADERS frame; a new stream when its ID is above
    /// every stream opened before (later HEADERS on a stream are trailers).
    pub fn h2_headers(&self, stream: u64, rfc7540: Option<Rfc7540Priority>) {
        let mut g = self.lock();
        if rfc7540.is_some() {
            g.view.signals.rfc7540_headers += 1;
        }
        if stream <= g.last_h2_stream {
            return;
        }
        g.last_h2_stream = stream;
        Self::push(&mut g, Some(stream), String::new());
        if let Some(e) = Self::by_stream(&mut g, stream) {
            e.rfc7540 = rfc7540;
        }
    }

    /// An HTTP/2 request reaches its handler (hyper calls handlers in the order streams
    /// open): the oldest stream the frame reader opened and no handler claimed yet; its
    /// (key, stream, priority). None when the reader saw no stream for it.
    pub fn h2_claim(&self, path: &str, header: Option<&str>) -> Option<(u64, u64, Priority)> {
        let mut g = self.lock();
        let e = g.view.exchanges.iter_mut().find(|e| !e.claimed)?;
        e.claimed = true;
        let (key, stream) = (e.key, e.stream?);
        let p = Self::describe(&mut g, key, path, header);
        Some((key, stream, p))
    }

    pub fn h2_priority_frame(&self, stream: u64, p: Rfc7540Priority) {
        let mut g = self.lock();
        g.view.signals.rfc7540_frames += 1;
        if let Some(e) = Self::by_stream(&mut g, stream) {
            e.rfc7540 = Some(p);
        }
    }

    /// A PRIORITY_UPDATE: the stream's new priority if its request has arrived (else it
    /// is kept for when it does).
    pub fn priority_update(&self, stream: u64, value: &str) -> Option<Priority> {
        let mut g = self.lock();
        g.view.signals.priority_updates += 1;
        let u = PriorityUpdate {
            unix_ms: now_unix_ms(),
            value: value.to_owned(),
        };
        match Self::by_stream(&mut g, stream) {
            Some(e) if e.claimed || e.priority.is_some() || !e.path.is_empty() => {
                let p = Priority::parse(value);
                e.priority_updates.push(u);
                e.urgency = p.urgency;
                e.incremental = p.incremental;
                Some(p)
            }
            _ => {
                g.early_updates.entry(stream).or_default().push(u);
                None
            }
        }
    }

    pub fn settings(&self, pairs: impl IntoIterator<Item = (u64, u64)>) {
        let mut g = self.lock();
        for (id, v) in pairs {
            g.view.signals.settings.insert(format!("0x{id:x}"), v);
        }
    }

    /// `n` body bytes of an exchange went to the protocol stack; `last`: its last ones.
    pub fn handed(&self, key: u64, n: u64, last: bool) {
        let mut g = self.lock();
        if let Some(e) = Self::by_key(&mut g, key) {
            let now = now_unix_ms();
            e.bytes += n;
            e.handed_first_unix_ms.get_or_insert(now);
            if last {
                e.handed_last_unix_ms = Some(now);
            }
        }
    }

    /// Exchange `key` asked a replayed site's origin `authority`, answered as `how`.
    pub fn site(&self, key: u64, authority: &str, how: &'static str) {
        let mut g = self.lock();
        if let Some(e) = Self::by_key(&mut g, key) {
            e.authority = Some(authority.to_owned());
            e.replay = Some(how);
        }
    }

    /// The priority in force for exchange `key` (updates included).
    pub fn priority_of(&self, key: u64) -> Priority {
        let mut g = self.lock();
        Self::by_key(&mut g, key)
            .map(|e| e.priority())
            .unwrap_or_default()
    }

    /// The HTTP/2 frame writer wrote a DATA frame.
    pub fn h2_data(&self, stream: u64, end_stream: bool) {
        let mut g = self.lock();
        let runs = &mut g.view.data_frames;
        let same = matches!(runs.last(), Some((s, _)) if *s == stream);
        if same {
            if let Some((_, n)) = runs.last_mut() {
                *n += 1;
            }
        } else if runs.len() < MAX_FRAME_RUNS {
            runs.push((stream, 1));
        }
        if let Some(e) = Self::by_stream(&mut g, stream) {
            *e.data_frames.get_or_insert(0) += 1;
            if end_stream {
                e.written_last_unix_ms = Some(now_unix_ms());
            }
        }
    }

    /// An HTTP/2 response lost its turn before its end was written (gate.rs).
    pub fn turn_released_unwritten(&self, stream: u64) {
        let mut g = self.lock();
        if let Some(e) = Self::by_stream(&mut g, stream) {
            e.turn_released_unwritten = true;
        }
    }

    /// quinn wrote a frame with the FIN of an HTTP/3 stream at `unix_ms`; the first one
    /// counts (a FIN sent again is a retransmission).
    pub fn h3_fin_sent(&self, stream: u64, unix_ms: f64) {
        let mut g = self.lock();
        if let Some(e) = Self::by_stream(&mut g, stream) {
            e.fin_sent_unix_ms.get_or_insert(unix_ms);
        }
    }

    /// The client had acknowledged every byte of an HTTP/3 stream at `unix_ms`.
    pub fn h3_acked(&self, stream: u64, unix_ms: f64) {
        let mut g = self.lock();
        if let Some(e) = Self::by_stream(&mut g, stream) {
            e.acked_unix_ms = Some(unix_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_what_the_frame_reader_and_the_handlers_see_per_stream() {
        let log = ExchangeLog::default();
        log.set_scheduler(Scheduler::Rfc9218);
        let w = Rfc7540Priority {
            exclusive: false,
            depends_on: 0,
            weight: 16,
        };
        log.h2_headers(1, None);
        log.h2_headers(3, Some(w));
        // An update for stream 5 before its HEADERS frame, one for 3 before its handler.
        assert_eq!(log.priority_update(5, "u=0"), None);
        log.h2_headers(5, None);
        assert_eq!(log.priority_update(3, "u=6"), None);
        log.h2_headers(3, None); // trailers: no new stream
        let (k1, s1, p1) = log.h2_claim("/a", Some("u=0, i")).unwrap();
        let (k3, s3, p3) = log.h2_claim("/b", Some("u=4, i")).unwrap();
        let (_, s5, p5) = log.h2_claim("/c", None).unwrap();
        assert!(log.h2_claim("/d", None).is_none());
        assert_eq!((s1, s3, s5), (1, 3, 5));
        assert_eq!(p1, Priority::parse("u=0, i"));
        // An update received before the request's header overrides it (it came later).
        assert_eq!(p3, Priority::parse("u=6"));
        assert_eq!(p5, Priority::parse("u=0"));
        assert_eq!(log.priority_update(1, "u=7"), Some(Priority::parse("u=7")));
        log.handed(k1, 100, false);
        log.handed(k1, 50, true);
        log.h2_data(1, false);
        log.h2_data(1, false);
        log.h2_data(3, true);
        log.h2_data(1, true);
        log.handed(k3, 1, true);
        let v = log.view();
        assert_eq!(v.scheduler, Some(Scheduler::Rfc9218));
        assert_eq!(v.data_frames, [(1, 2), (3, 1), (1, 1)]);
        let e: Vec<_> = v
            .exchanges
            .iter()
            .map(|e| (e.order, e.path.as_str(), e.urgency))
            .collect();
        assert_eq!(e, [(1, "/a", 7), (2, "/b", 6), (3, "/c", 0)]);
        let a = &v.exchanges[0];
        assert_eq!(
            (a.bytes, a.data_frames, a.priority_updates.len()),
            (150, Some(3), 1)
        );
        assert!(a.written_last_unix_ms.is_some() && a.handed_last_unix_ms.is_some());
        assert_eq!(v.exchanges[1].rfc7540, Some(w));
        assert_eq!(
            (
                v.signals.priority_headers,
                v.signals.rfc7540_headers,
                v.signals.priority_updates
            ),
            (2, 1, 3)
        );
        log.clear();
        assert!(log.view().exchanges.is_empty());
    }

    #[test]
    fn http3_and_http1_requests_begin_at_their_handler() {
        let log = ExchangeLog::default();
        assert_eq!(log.priority_update(4, "i"), None);
        let (_, p) = log.begin(Some(4), "/x", Some("u=2"));
        assert_eq!(p, Priority::parse("i")); // the early update wins over the header
        let (k, p) = log.begin(None, "/y", None);
        assert_eq!(p, Priority::default());
        log.h3_acked(4, 1.5);
        log.handed(k, 3, true);
        let v = log.view();
        assert_eq!(v.exchanges[0].acked_unix_ms, Some(1.5));
        assert_eq!((v.exchanges[1].order, v.exchanges[1].stream), (2, None));
    }
}
