//! Why a link configuration is refused: one error type for every part of it (the
//! directions, their disciplines, loss and jitter, the schedule), each naming its field.

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
    /// A parameter of capacity on demand (the return link's DAMA) is out of range.
    #[error("{dir}.dama.{field} {problem}")]
    Dama {
        dir: &'static str,
        field: &'static str,
        problem: &'static str,
    },
    /// A schedule field is invalid: `field` is its path, e.g. `schedule.steps[2].at_ms`.
    #[error("{field} {problem}")]
    Schedule { field: String, problem: String },
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
