//! Per-frame delay variation on the delay line ("jitter"): each frame that crosses gets
//! an extra delay drawn from a distribution, on top of uplink + downlink + framing.
//!
//! A real link's delay varies because frames wait behind other traffic and for their
//! transmission opportunity in a scheduler's frame; such waits never let a frame overtake
//! the one ahead of it. So the draws add to each frame's due time and the direction still
//! keeps frames in order: a frame whose draw would make it due before the frame ahead is
//! due together with it (see `Direction::advance`). The draws come from their own seeded
//! generator (the direction's `seed`), so adding jitter does not change which frames the
//! loss model drops.

use serde::{Deserialize, Serialize};

use crate::config_error::ConfigError;
use crate::rng::Rng;
use crate::Nanos;

/// The largest parameter accepted, ms (a mean or a maximum of 10 s of extra delay).
pub const MAX_JITTER_MS: f64 = 10_000.0;
/// Mixed into the direction's seed so that the jitter draws are a stream of their own.
const JITTER_STREAM: u64 = 0x6A09_E667_F3BC_C909;

/// `{"exponential": {"mean_ms": 4.5}}` or `{"uniform": {"max_ms": 10}}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JitterConfig {
    /// Exponentially distributed extra delay with this mean (the waiting time of a queue
    /// served at random moments).
    Exponential(Exponential),
    /// Uniformly distributed in [0, max_ms] (the wait for a slot in a fixed frame).
    Uniform(Uniform),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exponential {
    pub mean_ms: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uniform {
    pub max_ms: f64,
}

impl JitterConfig {
    /// Check the parameter is in (0, MAX_JITTER_MS]; `dir` is the path of the direction.
    pub(crate) fn validate(&self, dir: &str) -> Result<(), ConfigError> {
        let (field, value) = match *self {
            JitterConfig::Exponential(e) => ("exponential.mean_ms", e.mean_ms),
            JitterConfig::Uniform(u) => ("uniform.max_ms", u.max_ms),
        };
        if value > 0.0 && value <= MAX_JITTER_MS {
            Ok(())
        } else {
            Err(ConfigError::Jitter {
                dir: dir.to_string(),
                field,
                value,
            })
        }
    }

    /// The mean extra delay, ms.
    pub fn mean_ms(&self) -> f64 {
        match *self {
            JitterConfig::Exponential(e) => e.mean_ms,
            JitterConfig::Uniform(u) => u.max_ms / 2.0,
        }
    }

    /// The extra delay for a uniform draw `u` in [0, 1), in ns (inverse transform).
    pub fn quantile_ns(&self, u: f64) -> Nanos {
        let ms = match *self {
            // -ln(1 - u) is finite for u < 1.
            JitterConfig::Exponential(e) => -e.mean_ms * f64::ln_1p(-u),
            JitterConfig::Uniform(x) => x.max_ms * u,
        };
        (ms * 1e6).round() as Nanos
    }
}

/// A direction's jitter draws.
#[derive(Debug, Clone)]
pub struct JitterState {
    rng: Rng,
}

impl JitterState {
    pub fn new(seed: u64) -> Self {
        JitterState {
            rng: Rng::new(seed ^ JITTER_STREAM),
        }
    }

    /// The extra delay of the next frame (0 without jitter: no draw is used then).
    pub fn draw(&mut self, model: Option<JitterConfig>) -> Nanos {
        match model {
            None => 0,
            Some(m) => m.quantile_ns(self.rng.next_f64()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(model: JitterConfig, n: usize, seed: u64) -> Vec<f64> {
        let mut s = JitterState::new(seed);
        (0..n).map(|_| s.draw(Some(model)) as f64 / 1e6).collect()
    }

    #[test]
    fn quantiles_are_exact() {
        let e = JitterConfig::Exponential(Exponential { mean_ms: 4.0 });
        assert_eq!(e.quantile_ns(0.0), 0);
        // The median of an exponential is mean x ln 2.
        assert_eq!(
            e.quantile_ns(0.5),
            (4e6 * std::f64::consts::LN_2).round() as Nanos
        );
        let u = JitterConfig::Uniform(Uniform { max_ms: 10.0 });
        assert_eq!(u.quantile_ns(0.25), 2_500_000);
        assert_eq!(u.mean_ms(), 5.0);
    }

    #[test]
    fn exponential_moments_and_successive_differences() {
        let x = draws(
            JitterConfig::Exponential(Exponential { mean_ms: 4.0 }),
            200_000,
            9,
        );
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        // Mean 4 and standard deviation 4; 3 sigma of the sample mean is 0.027 ms.
        assert!((mean - 4.0).abs() < 0.03, "{mean}");
        assert!((var.sqrt() - 4.0).abs() < 0.06, "{}", var.sqrt());
        // Successive draws differ by |X1 - X2|, a Laplace variable's size: mean 4 too.
        let diff = x.windows(2).map(|w| (w[0] - w[1]).abs()).sum::<f64>() / (n - 1.0);
        assert!((diff - 4.0).abs() < 0.05, "{diff}");
        // Seeded: the same seed gives the same draws.
        assert_eq!(
            x,
            draws(
                JitterConfig::Exponential(Exponential { mean_ms: 4.0 }),
                200_000,
                9
            )
        );
    }

    #[test]
    fn uniform_stays_in_its_range() {
        let x = draws(JitterConfig::Uniform(Uniform { max_ms: 2.0 }), 50_000, 3);
        assert!(x.iter().all(|&v| (0.0..=2.0).contains(&v)));
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        assert!((mean - 1.0).abs() < 0.02, "{mean}");
    }

    #[test]
    fn no_model_draws_nothing() {
        let mut s = JitterState::new(1);
        assert_eq!(s.draw(None), 0);
        // Nothing was drawn: the stream is where a fresh one starts.
        let e = Some(JitterConfig::Uniform(Uniform { max_ms: 1.0 }));
        assert_eq!(s.draw(e), JitterState::new(1).draw(e));
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;
    use crate::config::{assert_refused, refusal, LinkConfig};

    #[test]
    fn parses_and_refuses_naming_the_field() {
        let c = LinkConfig::from_json(
            r#"{"forward": {"jitter": {"exponential": {"mean_ms": 4.5}}}, "return": {}}"#,
        )
        .unwrap();
        assert_eq!(
            c.forward.jitter,
            Some(JitterConfig::Exponential(Exponential { mean_ms: 4.5 }))
        );
        assert_eq!(c.return_.jitter, None);
        let out = serde_json::to_string(&c).unwrap();
        assert!(
            out.contains(r#""jitter":{"exponential":{"mean_ms":4.5}}"#),
            "{out}"
        );
        assert_eq!(LinkConfig::from_json(&out).unwrap(), c);
        assert_eq!(
            refusal(r#"{"forward": {}, "return": {"jitter": {"uniform": {"max_ms": 0}}}}"#),
            "return.jitter.uniform.max_ms must be above 0 and at most 10000 ms, got 0"
        );
        assert_refused(
            r#"{"forward": {"jitter": {"exponential": {"mean": 3}}}, "return": {}}"#,
            "forward.jitter.exponential.mean: unknown field `mean`",
        );
        assert_refused(
            r#"{"forward": {"jitter": {"normal": {}}}, "return": {}}"#,
            "unknown variant `normal`",
        );
    }
}
