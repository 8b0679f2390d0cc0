//! One direction of the link: drop-tail queue -> rate shaper -> loss -> delay line.
//!
//! Times are computed, not observed: a frame's serialization starts at
//! `max(arrival, end of the previous frame's serialization)` and ends `8 len / rate`
//! later; it is then lost or put on the delay line, due at the end of serialization plus
//! uplink + downlink + framing delay. Calling the model late (a timer that woke up late)
//! therefore never shifts the schedule; it only delays when the caller learns of it.

use std::collections::VecDeque;

use serde::Serialize;

use crate::config::DirConfig;
use crate::histogram::{Histogram, Summary};
use crate::loss::is_lost;
use crate::queue::{DropTail, Packet, Queue};
use crate::rng::Rng;
use crate::Nanos;

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropCause {
    /// The drop-tail queue was full.
    QueueFull,
    /// The loss model (packet loss rate or bit error rate) lost it on the air.
    Loss,
    /// Longer than `max_frame_bytes`.
    Oversize,
}

impl DropCause {
    pub fn as_str(self) -> &'static str {
        match self {
            DropCause::QueueFull => "queue_full",
            DropCause::Loss => "loss",
            DropCause::Oversize => "oversize",
        }
    }
}

/// Drops by cause. `io_error` is counted by the I/O layer (a failed send or write).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Drops {
    pub queue_full: u64,
    pub loss: u64,
    pub oversize: u64,
    pub io_error: u64,
}

impl Drops {
    pub fn count(&mut self, cause: DropCause) {
        match cause {
            DropCause::QueueFull => self.queue_full += 1,
            DropCause::Loss => self.loss += 1,
            DropCause::Oversize => self.oversize += 1,
        }
    }
}

/// A model event, for the event log.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A frame entered the queue at `t`.
    Enqueue { t: Nanos, len: usize },
    /// A frame started serialization at `t` after `queue_delay`, due at `release`.
    Dequeue {
        t: Nanos,
        len: usize,
        queue_delay: Nanos,
        release: Nanos,
    },
    /// A frame was dropped at `t`.
    Drop {
        t: Nanos,
        len: usize,
        cause: DropCause,
    },
}

/// A frame that has been serialized by `sent` and is due at the far end at `release`.
#[derive(Debug)]
pub struct Departure<T> {
    pub payload: T,
    pub len: usize,
    /// End of serialization.
    pub sent: Nanos,
    pub release: Nanos,
}

/// Counters of one direction in the model.
#[derive(Debug, Clone, Default)]
pub struct DirectionStats {
    pub frames_in: u64,
    pub bytes_in: u64,
    pub frames_out: u64,
    pub bytes_out: u64,
    pub drops: Drops,
    /// Time from arrival to start of serialization.
    pub queue_delay: Histogram,
}

#[derive(Debug, Clone, Serialize)]
pub struct DirectionStatsJson {
    pub frames_in: u64,
    pub bytes_in: u64,
    pub frames_out: u64,
    pub bytes_out: u64,
    pub drops: Drops,
    pub queue_delay: Summary,
}

impl DirectionStats {
    pub fn to_json(&self) -> DirectionStatsJson {
        DirectionStatsJson {
            frames_in: self.frames_in,
            bytes_in: self.bytes_in,
            frames_out: self.frames_out,
            bytes_out: self.bytes_out,
            drops: self.drops.clone(),
            queue_delay: self.queue_delay.summary(),
        }
    }
}

/// One direction of the link.
pub struct Direction<T> {
    cfg: DirConfig,
    delay: Nanos,
    queue: Box<dyn Queue<T>>,
    /// End of the current (or last) serialization.
    link_free: Nanos,
    line: VecDeque<Departure<T>>,
    last_release: Nanos,
    rng: Rng,
    stats: DirectionStats,
    events: Option<Vec<Event>>,
    /// Hand frames over at the end of serialization (the receiver holds them until
    /// `release`) instead of at `release`.
    far_hold: bool,
}

