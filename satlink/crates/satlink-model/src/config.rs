//! The link configuration: the JSON given with `--config` and with `{"cmd":"set"}`.

use serde::{Deserialize, Serialize};

use crate::jitter::JitterConfig;
use crate::queue::Bound;
use crate::schedule::ScheduleConfig;

/// The whole link. forward = gateway -> terminal, return = terminal -> gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    pub forward: DirConfig,
    #[serde(rename = "return")]
    pub return_: DirConfig,
    /// Timed changes of both directions; link time 0 is when this config is applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleConfig>,
}

/// One of the two directions of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// gateway -> terminal
    Forward,
    /// terminal -> gateway
    Return,
}

impl Way {
    pub fn name(self) -> &'static str {
        match self {
            Way::Forward => "forward",
            Way::Return => "return",
        }
    }
}

/// One direction of the link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirConfig {
    /// Serialization rate in bit/s; 0 means unlimited (no serialization, no queueing).
    #[serde(default)]
    pub rate_bps: u64,
    /// Bound of the queue in front of the rate shaper.
    #[serde(default = "default_queue")]
    pub queue: QueueLimit,
    /// How the queue drops and orders packets (default drop-tail).
    #[serde(default, skip_serializing_if = "Discipline::is_drop_tail")]
    pub discipline: Discipline,
    /// Ground station -> satellite, ms.
    #[serde(default)]
    pub uplink_delay_ms: f64,
    /// Satellite -> ground station, ms.
    #[serde(default)]
    pub downlink_delay_ms: f64,
    /// Fixed extra delay per direction (framing, scheduling, processing), ms.
    #[serde(default)]
    pub framing_delay_ms: f64,
    /// Loss model; null means no loss.
    #[serde(default)]
    pub loss: Option<LossConfig>,
    /// Extra delay drawn per frame (src/jitter.rs); absent means none. Frames stay in
    /// order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<JitterConfig>,
    /// Seed of this direction's loss and jitter draws.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Frames longer than this (IP packet bytes) are dropped as `oversize`.
    #[serde(default = "default_max_frame")]
    pub max_frame_bytes: usize,
}

/// Queue bound: `{"bytes": N}`, `{"packets": N}` or `{"ms": X}` (X ms of data at the
/// rate in force).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueLimit {
    Bytes(u64),
    Packets(u64),
    Ms(f64),
}

/// Queue discipline: `"drop_tail"`, `"drop_head"`, `{"codel": {...}}` or
/// `{"fq_codel": {...}}` (src/queue.rs, codel.rs, fq_codel.rs).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Discipline {
    /// Refuse an arriving packet that does not fit.
    #[default]
    DropTail,
    /// Take the arriving packet, drop the oldest until the queue fits.
    DropHead,
    /// RFC 8289; tail drop at the bound.
    Codel(CodelConfig),
    /// RFC 8290; above the bound, drop from the flow with the most bytes.
    FqCodel(FqCodelConfig),
}

impl Discipline {
    pub fn is_drop_tail(&self) -> bool {
        *self == Discipline::DropTail
    }

    pub fn name(&self) -> &'static str {
        match self {
            Discipline::DropTail => "drop_tail",
            Discipline::DropHead => "drop_head",
            Discipline::Codel(_) => "codel",
            Discipline::FqCodel(_) => "fq_codel",
        }
    }
}

/// CoDel's parameters (RFC 8289 §4.2, §4.3 defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodelConfig {
    /// Acceptable standing queue delay, ms (default 5).
    #[serde(default = "default_target_ms")]
    pub target_ms: f64,
    /// Time the delay must stay above target before a drop, ms (default 100).
    #[serde(default = "default_interval_ms")]
    pub interval_ms: f64,
}

impl Default for CodelConfig {
    fn default() -> Self {
        CodelConfig {
            target_ms: default_target_ms(),
            interval_ms: default_interval_ms(),
        }
    }
}

