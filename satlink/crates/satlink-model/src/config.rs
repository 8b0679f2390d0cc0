//! The link configuration: the JSON given with `--config` and with `{"cmd":"set"}`.

use serde::{Deserialize, Serialize};

use crate::config_error::ConfigError;
use crate::dir_config::{DirConfig, Way};
use crate::schedule::{Schedule, ScheduleConfig};

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
            s.validate(&self.forward, &self.return_)?;
        }
        Ok(())
    }

    /// `way`'s schedule (None when the link has none).
    pub fn schedule_of(&self, way: Way) -> Option<Schedule> {
        let s = self.schedule.as_ref()?;
        Some(Schedule::new(s, self.dir(way), way))
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

/// Why `json` is refused (tests).
#[cfg(test)]
#[track_caller]
pub(crate) fn refusal(json: &str) -> String {
    LinkConfig::from_json(json).unwrap_err().to_string()
}

/// Asserts that `json` is refused with an error containing `expected` (tests).
#[cfg(test)]
#[track_caller]
pub(crate) fn assert_refused(json: &str, expected: &str) {
    let e = refusal(json);
    assert!(e.contains(expected), "{json}: {e}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dir_config::*;

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
        for (json, expected) in [
            (
                r#"{"forward": {"rate": 1}, "return": {}}"#,
                "unknown field `rate`",
            ),
            (
                r#"{"forward": {}, "return": {}, "x": 1}"#,
                "unknown field `x`",
            ),
            (
                r#"{"forward": {"queue": {"frames": 3}}, "return": {}}"#,
                "unknown variant `frames`",
            ),
            (
                r#"{"forward": {"discipline": {"codel": {"target": 3}}}, "return": {}}"#,
                "forward.discipline.codel.target: unknown field `target`",
            ),
            (
                r#"{"forward": {"discipline": "red"}, "return": {}}"#,
                "unknown variant `red`",
            ),
        ] {
            assert_refused(json, expected);
        }
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
        assert_eq!(
            refusal(r#"{"forward": {"discipline": {"codel": {"target_ms": 200}}}, "return": {}}"#),
            "forward.discipline.target_ms must not exceed interval_ms"
        );
        assert!(
            LinkConfig::from_json(r#"{"forward": {"queue": {"packets": 0}}, "return": {}}"#)
                .is_err()
        );
    }

    #[test]
    fn bad_values_are_rejected() {
        assert_eq!(
            refusal(r#"{"forward": {"uplink_delay_ms": -1}, "return": {}}"#),
            "forward.uplink_delay_ms must be between 0 and 100000 ms, got -1"
        );
        assert_eq!(
            refusal(r#"{"forward": {}, "return": {"loss": {"packet_rate": 1.5}}}"#),
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
