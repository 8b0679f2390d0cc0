//! One connection's scheduling: the scheduler it got when it arrived, the priority
//! signals as its frame readers find them (tap.rs, h3conn.rs) and where they act: the
//! HTTP/2 queue (gate.rs) or quinn's stream priorities (sched::quinn_priority).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};

use crate::body::Turn;
use crate::frames::{H2Event, H3Event};
use crate::gate::Gate;
use crate::sched::{quinn_priority, Priority, Scheduler};
use crate::stats::Counters;

/// A QUIC send stream shared by its h3 request stream (which writes) and the connection
/// (which sets its priority when a PRIORITY_UPDATE comes).
pub type SharedSend = Arc<Mutex<quinn::SendStream>>;

/// An HTTP/3 request stream's send half, and its request's place in the order requests
/// arrived (None: not arrived yet).
struct QuicStream {
    send: Weak<Mutex<quinn::SendStream>>,
    place: Option<u64>,
}

pub struct Conn {
    pub scheduler: Scheduler,
    pub counters: Arc<Counters>,
    /// Under a scheduler that orders: the connection's queue (keyed by stream ID on
    /// HTTP/2, by arrival on HTTP/3).
    pub gate: Option<Arc<Gate>>,
    http2: bool,
    /// HTTP/3: each request stream, by stream ID.
    quic: Mutex<HashMap<u64, QuicStream>>,
}

impl Conn {
    /// Its responses go through a queue when the scheduler orders them.
    pub fn new(scheduler: Scheduler, counters: Arc<Counters>, http2: bool) -> Arc<Self> {
        counters.exchanges.set_scheduler(scheduler);
        let gate = scheduler
            .orders()
            .then(|| Arc::new(Gate::new(scheduler, Some(counters.clone()))));
        Arc::new(Self {
            scheduler,
            counters,
            gate,
            http2,
            quic: Mutex::new(HashMap::new()),
        })
    }

    /// What the HTTP/2 frame reader or writer found.
    pub fn h2_event(&self, event: H2Event) {
        let log = &self.counters.exchanges;
        match event {
            H2Event::Settings(pairs) => {
                log.settings(pairs.into_iter().map(|(k, v)| (u64::from(k), u64::from(v))))
            }
            H2Event::Headers { stream, priority } => log.h2_headers(u64::from(stream), priority),
            H2Event::Priority { stream, priority } => log.h2_priority_frame(u64::from(stream), priority),
            H2Event::PriorityUpdate { stream, value } => self.update(u64::from(stream), &value),
            H2Event::Data {
                stream, end_stream, ..
            } => {
                log.h2_data(u64::from(stream), end_stream);
                if end_stream {
                    self.h2_done(u64::from(stream));
                } else if let Some(gate) = &self.gate {
                    gate.progressed(u64::from(stream));
                }
            }
            H2Event::Reset { stream } => self.h2_done(u64::from(stream)),
        }
    }

    /// An HTTP/2 response's last frame is written (or its stream reset): the next
    /// response may start (body.rs keeps the place until then).
    fn h2_done(&self, stream: u64) {
        if let Some(gate) = &self.gate {
            gate.close(stream);
        }
    }

    /// What the client's HTTP/3 control stream said.
    pub fn h3_event(&self, event: H3Event) {
        match event {
            H3Event::Settings(pairs) => self.counters.exchanges.settings(pairs),
            H3Event::PriorityUpdate { stream, value } => self.update(stream, &value),
        }
    }

    fn update(&self, stream: u64, value: &str) {
        if let Some(p) = self.counters.exchanges.priority_update(stream, value) {
            if self.http2 {
                if let Some(gate) = &self.gate {
                    gate.reprioritize(stream, p);
                }
                return;
            }
            if let (Some(gate), Some(place)) = (&self.gate, self.quic_place(stream)) {
                gate.reprioritize(place, p);
            }
            self.prioritize_quic(stream, p);
        }
    }

    /// A new HTTP/3 request stream's send half.
    pub fn register_quic(&self, stream: u64, send: &SharedSend) {
        let mut m = self.quic.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, q| q.send.strong_count() > 0);
        let send = Arc::downgrade(send);
        m.insert(stream, QuicStream { send, place: None });
    }

    fn quic_stream(&self, stream: u64) -> Option<SharedSend> {
        let m = self.quic.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&stream).and_then(|q| q.send.upgrade())
    }

    fn quic_place(&self, stream: u64) -> Option<u64> {
        let m = self.quic.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&stream).and_then(|q| q.place)
    }

    /// An HTTP/3 request has arrived: it takes the next place in the connection's request
    /// order (over QUIC a browser may send a later stream's request first, so the order
    /// is the one requests reached origin in), its stream the quinn priority of that
    /// place, and (under a scheduler that orders) its place in the queue, which its
    /// response waits for before it hands each chunk to quinn.
    /// `place`: its exchange's key, which counts requests in the order they arrived.
    pub fn quic_arrived(&self, stream: u64, place: u64, p: Priority) -> Option<Turn> {
        {
            let mut m = self.quic.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(q) = m.get_mut(&stream) {
                q.place = Some(place);
            }
        }
        self.prioritize_quic(stream, p);
        self.gate.clone().map(|g| Turn::take(g, place, p))
    }

    /// Gives an HTTP/3 response stream the quinn priority its scheduler and RFC 9218
    /// priority call for (nothing under round-robin: every stream keeps quinn's 0).
    pub fn prioritize_quic(&self, stream: u64, p: Priority) {
        if !self.scheduler.orders() {
            return;
        }
        let entry = {
            let m = self.quic.lock().unwrap_or_else(|e| e.into_inner());
            m.get(&stream).map(|q| (q.send.upgrade(), q.place))
        };
        if let Some((Some(send), place)) = entry {
            // Not arrived yet: last (it has nothing to send anyway).
            let value = quinn_priority(self.scheduler, place.unwrap_or(u64::MAX), p);
            let s = send.lock().unwrap_or_else(|e| e.into_inner());
            // A stream already finished and forgotten has nothing left to order.
            let _ = s.set_priority(value);
        }
    }

    /// Completes when the client has acknowledged all of an HTTP/3 stream, or stopped it.
    pub fn quic_stopped(&self, stream: u64) -> Option<impl Future<Output = bool> + Send + 'static> {
        let send = self.quic_stream(stream)?;
        let stopped = send.lock().unwrap_or_else(|e| e.into_inner()).stopped();
        Some(async move { matches!(stopped.await, Ok(None)) })
    }
}
