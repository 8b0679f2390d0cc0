//! Capacity on demand on the return link: DVB-RCS2's demand-assigned multiple access
//! (DAMA, ETSI EN 301 545-2; the guidelines ETSI TR 101 545-4).
//!
//! A terminal sends only in the capacity the gateway assigns it, superframe by superframe:
//! a constant rate assignment (CRA) every superframe without asking, and dynamic capacity
//! it requests from its queue: rate-based (RBDC, the rate its traffic arrives at, kept
//! for a timeout unless renewed) and volume-based (VBDC, the bytes waiting). A request
//! made at the start of superframe k is granted from superframe k + L, L covering the
//! request's way up to the gateway, the scheduler and the burst time plan's way back
//! (`allocation_latency_ms`): traffic that finds no capacity assigned waits for that
//! loop, which is what makes the first packet after an idle period slow and a steady
//! flow not.
//!
//! The model is a fluid server in front of the direction's shaper: in superframe k the
//! terminal's queue is served at its assigned capacity spread over the superframe (the
//! burst time plan spreads a terminal's timeslots over it), a frame leaves when its last
//! bit is served, and then crosses the link like any other (serialization at the carrier
//! rate, loss, delay). One terminal holds the carrier: every request is granted up to
//! the carrier's capacity. Nothing here reads a clock; times are nanoseconds on the
//! caller's clock, and `epoch` is the start of superframe 0.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::config_error::ConfigError;
use crate::queue::Bound;
use crate::{Nanos, MS};

/// How the terminal gets capacity on the return link.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DamaConfig {
    /// Superframe duration, ms: capacity is assigned per superframe.
    pub superframe_ms: f64,
    /// Constant rate assignment, kbit/s: every superframe, without a request.
    #[serde(default)]
    pub cra_kbps: f64,
    /// Most rate-based dynamic capacity the terminal is granted, kbit/s (0: none).
    #[serde(default)]
    pub rbdc_max_kbps: f64,
    /// Most volume one request asks for, kbit (0: no volume-based capacity).
    #[serde(default)]
    pub vbdc_max_kbit: f64,
    /// Superframes from one request to the next.
    #[serde(default = "one")]
    pub request_period_sf: u32,
    /// From a request to the start of the first superframe it is granted in, ms.
    pub allocation_latency_ms: f64,
    /// Superframes an RBDC grant lasts when no request renews it.
    #[serde(default = "default_rbdc_timeout")]
    pub rbdc_timeout_sf: u32,
}

fn one() -> u32 {
    1
}

fn default_rbdc_timeout() -> u32 {
    16
}

/// A field and what is wrong with it.
type Refusal = (&'static str, &'static str);

fn bad(field: &'static str, problem: &'static str) -> Refusal {
    (field, problem)
}

impl DamaConfig {
    /// The direction `dir` (of rate `rate_bps`) with this access, or the field refused.
    pub(crate) fn validate(&self, dir: &'static str, rate_bps: u64) -> Result<(), ConfigError> {
        self.check(dir, rate_bps)
            .map_err(|(field, problem)| ConfigError::Dama {
                dir,
                field,
                problem,
            })
    }

