//! One direction of the link: queue (its discipline) -> rate shaper -> loss -> delay line.
//!
//! Times are computed, not observed: a frame's serialization starts at
//! `max(arrival, end of the previous frame's serialization)` and ends `8 len / rate`
//! later; it is then lost or put on the delay line, due at the end of serialization plus
//! uplink + downlink + framing delay. Calling the model late (a timer that woke up late)
//! therefore never shifts the schedule; it only delays when the caller learns of it.
//!
//! With a [`Schedule`], each frame gets the parameters in force at its own event times:
//! the rate and the outage at the start of its serialization, the delay and the loss at
//! its end. A step therefore takes effect exactly at its time whenever the model is
//! called, with nothing torn down.
//!
//! With jitter (src/jitter.rs) each frame's due time gets its own draw, but never before
//! the due time of the frame ahead. `next_deadline` cannot know a draw that is not made
//! yet: without far hold it may name a time before the next frame is due (the caller
//! wakes once for nothing); with far hold, as the stations run, it is exact.
//!
//! The queue's discipline dequeues at the computed start of serialization, not when the
//! model happens to be called: CoDel's sojourn times and drops are the same whether
//! the caller's timer woke up on time or late.

use std::collections::VecDeque;

use serde::Serialize;

use crate::codel::{Codel, CodelParams};
use crate::dama::{Dama, DamaStats, Waiting};
use crate::dir_config::{DirConfig, Discipline};
use crate::drop_cause::DropCause;
use crate::fq_codel::FqCodel;
use crate::histogram::{Histogram, Summary};
use crate::jitter::JitterState;
use crate::loss::LossState;
use crate::queue::{DropHead, DropTail, Dropped, Packet, Queue};
use crate::schedule::{Params, Schedule};
use crate::Nanos;

/// Drops by cause. `io_error` is counted by the I/O layer (a failed send or write).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Drops {
    pub queue_full: u64,
    pub queue_head: u64,
    pub codel: u64,
    pub fq_overflow: u64,
    pub loss: u64,
    pub oversize: u64,
    pub io_error: u64,
    pub outage: u64,
}