/// FQ-CoDel's parameters (RFC 8290 §5.1 defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FqCodelConfig {
    #[serde(default = "default_target_ms")]
    pub target_ms: f64,
    #[serde(default = "default_interval_ms")]
    pub interval_ms: f64,
    /// Number of flow queues (default 1024).
    #[serde(default = "default_flows")]
    pub flows: u32,
    /// Bytes a flow may send per round of the deficit round robin (default 1514).
    #[serde(default = "default_quantum")]
    pub quantum: u32,
}

impl Default for FqCodelConfig {
    fn default() -> Self {
        FqCodelConfig {
            target_ms: default_target_ms(),
            interval_ms: default_interval_ms(),
            flows: default_flows(),
            quantum: default_quantum(),
        }
    }
}

fn default_target_ms() -> f64 {
    5.0
}
fn default_interval_ms() -> f64 {
    100.0
}
fn default_flows() -> u32 {
    1024
}
fn default_quantum() -> u32 {
    1514
}

/// Loss model: `{"packet_rate": p}`, `{"bit_error_rate": ber}` or
/// `{"gilbert_elliott": {...}}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossConfig {
    /// Each frame is lost with probability p.
    PacketRate(f64),
    /// Each bit is corrupted with probability ber: P(loss) = 1 - (1 - ber)^(8 len).
    BitErrorRate(f64),
    /// A two-state Markov chain stepped once per frame (bursty loss).
    GilbertElliott(GilbertElliott),
}

/// Gilbert-Elliott loss: the chain is in the good or the bad state; a frame is lost
/// with `loss_good` or `loss_bad`, then the chain moves good -> bad with `p_good_bad`
/// and bad -> good with `p_bad_good`. All four in [0, 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GilbertElliott {
    pub p_good_bad: f64,
    pub p_bad_good: f64,
    pub loss_good: f64,
    pub loss_bad: f64,
}

impl LossConfig {
    /// True when no frame can be lost.
    pub fn is_none(&self) -> bool {
        match *self {
            LossConfig::PacketRate(p) | LossConfig::BitErrorRate(p) => p == 0.0,
            LossConfig::GilbertElliott(g) => g.loss_good == 0.0 && g.loss_bad == 0.0,
        }
    }

    /// Check every probability is in [0, 1); `dir` is the path of the direction.
    pub(crate) fn validate(&self, dir: &str) -> Result<(), ConfigError> {
        let fields: Vec<(&'static str, f64)> = match *self {
            LossConfig::PacketRate(p) => vec![("packet_rate", p)],
            LossConfig::BitErrorRate(b) => vec![("bit_error_rate", b)],
            LossConfig::GilbertElliott(g) => vec![
                ("gilbert_elliott.p_good_bad", g.p_good_bad),
                ("gilbert_elliott.p_bad_good", g.p_bad_good),
                ("gilbert_elliott.loss_good", g.loss_good),
                ("gilbert_elliott.loss_bad", g.loss_bad),
            ],
        };
        for (field, value) in fields {
            if !(0.0..1.0).contains(&value) {
                return Err(ConfigError::Loss {
                    dir: dir.to_string(),
                    field,
                    value,
                });
            }
        }
        Ok(())
    }
}

fn default_queue() -> QueueLimit {
    QueueLimit::Ms(250.0)
}
fn default_seed() -> u64 {
    1
}
fn default_max_frame() -> usize {
    1500
}

