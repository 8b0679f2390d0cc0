//! Timed link schedules: steps that change a direction's rate, delay, loss and outage at
//! given link times (LEO handovers, rain fade, recorded traces).
//!
//! [`ScheduleConfig`] is the JSON (`"schedule"` next to `"forward"` and `"return"`); a
//! step names only the fields it changes, the others keep the previous step's value (the
//! direction's own configuration for the first step). [`Schedule`] is one direction's
//! resolved timeline: the [`Params`] in force at any link time, with the schedule either
//! looping every `length_ms` or holding its last step. Link time 0 (the epoch) is given
//! by the caller: the moment the configuration is applied; with `"clock": "utc"` link
//! time is instead the Unix time modulo the loop's length ([`Schedule::aligned`]).

use serde::{Deserialize, Deserializer, Serialize};

use crate::config_error::{check_delay, ConfigError};
use crate::dir_config::{DirConfig, LossConfig, Way};
use crate::Nanos;

/// What happens after the last step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum End {
    /// Start again from the first step every `length_ms`.
    Loop,
    /// The last step stays in force.
    #[default]
    Hold,
}

/// What a schedule's link time counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// Link time 0 is the moment the configuration is applied (each station its own).
    #[default]
    Apply,
    /// Link time is the Unix time (CLOCK_REALTIME, UTC) modulo `length_ms`: every station
    /// of a host shares it, and a loop of whole minutes puts a step at the same second of
    /// every minute (Starlink reconfigures at seconds 12, 27, 42 and 57). Loop only.
    Utc,
}

impl Clock {
    pub fn is_apply(&self) -> bool {
        *self == Clock::Apply
    }
}

/// `"schedule": {"id": ..., "end": "loop"|"hold", "length_ms": ..., "clock": "apply"|"utc",
/// "steps": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleConfig {
    /// Reported in `stats` and `health`; `[a-z0-9][a-z0-9_.-]*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub end: End,
    /// Required with `"end": "loop"` (and only then); greater than the last `at_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_ms: Option<f64>,
    /// What link time counts from (default: the moment the config is applied).
    #[serde(default, skip_serializing_if = "Clock::is_apply")]
    pub clock: Clock,
    /// At least one; `at_ms` strictly increasing, the first at 0.
    pub steps: Vec<StepConfig>,
}

/// One step: from link time `at_ms` on, these changes are in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepConfig {
    pub at_ms: f64,
    #[serde(default, skip_serializing_if = "PartialDir::is_empty")]
    pub forward: PartialDir,
    #[serde(
        default,
        rename = "return",
        skip_serializing_if = "PartialDir::is_empty"
    )]
    pub return_: PartialDir,
}

impl StepConfig {
    pub fn dir(&self, way: Way) -> &PartialDir {
        match way {
            Way::Forward => &self.forward,
            Way::Return => &self.return_,
        }
    }
}

/// The fields of a direction a step changes; absent fields keep their value. `"loss":
/// null` switches loss off (absent keeps the loss model in force).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartialDir {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink_delay_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downlink_delay_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framing_delay_ms: Option<f64>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub loss: Option<Option<LossConfig>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outage: Option<bool>,
}

/// A field that is present (even as null) is `Some`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

impl PartialDir {
    pub fn is_empty(&self) -> bool {
        *self == PartialDir::default()
    }
}

/// What one direction applies to a frame: the parameters in force at a link time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Serialization rate, bit/s; 0 = unlimited (or, during an outage, nothing).
    pub rate_bps: u64,
    /// uplink + downlink + framing, ns.
    pub delay_ns: Nanos,
    pub loss: Option<LossConfig>,
    /// Frames that would start serialization are dropped (`outage`).
    pub outage: bool,
}

/// A direction's delays in ms, kept separately while steps are resolved.
#[derive(Debug, Clone, Copy)]
struct Resolved {
    rate_bps: u64,
    /// The rate was set by a step (not inherited from the direction's config, where 0
    /// means unlimited).
    rate_from_step: bool,
    uplink: f64,
    downlink: f64,
    framing: f64,
    loss: Option<LossConfig>,
    outage: bool,
}