impl Drops {
    pub fn count(&mut self, cause: DropCause) {
        match cause {
            DropCause::QueueFull => self.queue_full += 1,
            DropCause::QueueHead => self.queue_head += 1,
            DropCause::Codel => self.codel += 1,
            DropCause::FqOverflow => self.fq_overflow += 1,
            DropCause::Loss => self.loss += 1,
            DropCause::Oversize => self.oversize += 1,
            DropCause::Outage => self.outage += 1,
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
    /// The delay and rate applied to the frames that crossed.
    pub crossed: Crossed,
    /// Capacity on demand: the loop's figures (set when the stats are read).
    pub dama: Option<DamaStats>,
    /// Capacity on demand: time from arrival until the capacity granted carried the
    /// frame into the shaper's queue.
    pub access_delay: Histogram,
}

/// The one-way delay (uplink + downlink + framing in force at the end of serialization,
/// plus the frame's jitter draw; not the wait behind a frame ahead) and the rate (in force at its start) applied to each frame that crossed the link
/// (serialized, not lost).
#[derive(Debug, Clone, Default)]
pub struct Crossed {
    pub frames: u64,
    delay_min: Nanos,
    delay_max: Nanos,
    delay_sum: u128,
    rate_min: u64,
    rate_max: u64,
    rate_sum: u128,
}

/// min, mean, max (0 when nothing was counted).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MinMeanMax {
    pub min: f64,
    pub mean: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CrossedJson {
    pub delay_ms: MinMeanMax,
    /// bit/s; 0 is an unlimited rate.
    pub rate_bps: MinMeanMax,
    pub frames: u64,
}

impl Crossed {
    pub fn record(&mut self, delay: Nanos, rate_bps: u64) {
        if self.frames == 0 {
            (self.delay_min, self.delay_max) = (delay, delay);
            (self.rate_min, self.rate_max) = (rate_bps, rate_bps);
        }
        self.frames += 1;
        self.delay_min = self.delay_min.min(delay);
        self.delay_max = self.delay_max.max(delay);
        self.delay_sum += delay as u128;
        self.rate_min = self.rate_min.min(rate_bps);
        self.rate_max = self.rate_max.max(rate_bps);
        self.rate_sum += rate_bps as u128;
    }

    pub fn to_json(&self) -> CrossedJson {
        let n = self.frames.max(1) as f64;
        let ms = |ns: u64| ns as f64 / 1e6;
        CrossedJson {
            delay_ms: MinMeanMax {
                min: ms(self.delay_min),
                mean: self.delay_sum as f64 / n / 1e6,
                max: ms(self.delay_max),
            },
            rate_bps: MinMeanMax {
                min: self.rate_min as f64,
                mean: self.rate_sum as f64 / n,
                max: self.rate_max as f64,
            },
            frames: self.frames,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DirectionStatsJson {
    pub frames_in: u64,
    pub bytes_in: u64,
    pub frames_out: u64,
    pub bytes_out: u64,
    pub drops: Drops,
    pub queue_delay: Summary,
    pub crossed: CrossedJson,
    /// The request-grant loop, on a direction with capacity on demand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dama: Option<DamaStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_delay: Option<Summary>,
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
            crossed: self.crossed.to_json(),
            dama: self.dama,
            access_delay: self.dama.map(|_| self.access_delay.summary()),
        }
    }
}

/// One direction of the link.
pub struct Direction<T> {
    cfg: DirConfig,
    /// The parameters without a schedule.
    base: Params,
    schedule: Option<Schedule>,
    /// Link time 0 of the schedule.
    epoch: Nanos,
    queue: Box<dyn Queue<T>>,
    /// What the queue dropped in the call in progress.
    dropped: Vec<Dropped<T>>,
    /// End of the current (or last) serialization.
    link_free: Nanos,
    line: VecDeque<Departure<T>>,
    last_release: Nanos,
    loss: LossState,
    jitter: JitterState,
    stats: DirectionStats,
    events: Option<Vec<Event>>,
    /// Hand frames over at the end of serialization (the receiver holds them until
    /// `release`) instead of at `release`.
    far_hold: bool,
    /// Capacity on demand (src/dama.rs): frames wait here for the capacity granted
    /// before they enter the queue in front of the shaper.
    dama: Option<Dama<T>>,
    /// What the DAMA served in the call in progress.
    granted: Vec<(Nanos, Waiting<T>)>,
}

impl<T: Send + 'static> Direction<T> {
    pub fn new(cfg: DirConfig) -> Self {
        Direction {
            base: Params::of(&cfg),
            schedule: None,
            epoch: 0,
            queue: make_queue(&cfg, cfg.rate_bps),
            dropped: Vec::new(),
            link_free: 0,
            line: VecDeque::new(),
            last_release: 0,
            loss: LossState::new(cfg.seed),
            jitter: JitterState::new(cfg.seed),
            stats: DirectionStats::default(),
            events: None,
            far_hold: false,
            dama: make_dama(&cfg, 0),
            granted: Vec::new(),
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

    /// Apply a new configuration at `now`, without a schedule (any schedule in force
    /// ends). Frames already serialized keep their schedule; the new rate applies from
    /// the next start of serialization, the new delay to frames serialized from now on
    /// (never reordering frames), the new queue bound to new arrivals. The loss
    /// generator is reseeded when the seed changes.
    pub fn reconfigure(&mut self, now: Nanos, cfg: DirConfig) {
        self.apply(now, cfg, None);
    }

    /// As [`Direction::reconfigure`], with `schedule` (if any) in force from `now` on:
    /// link time 0 is `now`.
    pub fn apply(&mut self, now: Nanos, cfg: DirConfig, schedule: Option<Schedule>) {
        self.advance(now);
        if cfg.seed != self.cfg.seed {
            self.loss = LossState::new(cfg.seed);
            self.jitter = JitterState::new(cfg.seed);
        }
        self.base = Params::of(&cfg);
        self.schedule = schedule;
        self.epoch = now;
        let new_discipline = cfg.discipline != self.cfg.discipline;
        let new_access = cfg.dama != self.cfg.dama || cfg.rate_bps != self.cfg.rate_bps;
        self.cfg = cfg;
        if new_access {
            // Frames waiting for capacity wait in the new access's queue (or, without
            // capacity on demand any more, in the shaper's), in arrival order.
            let waiting = self.dama.take().map(Dama::into_waiting).unwrap_or_default();
            self.dama = make_dama(&self.cfg, now);
            for w in waiting {
                // One the new queue refuses is counted as dropped there.
                let _refused = self.admit(now, w);
            }
        }
        let rate = self.params_at(now).rate_bps;
        if new_discipline {
            // The waiting frames move to the new discipline in arrival order (a bound
            // or a flow hash it applies may drop some).
            let mut frames = self.queue.take_all();
            self.queue = make_queue(&self.cfg, rate);
            frames.sort_by_key(|p| p.arrival);
            for p in frames {
                self.queue.enqueue(p.arrival, p, &mut self.dropped);
            }
            self.count_dropped(now);
        }
        self.queue.set_bound(self.cfg.queue_bound_at(rate));
    }

    pub fn schedule(&self) -> Option<&Schedule> {
        self.schedule.as_ref()
    }

    /// Where the schedule is at `now`: (link time in ns, index of the step in force).
    pub fn schedule_position(&self, now: Nanos) -> Option<(Nanos, usize)> {
        let s = self.schedule.as_ref()?;
        let elapsed = now.saturating_sub(self.epoch);
        Some((s.link_time(elapsed), s.at(elapsed).0))
    }

    /// The parameters in force at `t` (on the caller's clock).
    pub fn params_at(&self, t: Nanos) -> Params {
        match &self.schedule {
            None => self.base,
            Some(s) => *s.at(t.saturating_sub(self.epoch)).1,
        }
    }

    fn serialization(len: usize, rate_bps: u64) -> Nanos {
        match rate_bps {
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
        self.enqueue_flow(now, len, payload, segmented, 0)
    }

    /// As [`Direction::enqueue_frame`], for a frame of flow `flow`
    /// ([`crate::flow::flow_hash`] of its IP packet; FQ-CoDel queues by it). Err hands
    /// back the arriving frame when it was refused; frames the discipline drops from
    /// the queue instead (drop-head, CoDel, FQ-CoDel's overflow) are counted in the
    /// stats and their payloads dropped.
    pub fn enqueue_flow(
        &mut self,
        now: Nanos,
        len: usize,
        payload: T,
        segmented: bool,
        flow: u64,
    ) -> Result<(), (T, DropCause)> {
        self.stats.frames_in += 1;
        self.stats.bytes_in += len as u64;
        self.advance(now);
        if len > self.cfg.max_frame_bytes && !segmented {
            return Err(self.dropped(now, len, payload, DropCause::Oversize));
        }
        let frame = Waiting {
            arrival: now,
            len,
            flow,
            segmented,
            payload,
        };
        self.admit(now, frame)
    }

    /// A frame arriving at `now` waits for capacity (capacity on demand) or joins the
    /// queue in front of the shaper.
    fn admit(&mut self, now: Nanos, frame: Waiting<T>) -> Result<(), (T, DropCause)> {
        let Some(dama) = self.dama.as_mut() else {
            return self.join_queue(now, frame);
        };
        let len = frame.len;
        match dama.enqueue(frame) {
            Ok(()) => {
                self.trace(Event::Enqueue { t: now, len });
                Ok(())
            }
            Err(refused) => Err(self.dropped(now, len, refused.payload, DropCause::QueueFull)),
        }
    }

    /// `frame` joins the queue in front of the shaper at `now`.
    fn join_queue(&mut self, now: Nanos, frame: Waiting<T>) -> Result<(), (T, DropCause)> {
        let len = frame.len;
        if self.schedule.is_some() {
            // A bound in ms follows the rate in force at arrival.
            let rate = self.params_at(now).rate_bps;
            self.queue.set_bound(self.cfg.queue_bound_at(rate));
        }
        let packet = Packet {
            len,
            arrival: now,
            flow: frame.flow,
            payload: frame.payload,
        };
        let mut dropped = std::mem::take(&mut self.dropped);
        self.queue.enqueue(now, packet, &mut dropped);
        // Only the arriving frame is refused at the tail (QueueFull).
        let refused = dropped
            .iter()
            .position(|d| d.cause == DropCause::QueueFull)
            .map(|i| dropped.swap_remove(i));
        self.dropped = dropped;
        self.count_dropped(now);
        match refused {
            Some(d) => Err(self.dropped(now, len, d.packet.payload, DropCause::QueueFull)),
            None => {
                if self.dama.is_none() {
                    self.trace(Event::Enqueue { t: now, len });
                }
                self.serialize(now);
                Ok(())
            }
        }
    }

    /// Count and trace (at `t`) what the queue dropped; the payloads go.
    fn count_dropped(&mut self, t: Nanos) {
        for d in std::mem::take(&mut self.dropped) {
            self.count_drop(t, d.packet.len, d.cause);
        }
    }

    fn dropped(&mut self, t: Nanos, len: usize, payload: T, cause: DropCause) -> (T, DropCause) {
        self.count_drop(t, len, cause);
        (payload, cause)
    }

    /// A frame of `len` bytes dropped at `t`: counted by cause, and traced.
    fn count_drop(&mut self, t: Nanos, len: usize, cause: DropCause) {
        self.stats.drops.count(cause);
        self.trace(Event::Drop { t, len, cause });
    }

    /// Serve the frames waiting for capacity (capacity on demand) and start the
    /// serialization of every queued frame whose turn has come by `now`.
    pub fn advance(&mut self, now: Nanos) {
        let mut granted = std::mem::take(&mut self.granted);
        if let Some(dama) = self.dama.as_mut() {
            dama.advance(now, &mut granted);
        }
        for (t, frame) in granted.drain(..) {
            // Each enters the shaper's queue when its capacity has carried it; one the
            // queue refuses is counted as dropped there.
            self.serialize(t);
            self.stats.access_delay.record(t - frame.arrival);
            let _refused = self.join_queue(t, frame);
        }
        self.granted = granted;
        self.serialize(now);
    }

    /// Start the serialization of every queued frame whose turn has come by `now`.
    /// The rate and the outage in force at the start of serialization apply, the loss
    /// and the delay in force at its end.
    fn serialize(&mut self, now: Nanos) {
        while let Some(oldest) = self.queue.oldest_arrival() {
            // Every waiting frame has arrived by then (frames are enqueued only after
            // the model has advanced to their arrival).
            let start = self.link_free.max(oldest);
            if start > now {
                break;
            }
            let mut dropped = std::mem::take(&mut self.dropped);
            let p = self.queue.dequeue(start, &mut dropped);
            self.dropped = dropped;
            self.count_dropped(start);
            let Some(p) = p else { continue };
            let start = start.max(p.arrival);
            let at_start = self.params_at(start);
            if at_start.outage {
                // Never on the air: the link stays free for the next frame.
                self.count_drop(start, p.len, DropCause::Outage);
                continue;
            }
            let end = start + Self::serialization(p.len, at_start.rate_bps);
            self.link_free = end;
            let queue_delay = start - p.arrival;
            self.stats.queue_delay.record(queue_delay);
            let at_end = self.params_at(end);
            if self.loss.is_lost(at_end.loss, p.len) {
                // Lost on the air: it used its share of the link all the same.
                self.count_drop(end, p.len, DropCause::Loss);
                continue;
            }
            // A delay that dropped, or a smaller jitter draw than the frame ahead's, may
            // not let this frame overtake the one ahead: it is then due together with it
            // (frames bunch up, as behind a real queue).
            let delay = at_end.delay_ns + self.jitter.draw(self.cfg.jitter);
            let release = (end + delay).max(self.last_release);
            self.last_release = release;
            self.stats.crossed.record(delay, at_start.rate_bps);
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
        let queued = self.queue.oldest_arrival().map(|oldest| {
            let start = self.link_free.max(oldest);
            let Some(p) = self.queue.peek() else {
                // The discipline picks at the dequeue (FQ-CoDel): wake up then.
                return start;
            };
            let at_start = self.params_at(start);
            if at_start.outage {
                // Dropped then: wake up to drop it and start the frames behind.
                return start;
            }
            let end = start + Self::serialization(p.len, at_start.rate_bps);
            if self.far_hold {
                end
            } else {
                (end + self.params_at(end).delay_ns).max(self.last_release)
            }
        });
        let waiting = self.dama.as_ref().and_then(Dama::next_deadline);
        [line, queued, waiting].into_iter().flatten().min()
    }

    pub fn queue_bytes(&self) -> usize {
        self.queue.bytes() + self.dama.as_ref().map_or(0, Dama::queued_bytes)
    }

    pub fn queue_frames(&self) -> usize {
        self.queue.len() + self.dama.as_ref().map_or(0, Dama::queued_frames)
    }

    /// Frames serialized and waiting on the delay line.
    pub fn in_flight_frames(&self) -> usize {
        self.line.len()
    }

    pub fn stats(&self) -> DirectionStats {
        let mut stats = self.stats.clone();
        stats.dama = self.dama.as_ref().map(Dama::stats);
        stats
    }

    pub fn reset_stats(&mut self) {
        self.stats = DirectionStats::default();
        if let Some(d) = self.dama.as_mut() {
            d.reset_stats();
        }
    }
}

/// Capacity on demand where `cfg` asks for it, superframe 0 starting at `epoch`; its
/// queue is the terminal's, bounded as the direction's queue is.
fn make_dama<T>(cfg: &DirConfig, epoch: Nanos) -> Option<Dama<T>> {
    let bound = cfg.queue_bound_at(cfg.rate_bps);
    cfg.dama.map(|d| Dama::new(d, cfg.rate_bps, epoch, bound))
}

/// The queue `cfg` asks for, bounded at `rate_bps`.
fn make_queue<T: Send + 'static>(cfg: &DirConfig, rate_bps: u64) -> Box<dyn Queue<T>> {
    let bound = cfg.queue_bound_at(rate_bps);
    match &cfg.discipline {
        Discipline::DropTail => Box::new(DropTail::new(bound)),
        Discipline::DropHead => Box::new(DropHead::new(bound)),
        Discipline::Codel(c) => Box::new(Codel::new(bound, CodelParams::of(c))),
        Discipline::FqCodel(f) => Box::new(FqCodel::new(bound, f)),
    }
}

#[cfg(test)]
#[path = "direction_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "direction_queue_tests.rs"]
mod queue_tests;

#[cfg(test)]
#[path = "direction_jitter_tests.rs"]
mod jitter_tests;