/// A configuration that parses but cannot be applied.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    /// The JSON does not have the expected shape (the path and serde's message name the
    /// field).
    #[error("invalid link configuration: {0}")]
    Parse(String),
    /// A delay is negative, not finite or above 100 s.
    #[error("{dir}.{field} must be between 0 and 100000 ms, got {value}")]
    Delay {
        dir: String,
        field: &'static str,
        value: f64,
    },
    /// The queue bound is zero, negative or not finite.
    #[error("{dir}.queue must be positive")]
    Queue { dir: &'static str },
    /// A discipline's parameter is out of range.
    #[error("{dir}.discipline.{field} {problem}")]
    Discipline {
        dir: &'static str,
        field: &'static str,
        problem: &'static str,
    },
    /// A loss probability is outside [0, 1).
    #[error("{dir}.loss.{field} must be in [0, 1), got {value}")]
    Loss {
        dir: String,
        field: &'static str,
        value: f64,
    },
    /// max_frame_bytes is outside 68..=65535.
    #[error("{dir}.max_frame_bytes must be between 68 and 65535, got {value}")]
    MaxFrame { dir: &'static str, value: usize },
    /// A jitter parameter is not in (0, 10000] ms.
    #[error("{dir}.jitter.{field} must be above 0 and at most 10000 ms, got {value}")]
    Jitter {
        dir: String,
        field: &'static str,
        value: f64,
    },
    /// A schedule field is invalid: `field` is its path, e.g. `schedule.steps[2].at_ms`.
    #[error("{field} {problem}")]
    Schedule { field: String, problem: String },
}

/// Deserialize with the path of a failing field in the message
/// (`schedule.steps[1].forward: unknown field ...`).
fn parse<'de, D: serde::Deserializer<'de>>(d: D) -> Result<LinkConfig, ConfigError> {
    serde_path_to_error::deserialize(d).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        ConfigError::Parse(if path == "." {
            inner
        } else {
            format!("{path}: {inner}")
        })
    })
}