impl Resolved {
    fn base(cfg: &DirConfig) -> Self {
        Resolved {
            rate_bps: cfg.rate_bps,
            rate_from_step: false,
            uplink: cfg.uplink_delay_ms,
            downlink: cfg.downlink_delay_ms,
            framing: cfg.framing_delay_ms,
            loss: cfg.loss,
            outage: false,
        }
    }

    fn apply(&mut self, p: &PartialDir) {
        if let Some(r) = p.rate_bps {
            self.rate_bps = r;
            self.rate_from_step = true;
        }
        self.uplink = p.uplink_delay_ms.unwrap_or(self.uplink);
        self.downlink = p.downlink_delay_ms.unwrap_or(self.downlink);
        self.framing = p.framing_delay_ms.unwrap_or(self.framing);
        if let Some(l) = p.loss {
            self.loss = l;
        }
        self.outage = p.outage.unwrap_or(self.outage);
    }

    fn params(&self) -> Params {
        Params {
            rate_bps: self.rate_bps,
            delay_ns: ms_to_ns(self.uplink + self.downlink + self.framing),
            loss: self.loss,
            outage: self.outage,
        }
    }
}

impl Params {
    /// The parameters of a direction without a schedule.
    pub fn of(cfg: &DirConfig) -> Self {
        Resolved::base(cfg).params()
    }
}

fn ms_to_ns(ms: f64) -> Nanos {
    (ms * 1e6).round() as Nanos
}

fn bad(field: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::Schedule {
        field: field.into(),
        problem: problem.into(),
    }
}