impl<T: Send + 'static> Direction<T> {
    pub fn new(cfg: DirConfig) -> Self {
        Direction {
            delay: cfg.delay_ns(),
            queue: Box::new(DropTail::new(cfg.queue_limit_bytes())),
            link_free: 0,
            line: VecDeque::new(),
            last_release: 0,
            rng: Rng::new(cfg.seed),
            stats: DirectionStats::default(),
            events: None,
            far_hold: false,
            cfg,
        }
    }

    /// When on, [`Direction::pop_due`] hands frames over at the end of serialization
    /// and the caller (the receiving station) holds them until `release`.
    pub fn set_far_hold(&mut self, on: bool) {
        self.far_hold = on;
    }

    fn key(&self, d: &Departure<T>) -> Nanos {
        if self.far_hold {
            d.sent
        } else {
            d.release
        }
    }

    /// Record [`Event`]s for [`Direction::take_events`].
    pub fn set_trace(&mut self, on: bool) {
        self.events = on.then(Vec::new);
    }

    pub fn take_events(&mut self) -> Vec<Event> {
        self.events.as_mut().map(std::mem::take).unwrap_or_default()
    }

    pub fn config(&self) -> &DirConfig {
        &self.cfg
    }

    /// Apply a new configuration at `now`. Frames already serialized keep their
    /// schedule; the new rate applies from the next start of serialization, the new
    /// delay to frames serialized from now on (never reordering frames), the new queue
    /// bound to new arrivals. The loss generator is reseeded when the seed changes.
    pub fn reconfigure(&mut self, now: Nanos, cfg: DirConfig) {
        self.advance(now);
        if cfg.seed != self.cfg.seed {
            self.rng = Rng::new(cfg.seed);
        }
        self.delay = cfg.delay_ns();
        self.queue.set_limit_bytes(cfg.queue_limit_bytes());
        self.cfg = cfg;
    }

    fn serialization(&self, len: usize) -> Nanos {
        match self.cfg.rate_bps {
            0 => 0,
            r => ((len as u128 * 8_000_000_000 + r as u128 / 2) / r as u128) as Nanos,
        }
    }

    fn trace(&mut self, e: Event) {
        if let Some(ev) = self.events.as_mut() {
            ev.push(e);
        }
    }

    /// A frame of `len` bytes arrives at `now`. On a drop the payload is handed back.
    pub fn enqueue(&mut self, now: Nanos, len: usize, payload: T) -> Result<(), (T, DropCause)> {
        self.enqueue_frame(now, len, payload, false)
    }

    /// As [`Direction::enqueue`]; a `segmented` frame is a GSO super-packet that the
    /// receiving kernel will cut into MTU-sized packets, exempt from `max_frame_bytes`.
    pub fn enqueue_frame(
        &mut self,
        now: Nanos,
        len: usize,
        payload: T,
        segmented: bool,
    ) -> Result<(), (T, DropCause)> {
        self.stats.frames_in += 1;
        self.stats.bytes_in += len as u64;
        self.advance(now);
        if len > self.cfg.max_frame_bytes && !segmented {
            return Err(self.dropped(now, len, payload, DropCause::Oversize));
        }
        let packet = Packet {
            len,
            arrival: now,
            payload,
        };
        match self.queue.enqueue(packet) {
            Ok(()) => {
                self.trace(Event::Enqueue { t: now, len });
                self.advance(now);
                Ok(())
            }
            Err(p) => Err(self.dropped(now, len, p.payload, DropCause::QueueFull)),
        }
    }

    fn dropped(&mut self, t: Nanos, len: usize, payload: T, cause: DropCause) -> (T, DropCause) {
        self.stats.drops.count(cause);
        self.trace(Event::Drop { t, len, cause });
        (payload, cause)
    }

    /// Start the serialization of every queued frame whose turn has come by `now`.
    pub fn advance(&mut self, now: Nanos) {
        while let Some(head) = self.queue.peek() {
            let start = self.link_free.max(head.arrival);
            if start > now {
                break;
            }
            let p = self.queue.dequeue().expect("peeked");
            let end = start + self.serialization(p.len);
            self.link_free = end;
            let queue_delay = start - p.arrival;
            self.stats.queue_delay.record(queue_delay);
            if is_lost(self.cfg.loss, p.len, &mut self.rng) {
                // Lost on the air: it used its share of the link all the same.
                self.stats.drops.count(DropCause::Loss);
                self.trace(Event::Drop {
                    t: end,
                    len: p.len,
                    cause: DropCause::Loss,
                });
                continue;
            }
            let release = (end + self.delay).max(self.last_release);
            self.last_release = release;
            self.trace(Event::Dequeue {
                t: start,
                len: p.len,
                queue_delay,
                release,
            });
            self.line.push_back(Departure {
                payload: p.payload,
                len: p.len,
                sent: end,
                release,
            });
        }
    }

    /// The next frame due by `now`, if any.
    pub fn pop_due(&mut self, now: Nanos) -> Option<Departure<T>> {
        self.advance(now);
        if self.key(self.line.front()?) > now {
            return None;
        }
        let d = self.line.pop_front()?;
        self.stats.frames_out += 1;
        self.stats.bytes_out += d.len as u64;
        Some(d)
    }

    /// When the next frame will be due (None when nothing is queued or in flight).
    pub fn next_deadline(&self) -> Option<Nanos> {
        let line = self.line.front().map(|d| self.key(d));
        let queued = self.queue.peek().map(|p| {
            let end = self.link_free.max(p.arrival) + self.serialization(p.len);
            if self.far_hold {
                end
            } else {
                (end + self.delay).max(self.last_release)
            }
        });
        match (line, queued) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn queue_bytes(&self) -> usize {
        self.queue.bytes()
    }

    pub fn queue_frames(&self) -> usize {
        self.queue.len()
    }

    /// Frames serialized and waiting on the delay line.
    pub fn in_flight_frames(&self) -> usize {
        self.line.len()
    }

    pub fn stats(&self) -> &DirectionStats {
        &self.stats
    }

    pub fn reset_stats(&mut self) {
        self.stats = DirectionStats::default();
    }
}

#[cfg(test)]
#[path = "direction_tests.rs"]
mod tests;