impl LinkConfig {
    /// Parse and validate a JSON document.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let cfg = parse(&mut de)?;
        de.end().map_err(|e| ConfigError::Parse(e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parse and validate an already decoded JSON value.
    pub fn from_value(v: serde_json::Value) -> Result<Self, ConfigError> {
        let cfg = parse(v)?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.forward.validate("forward")?;
        self.return_.validate("return")?;
        if let Some(s) = &self.schedule {
            s.validate(self)?;
        }
        Ok(())
    }

    /// The configuration of one direction (before any schedule step).
    pub fn dir(&self, way: Way) -> &DirConfig {
        match way {
            Way::Forward => &self.forward,
            Way::Return => &self.return_,
        }
    }

    /// True when `way` never limits the rate nor loses frames, at any step of the
    /// schedule (frames then cross unchanged whatever their length).
    pub fn is_unshaped(&self, way: Way) -> bool {
        let base = self.dir(way);
        base.is_unshaped()
            && self.schedule.as_ref().is_none_or(|s| {
                s.steps.iter().all(|step| {
                    let p = step.dir(way);
                    p.rate_bps.is_none_or(|r| r == 0)
                        && p.loss.is_none_or(|l| l.is_none_or(|l| l.is_none()))
                })
            })
    }
}

impl DirConfig {
    /// A direction with no rate limit, no delay and no loss.
    pub fn unshaped() -> Self {
        DirConfig {
            rate_bps: 0,
            queue: default_queue(),
            discipline: Discipline::DropTail,
            uplink_delay_ms: 0.0,
            downlink_delay_ms: 0.0,
            framing_delay_ms: 0.0,
            loss: None,
            jitter: None,
            seed: 1,
            max_frame_bytes: default_max_frame(),
        }
    }

    fn validate(&self, dir: &'static str) -> Result<(), ConfigError> {
        for (field, value) in [
            ("uplink_delay_ms", self.uplink_delay_ms),
            ("downlink_delay_ms", self.downlink_delay_ms),
            ("framing_delay_ms", self.framing_delay_ms),
        ] {
            check_delay(dir, field, value)?;
        }
        match self.queue {
            QueueLimit::Bytes(0) | QueueLimit::Packets(0) => {
                return Err(ConfigError::Queue { dir })
            }
            QueueLimit::Ms(ms) if !(ms > 0.0 && ms.is_finite()) => {
                return Err(ConfigError::Queue { dir })
            }
            _ => {}
        }
        self.validate_discipline(dir)?;
        if let Some(loss) = self.loss {
            loss.validate(dir)?;
        }
        if let Some(jitter) = self.jitter {
            jitter.validate(dir)?;
        }
        if !(68..=65535).contains(&self.max_frame_bytes) {
            return Err(ConfigError::MaxFrame {
                dir,
                value: self.max_frame_bytes,
            });
        }
        Ok(())
    }

    fn validate_discipline(&self, dir: &'static str) -> Result<(), ConfigError> {
        let bad = |field, problem| {
            Err(ConfigError::Discipline {
                dir,
                field,
                problem,
            })
        };
        let (target_ms, interval_ms) = match self.discipline {
            Discipline::DropTail | Discipline::DropHead => return Ok(()),
            Discipline::Codel(c) => (c.target_ms, c.interval_ms),
            Discipline::FqCodel(f) => {
                if !(1..=65536).contains(&f.flows) {
                    return bad("flows", "must be between 1 and 65536");
                }
                if !(64..=1_048_576).contains(&f.quantum) {
                    return bad("quantum", "must be between 64 and 1048576 bytes");
                }
                (f.target_ms, f.interval_ms)
            }
        };
        if !(target_ms > 0.0 && target_ms <= 10_000.0) {
            return bad("target_ms", "must be above 0 and at most 10000 ms");
        }
        if !(interval_ms > 0.0 && interval_ms <= 100_000.0) {
            return bad("interval_ms", "must be above 0 and at most 100000 ms");
        }
        if target_ms > interval_ms {
            return bad("target_ms", "must not exceed interval_ms");
        }
        Ok(())
    }

    /// True when frames cross unchanged in size and fate whatever their length: no rate
    /// limit and no loss (GSO super-packets may then cross whole).
    pub fn is_unshaped(&self) -> bool {
        self.rate_bps == 0 && self.loss.is_none_or(|l| l.is_none())
    }

    /// The fixed one-way delay after serialization, in ns.
    pub fn delay_ns(&self) -> u64 {
        ((self.uplink_delay_ms + self.downlink_delay_ms + self.framing_delay_ms) * 1e6).round()
            as u64
    }

    /// The drop-tail bound in bytes (`usize::MAX` when the rate is unlimited and the
    /// bound is given in ms: nothing ever waits then).
    pub fn queue_limit_bytes(&self) -> usize {
        self.queue_limit_bytes_at(self.rate_bps)
    }

    /// The drop-tail bound in bytes at `rate_bps` (a bound in ms follows the rate in
    /// force: a schedule's rate steps change it).
    pub fn queue_limit_bytes_at(&self, rate_bps: u64) -> usize {
        match self.queue {
            QueueLimit::Bytes(b) => b as usize,
            QueueLimit::Packets(_) => usize::MAX,
            QueueLimit::Ms(_) if rate_bps == 0 => usize::MAX,
            QueueLimit::Ms(ms) => ((rate_bps as f64) * ms / 8000.0).round() as usize,
        }
    }

    /// The queue's bound at `rate_bps`, in bytes and packets.
    pub fn queue_bound_at(&self, rate_bps: u64) -> Bound {
        match self.queue {
            QueueLimit::Packets(n) => Bound {
                bytes: usize::MAX,
                packets: n as usize,
            },
            _ => Bound::bytes(self.queue_limit_bytes_at(rate_bps)),
        }
    }
}

/// A delay must be in 0..=100000 ms (`dir` is the path of the direction).
pub(crate) fn check_delay(dir: &str, field: &'static str, value: f64) -> Result<(), ConfigError> {
    if (0.0..=100_000.0).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::Delay {
            dir: dir.to_string(),
            field,
            value,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GEO: &str = r#"{"forward": {"rate_bps": 10000000, "queue": {"bytes": 375000},
        "uplink_delay_ms": 125.0, "downlink_delay_ms": 125.0, "framing_delay_ms": 15.0,
        "loss": null, "seed": 1},
      "return": {"rate_bps": 10000000, "queue": {"ms": 300}, "uplink_delay_ms": 125,
        "downlink_delay_ms": 125, "framing_delay_ms": 15,
        "loss": {"bit_error_rate": 1e-5}, "seed": 2}}"#;

    #[test]
    fn parses_the_contract_example() {
        let c = LinkConfig::from_json(GEO).unwrap();
        assert_eq!(c.forward.delay_ns(), 265_000_000);
        assert_eq!(c.forward.queue_limit_bytes(), 375_000);
        assert_eq!(c.return_.queue_limit_bytes(), 375_000);
        assert_eq!(c.return_.loss, Some(LossConfig::BitErrorRate(1e-5)));
        // Round trip through JSON gives the same config.
        let again = LinkConfig::from_json(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn defaults_fill_missing_fields() {
        let c = LinkConfig::from_json(r#"{"forward": {}, "return": {"rate_bps": 5}}"#).unwrap();
        assert_eq!(c.forward, DirConfig::unshaped());
        assert_eq!(c.forward.queue_limit_bytes(), usize::MAX);
    }

    #[test]
    fn unknown_field_is_named() {
        let e = LinkConfig::from_json(r#"{"forward": {"rate": 1}, "return": {}}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `rate`"), "{e}");
        let e = LinkConfig::from_json(r#"{"forward": {}, "return": {}, "x": 1}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `x`"), "{e}");
        let e = LinkConfig::from_json(r#"{"forward": {"queue": {"frames": 3}}, "return": {}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("unknown variant `frames`"), "{e}");
        let e = LinkConfig::from_json(
            r#"{"forward": {"discipline": {"codel": {"target": 3}}}, "return": {}}"#,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("forward.discipline.codel.target: unknown field `target`"),
            "{e}"
        );
        let e = LinkConfig::from_json(r#"{"forward": {"discipline": "red"}, "return": {}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("unknown variant `red`"), "{e}");
    }

    #[test]
    fn disciplines_parse_with_their_rfc_defaults() {
        let c = LinkConfig::from_json(
            r#"{"forward": {"discipline": {"fq_codel": {}}, "queue": {"packets": 10240}},
                "return": {"discipline": "drop_head"}}"#,
        )
        .unwrap();
        assert_eq!(
            c.forward.discipline,
            Discipline::FqCodel(FqCodelConfig::default())
        );
        assert_eq!(c.forward.queue_bound_at(10_000_000).packets, 10240);
        assert_eq!(c.return_.discipline, Discipline::DropHead);
        let c = LinkConfig::from_json(
            r#"{"forward": {"discipline": {"codel": {"target_ms": 20}}}, "return": {}}"#,
        )
        .unwrap();
        assert_eq!(
            c.forward.discipline,
            Discipline::Codel(CodelConfig {
                target_ms: 20.0,
                interval_ms: 100.0
            })
        );
        let again = LinkConfig::from_json(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(again, c);
        // Drop-tail, the default, is not written out: old readers read the config.
        assert!(!serde_json::to_string(
            &LinkConfig::from_json(r#"{"forward": {}, "return": {}}"#).unwrap()
        )
        .unwrap()
        .contains("discipline"));
        let e = LinkConfig::from_json(
            r#"{"forward": {"discipline": {"codel": {"target_ms": 200}}}, "return": {}}"#,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "forward.discipline.target_ms must not exceed interval_ms"
        );
        assert!(
            LinkConfig::from_json(r#"{"forward": {"queue": {"packets": 0}}, "return": {}}"#)
                .is_err()
        );
    }

    #[test]
    fn bad_values_are_rejected() {
        let e = LinkConfig::from_json(r#"{"forward": {"uplink_delay_ms": -1}, "return": {}}"#)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "forward.uplink_delay_ms must be between 0 and 100000 ms, got -1"
        );
        let e =
            LinkConfig::from_json(r#"{"forward": {}, "return": {"loss": {"packet_rate": 1.5}}}"#)
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            "return.loss.packet_rate must be in [0, 1), got 1.5"
        );
        assert!(
            LinkConfig::from_json(r#"{"forward": {"queue": {"bytes": 0}}, "return": {}}"#).is_err()
        );
        assert!(LinkConfig::from_json(r#"{"forward": {}}"#)
            .unwrap_err()
            .to_string()
            .contains("missing field `return`"));
    }
}