impl ScheduleConfig {
    /// Check the schedule against the link's two directions (before any step); every
    /// error names its field.
    pub(crate) fn validate(
        &self,
        forward: &DirConfig,
        return_: &DirConfig,
    ) -> Result<(), ConfigError> {
        if let Some(id) = &self.id {
            let ok = id.bytes().enumerate().all(|(i, c)| {
                c.is_ascii_lowercase()
                    || c.is_ascii_digit()
                    || (i > 0 && matches!(c, b'_' | b'.' | b'-'))
            });
            if id.is_empty() || !ok {
                return Err(bad(
                    "schedule.id",
                    format!("must match [a-z0-9][a-z0-9_.-]*, got {id:?}"),
                ));
            }
        }
        if self.steps.is_empty() {
            return Err(bad("schedule.steps", "must have at least one step"));
        }
        let mut last: Option<(f64, Nanos)> = None;
        for (i, step) in self.steps.iter().enumerate() {
            let field = format!("schedule.steps[{i}].at_ms");
            let at = step.at_ms;
            if !(at.is_finite() && at >= 0.0) {
                return Err(bad(
                    field,
                    format!("must be a finite number >= 0, got {at}"),
                ));
            }
            match last {
                None if at != 0.0 => {
                    return Err(bad(field, format!("must be 0 (the first step), got {at}")))
                }
                Some((prev, prev_ns)) if at <= prev || ms_to_ns(at) <= prev_ns => {
                    return Err(bad(
                        field,
                        format!(
                            "must be greater than steps[{}].at_ms ({prev}) to the ns, got {at}",
                            i - 1
                        ),
                    ))
                }
                _ => {}
            }
            last = Some((at, ms_to_ns(at)));
        }
        let (last_at, last_ns) = last.expect("at least one step");
        match (self.end, self.length_ms) {
            (End::Loop, None) => {
                return Err(bad(
                    "schedule.length_ms",
                    "is required with \"end\": \"loop\"",
                ))
            }
            (End::Loop, Some(len))
                if !(len.is_finite() && len > last_at && ms_to_ns(len) > last_ns) =>
            {
                return Err(bad(
                    "schedule.length_ms",
                    format!("must be greater than the last step's at_ms ({last_at}), got {len}"),
                ))
            }
            (End::Hold, Some(_)) => {
                return Err(bad(
                    "schedule.length_ms",
                    "is only valid with \"end\": \"loop\"",
                ))
            }
            _ => {}
        }
        if self.clock == Clock::Utc && self.end != End::Loop {
            return Err(bad(
                "schedule.clock",
                "\"utc\" needs \"end\": \"loop\" (link time is the Unix time modulo \
                 length_ms)",
            ));
        }
        for way in [Way::Forward, Way::Return] {
            let mut r = Resolved::base(match way {
                Way::Forward => forward,
                Way::Return => return_,
            });
            for (i, step) in self.steps.iter().enumerate() {
                let p = step.dir(way);
                let dir = format!("schedule.steps[{i}].{}", way.name());
                for (field, value) in [
                    ("uplink_delay_ms", p.uplink_delay_ms),
                    ("downlink_delay_ms", p.downlink_delay_ms),
                    ("framing_delay_ms", p.framing_delay_ms),
                ] {
                    if let Some(v) = value {
                        check_delay(&dir, field, v)?;
                    }
                }
                if let Some(Some(loss)) = p.loss {
                    loss.validate(&dir)?;
                }
                r.apply(p);
                if r.rate_from_step && r.rate_bps == 0 && !r.outage {
                    return Err(bad(
                        format!("{dir}.rate_bps"),
                        "is 0 without \"outage\": true (0 only during an outage; \
                         name the rate when the outage ends)",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// One direction's resolved schedule: the parameters in force at any link time.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    id: Option<String>,
    /// Loop length in ns, or None: hold the last step.
    length: Option<Nanos>,
    clock: Clock,
    /// Link time at the epoch (0 unless aligned to the Unix time).
    start: Nanos,
    at: Vec<Nanos>,
    params: Vec<Params>,
}

impl Schedule {
    /// `way`'s schedule of a validated schedule configuration, whose steps change the
    /// direction's configuration `base` (LinkConfig::schedule_of gives a link's).
    pub fn new(s: &ScheduleConfig, base: &DirConfig, way: Way) -> Self {
        let mut r = Resolved::base(base);
        let mut at = Vec::with_capacity(s.steps.len());
        let mut params = Vec::with_capacity(s.steps.len());
        for step in &s.steps {
            r.apply(step.dir(way));
            at.push(ms_to_ns(step.at_ms));
            params.push(r.params());
        }
        Schedule {
            id: s.id.clone(),
            length: match s.end {
                End::Loop => s.length_ms.map(ms_to_ns),
                End::Hold => None,
            },
            clock: s.clock,
            start: 0,
            at,
            params,
        }
    }

    /// The schedule as applied when the Unix time is `unix_ns`: with `"clock": "utc"`
    /// its link time at the epoch is `unix_ns` modulo the loop's length; otherwise 0.
    pub fn aligned(mut self, unix_ns: u128) -> Self {
        if let (Clock::Utc, Some(len)) = (self.clock, self.length) {
            self.start = (unix_ns % len as u128) as Nanos;
        }
        self
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The loop length in ns (None: the last step holds).
    pub fn length_ns(&self) -> Option<Nanos> {
        self.length
    }

    pub fn steps(&self) -> usize {
        self.at.len()
    }

    /// Link time after `elapsed` ns since the epoch (wrapped with a loop).
    pub fn link_time(&self, elapsed: Nanos) -> Nanos {
        match self.length {
            Some(len) => (elapsed % len + self.start) % len,
            None => elapsed + self.start,
        }
    }

    /// The step in force `elapsed` ns after the epoch: (index, parameters).
    pub fn at(&self, elapsed: Nanos) -> (usize, &Params) {
        let t = self.link_time(elapsed);
        // at[0] == 0, so at least one step starts at or before t.
        let i = self.at.partition_point(|&a| a <= t) - 1;
        (i, &self.params[i])
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "schedule_clock_tests.rs"]
mod clock_tests;
