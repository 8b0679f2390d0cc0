//! One direction of the link as configured: rate, queue and its discipline, delays,
//! loss, jitter, and how a direction's configuration is checked.

use serde::{Deserialize, Serialize};

use crate::config_error::{check_delay, ConfigError};
use crate::dama::DamaConfig;
use crate::jitter::JitterConfig;
use crate::queue::Bound;

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
    /// Capacity on demand (src/dama.rs; the return link only); absent means the
    /// direction's rate is always the terminal's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dama: Option<DamaConfig>,
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
            dama: None,
            seed: 1,
            max_frame_bytes: default_max_frame(),
        }
    }

    pub(crate) fn validate(&self, dir: &'static str) -> Result<(), ConfigError> {
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
        if let Some(dama) = self.dama {
            dama.validate(dir, self.rate_bps)?;
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
            QueueLimit::Packets(n) => Bound::packets(n as usize),
            _ => Bound::bytes(self.queue_limit_bytes_at(rate_bps)),
        }
    }
}