    fn check(&self, dir: &'static str, rate_bps: u64) -> Result<(), Refusal> {
        if dir != "return" {
            return Err(bad(
                "superframe_ms",
                "capacity on demand is the return link's (terminal -> gateway) only",
            ));
        }
        let kbps = |v: f64| v.is_finite() && (0.0..=1e9).contains(&v);
        if !(self.superframe_ms.is_finite() && (1.0..=1000.0).contains(&self.superframe_ms)) {
            return Err(bad("superframe_ms", "must be between 1 and 1000 ms"));
        }
        if !(self.allocation_latency_ms.is_finite()
            && self.allocation_latency_ms >= self.superframe_ms
            && self.allocation_latency_ms <= 10_000.0)
        {
            return Err(bad(
                "allocation_latency_ms",
                "must be at least one superframe and at most 10000 ms",
            ));
        }
        if !kbps(self.cra_kbps) {
            return Err(bad("cra_kbps", "must be between 0 and 1e9 kbit/s"));
        }
        if !kbps(self.rbdc_max_kbps) {
            return Err(bad("rbdc_max_kbps", "must be between 0 and 1e9 kbit/s"));
        }
        if !kbps(self.vbdc_max_kbit) {
            return Err(bad("vbdc_max_kbit", "must be between 0 and 1e9 kbit"));
        }
        if self.cra_kbps == 0.0 && self.rbdc_max_kbps == 0.0 && self.vbdc_max_kbit == 0.0 {
            return Err(bad(
                "cra_kbps",
                "no capacity: give cra_kbps, rbdc_max_kbps or vbdc_max_kbit",
            ));
        }
        if !(1..=1000).contains(&self.request_period_sf) {
            return Err(bad("request_period_sf", "must be between 1 and 1000"));
        }
        if !(1..=100_000).contains(&self.rbdc_timeout_sf) {
            return Err(bad("rbdc_timeout_sf", "must be between 1 and 100000"));
        }
        if rate_bps == 0 {
            return Err(bad(
                "superframe_ms",
                "capacity on demand needs the direction's rate_bps (the carrier's)",
            ));
        }
        Ok(())
    }
}

/// A frame waiting for capacity.
#[derive(Debug)]
pub struct Waiting<T> {
    pub arrival: Nanos,
    pub len: usize,
    pub flow: u64,
    pub segmented: bool,
    pub payload: T,
}

/// What the request-grant loop did, for the link's stats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct DamaStats {
    pub requests: u64,
    pub rbdc_requested_kbps_max: f64,
    pub vbdc_requested_kbit: f64,
    /// Frames that found no capacity left in their superframe and waited for a later one.
    pub frames_waited: u64,
}

/// One RBDC grant: `bps` in superframes `from..until`.
#[derive(Debug, Clone, Copy)]
struct RateGrant {
    from: u64,
    until: u64,
    bps: u64,
}

/// The terminal's side of the loop: its queue, its requests and the capacity granted.
#[derive(Debug)]
pub struct Dama<T> {
    cfg: DamaConfig,
    sf_ns: Nanos,
    latency_sf: u64,
    carrier_bps: u64,
    epoch: Nanos,
    /// Served up to here.
    cursor: Nanos,
    queue: VecDeque<Waiting<T>>,
    queued_bytes: usize,
    /// Bits of the queue's head already served.
    head_served_bits: u64,
    /// Bits that arrived since the last request.
    arrived_bits: u64,
    rate_grants: VecDeque<RateGrant>,
    volume: BTreeMap<u64, u64>,
    bound: Bound,
    stats: DamaStats,
}

impl<T> Dama<T> {
    /// `carrier_bps`: the direction's rate, the most a superframe can carry; superframe
    /// 0 starts at `epoch`.
    pub fn new(cfg: DamaConfig, carrier_bps: u64, epoch: Nanos, bound: Bound) -> Self {
        let sf_ns = ((cfg.superframe_ms * MS as f64).round() as Nanos).max(1);
        let latency_ns = (cfg.allocation_latency_ms * MS as f64).round() as Nanos;
        Dama {
            cfg,
            sf_ns,
            latency_sf: latency_ns.div_ceil(sf_ns).max(1),
            carrier_bps,
            epoch,
            cursor: epoch,
            queue: VecDeque::new(),
            queued_bytes: 0,
            head_served_bits: 0,
            arrived_bits: 0,
            rate_grants: VecDeque::new(),
            volume: BTreeMap::new(),
            bound,
            stats: DamaStats::default(),
        }
    }

    pub fn config(&self) -> &DamaConfig {
        &self.cfg
    }

    pub fn set_bound(&mut self, bound: Bound) {
        self.bound = bound;
    }

    pub fn stats(&self) -> DamaStats {
        self.stats
    }

    pub fn reset_stats(&mut self) {
        self.stats = DamaStats::default();
    }

    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    pub fn queued_frames(&self) -> usize {
        self.queue.len()
    }

