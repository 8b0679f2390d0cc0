//! satlink's link model, without I/O.
//!
//! One [`Direction`] models one direction of the satellite link as the sending ground
//! station sees it: a [`queue`] (drop-tail, drop-head, CoDel or FQ-CoDel) in front of a
//! rate shaper (serialization at
//! `rate_bps`), then the loss model, then a delay line (uplink + downlink + framing,
//! plus an optional per-frame [`jitter`] that never reorders frames). Nothing here
//! reads a clock: every call takes `now` (nanoseconds on any
//! monotonic clock), so the model is tested on a simulated clock with exact expected
//! departure times, and the binary drives it with `CLOCK_MONOTONIC`. A [`Schedule`]
//! changes a direction's rate, delay, loss and outage at given link times; the model
//! applies it at each frame's own event times.

pub mod codel;
pub mod config;
pub mod config_error;
pub mod dama;
pub mod dir_config;
pub mod direction;
pub mod drop_cause;
pub mod flow;
pub mod fq_codel;
pub mod histogram;
pub mod jitter;
pub mod loss;
pub mod queue;
pub mod rng;
pub mod schedule;

pub use config::LinkConfig;
pub use config_error::ConfigError;
pub use dama::{DamaConfig, DamaStats};
pub use dir_config::{
    CodelConfig, DirConfig, Discipline, FqCodelConfig, GilbertElliott, LossConfig, QueueLimit, Way,
};
pub use direction::{Crossed, Departure, Direction, DirectionStats, Drops, Event};
pub use drop_cause::DropCause;
pub use flow::flow_hash;
pub use histogram::Histogram;
pub use jitter::JitterConfig;
pub use schedule::{Clock, End, Params, Schedule, ScheduleConfig};

/// Time in nanoseconds on the caller's monotonic clock.
pub type Nanos = u64;

/// Nanoseconds per millisecond.
pub const MS: Nanos = 1_000_000;