    fn superframe(&self, t: Nanos) -> u64 {
        t.saturating_sub(self.epoch) / self.sf_ns
    }

    fn superframe_start(&self, k: u64) -> Nanos {
        self.epoch + k * self.sf_ns
    }

    fn bits_per_sf(&self, bps: u64) -> u64 {
        (bps as u128 * self.sf_ns as u128 / 1_000_000_000) as u64
    }

    fn rate_granted(&self, k: u64) -> u64 {
        // The latest request that covers k decides (a renewal replaces the grant before).
        self.rate_grants
            .iter()
            .rev()
            .find(|g| g.from <= k && k < g.until)
            .map_or(0, |g| g.bps)
    }

    fn cra_bits(&self) -> u64 {
        self.bits_per_sf((self.cfg.cra_kbps * 1000.0).round() as u64)
    }

    /// Bits the terminal may send in superframe k, as granted so far.
    pub fn capacity_bits(&self, k: u64) -> u64 {
        let rate = self.bits_per_sf(self.rate_granted(k));
        let volume = self.volume.get(&k).copied().unwrap_or(0);
        (self.cra_bits() + rate + volume).min(self.bits_per_sf(self.carrier_bps))
    }

    /// A frame arrives at `now` (after [`Dama::advance`] to `now`): it waits in the
    /// terminal's queue, or is handed back when the queue is full.
    pub fn enqueue(&mut self, frame: Waiting<T>) -> Result<(), Waiting<T>> {
        if self
            .bound
            .exceeded(self.queued_bytes + frame.len, self.queue.len() + 1)
        {
            return Err(frame);
        }
        self.arrived_bits += frame.len as u64 * 8;
        self.queued_bytes += frame.len;
        self.queue.push_back(frame);
        Ok(())
    }

    fn idle(&self) -> bool {
        self.queue.is_empty()
            && self.arrived_bits == 0
            && self.rate_grants.is_empty()
            && self.volume.is_empty()
    }

    /// Serve the queue up to `now`; each frame whose last bit was served is handed to
    /// `out` with the time it was, in order.
    pub fn advance(&mut self, now: Nanos, out: &mut Vec<(Nanos, Waiting<T>)>) {
        while self.cursor < now {
            if self.idle() {
                // Nothing waits and nothing is granted: no request would ask for anything.
                self.cursor = now;
                break;
            }
            let k = self.superframe(self.cursor);
            let end_of_sf = self.superframe_start(k + 1);
            let until = now.min(end_of_sf);
            self.serve(k, until, out);
            self.cursor = until;
            if until == end_of_sf {
                self.start_superframe(k + 1);
            }
        }
    }

    fn serve(&mut self, k: u64, until: Nanos, out: &mut Vec<(Nanos, Waiting<T>)>) {
        let capacity = self.capacity_bits(k) as u128;
        let sf = self.sf_ns as u128;
        while capacity > 0 && self.cursor < until {
            let Some(head) = self.queue.front() else {
                break;
            };
            let left = head.len as u128 * 8 - self.head_served_bits as u128;
            let needed = (left * sf).div_ceil(capacity) as Nanos;
            if self.cursor + needed <= until {
                self.cursor += needed;
                let frame = self.queue.pop_front().expect("the head");
                self.queued_bytes -= frame.len;
                self.head_served_bits = 0;
                if self.superframe(frame.arrival) < k {
                    self.stats.frames_waited += 1;
                }
                out.push((self.cursor, frame));
            } else {
                let served = (until - self.cursor) as u128 * capacity / sf;
                self.head_served_bits += served as u64;
                self.cursor = until;
            }
        }
    }

    /// Superframe k starts: every `request_period_sf` superframes, a request from the
    /// queue, granted from superframe k + L.
    fn start_superframe(&mut self, k: u64) {
        self.rate_grants.retain(|g| g.until > k);
        self.volume = self.volume.split_off(&k);
        if !k.is_multiple_of(self.cfg.request_period_sf as u64) {
            return;
        }
        let from = k + self.latency_sf;
        let backlog = (self.queued_bytes as u64 * 8).saturating_sub(self.head_served_bits);
        let period_ns = self.cfg.request_period_sf as u64 * self.sf_ns;
        let arrived = std::mem::take(&mut self.arrived_bits);
        // What will want capacity before this request's grant begins: the backlog, and
        // with rate-based capacity what arrives meanwhile at the rate traffic arrived at
        // (the capacity granted until then was asked for it); what is granted for it
        // already: the capacity until then, and every volume granted.
        let window = (from - k) * self.sf_ns;
        let rbdc_max = (self.cfg.rbdc_max_kbps * 1000.0).round() as u64;
        let arrival_bps = (arrived as u128 * 1_000_000_000 / period_ns as u128) as u64;
        let expected = if rbdc_max > 0 {
            (arrival_bps.min(rbdc_max) as u128 * window as u128 / 1_000_000_000) as u64
        } else {
            0
        };
        let carrier = self.bits_per_sf(self.carrier_bps);
        let until_grant: u64 = (k..from)
            .map(|j| (self.cra_bits() + self.bits_per_sf(self.rate_granted(j))).min(carrier))
            .sum();
        let volume: u64 = self.volume.values().sum();
        let need = (backlog + expected).saturating_sub(until_grant + volume);
        let mut rate = arrival_bps;
        let vbdc = self.cfg.vbdc_max_kbit > 0.0;
        if !vbdc {
            // Without volume requests the rate request also drains what waits.
            rate += (need as u128 * 1_000_000_000 / window as u128) as u64;
        }
        let mut asked = false;
        if rbdc_max > 0 {
            // This request decides the rate from its first superframe on: the grants of
            // earlier requests end there.
            let bps = rate.min(rbdc_max);
            for g in self.rate_grants.iter_mut() {
                g.until = g.until.min(from);
            }
            self.rate_grants.retain(|g| g.from < g.until);
            if bps > 0 {
                let until = from + self.cfg.rbdc_timeout_sf as u64;
                self.rate_grants.push_back(RateGrant { from, until, bps });
                self.stats.rbdc_requested_kbps_max =
                    self.stats.rbdc_requested_kbps_max.max(bps as f64 / 1000.0);
                asked = true;
            }
        }
        if vbdc && need > 0 {
            let mut left = need.min((self.cfg.vbdc_max_kbit * 1000.0).round() as u64);
            self.stats.vbdc_requested_kbit += left as f64 / 1000.0;
            asked = true;
            let mut j = from;
            while left > 0 {
                let spare = carrier.saturating_sub(self.capacity_bits(j));
                let take = spare.min(left);
                if take > 0 {
                    *self.volume.entry(j).or_insert(0) += take;
                    left -= take;
                }
                j += 1;
                if j > from + 100_000 {
                    break; // a carrier full for 100000 superframes: the rest is not granted
                }
            }
        }
        if asked {
            self.stats.requests += 1;
        }
    }

    /// The frames still waiting, in arrival order (the access is being replaced).
    pub fn into_waiting(self) -> Vec<Waiting<T>> {
        self.queue.into_iter().collect()
    }

    /// When a frame will next be served, or when the next request is due while one
    /// matters (None: nothing waits).
    pub fn next_deadline(&self) -> Option<Nanos> {
        if self.queue.is_empty() {
            return None;
        }
        let k = self.superframe(self.cursor);
        let end_of_sf = self.superframe_start(k + 1);
        let capacity = self.capacity_bits(k) as u128;
        if let (Some(head), true) = (self.queue.front(), capacity > 0) {
            let left = head.len as u128 * 8 - self.head_served_bits as u128;
            let done = self.cursor + (left * self.sf_ns as u128).div_ceil(capacity) as Nanos;
            if done <= end_of_sf {
                return Some(done);
            }
        }
        Some(end_of_sf)
    }
}

#[cfg(test)]
#[path = "dama_tests.rs"]
mod tests;
