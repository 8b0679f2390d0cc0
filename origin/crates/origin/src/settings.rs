//! What applies to new connections, and changing it between runs.

use std::sync::{Arc, RwLock};

use quinn::crypto::rustls::QuicServerConfig;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::cc::{CcError, QuicCc, TcpCc};
use crate::sched::{Scheduler, UnknownScheduler};

/// The congestion controls, QUIC initial window and stream scheduler that new
/// connections get.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Settings {
    pub tcp_cc: TcpCc,
    pub quic_cc: QuicCc,
    /// Bytes; `None` is quinn's default (14720 bytes or ten datagrams, RFC 9002).
    pub quic_initial_window: Option<u64>,
    /// Which response sends next on an HTTP/2 or HTTP/3 connection (sched.rs).
    pub scheduler: Scheduler,
}

/// Errors in a `POST /config` body.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The body is not a JSON object.
    #[error("the body must be a JSON object such as {{\"tcp_cc\": \"bbr\"}}: {0}")]
    NotAnObject(String),
    /// A key origin does not know.
    #[error("unknown key {0:?} (expected tcp_cc, quic_cc, quic_initial_window, scheduler)")]
    UnknownKey(String),
    /// A value of the wrong type.
    #[error("{key} must be {expected}")]
    Type {
        key: &'static str,
        expected: &'static str,
    },
    /// An unknown or unavailable algorithm.
    #[error(transparent)]
    Cc(#[from] CcError),
    /// An unknown scheduler.
    #[error("scheduler: {0}")]
    Scheduler(#[from] UnknownScheduler),
}

/// A setting's value that must be a string.
fn string<'a>(v: &'a Value, key: &'static str) -> Result<&'a str, ConfigError> {
    v.as_str().ok_or(ConfigError::Type {
        key,
        expected: "a string",
    })
}

impl Settings {
    /// These settings with a `POST /config` body applied; checks TCP availability.
    pub fn with_update(mut self, body: &[u8]) -> Result<Self, ConfigError> {
        let map: Map<String, Value> =
            serde_json::from_slice(body).map_err(|e| ConfigError::NotAnObject(e.to_string()))?;
        for (k, v) in &map {
            match k.as_str() {
                "tcp_cc" => {
                    let s = string(v, "tcp_cc")?;
                    let cc: TcpCc = s.parse()?;
                    cc.check_available()?;
                    self.tcp_cc = cc;
                }
                "quic_cc" => {
                    let s = string(v, "quic_cc")?;
                    self.quic_cc = s.parse()?;
                }
                "quic_initial_window" => {
                    self.quic_initial_window = match v {
                        Value::Null => None,
                        v => Some(v.as_u64().filter(|&w| w > 0).ok_or(ConfigError::Type {
                            key: "quic_initial_window",
                            expected: "a positive number of bytes, or null for quinn's default",
                        })?),
                    }
                }
                "scheduler" => {
                    let s = string(v, "scheduler")?;
                    self.scheduler = s.parse()?;
                }
                other => return Err(ConfigError::UnknownKey(other.into())),
            }
        }
        Ok(self)
    }
}

/// Settings shared by the accept loops and the control endpoint.
pub type SharedSettings = Arc<RwLock<Settings>>;

/// The quinn server configuration for the given settings.
pub fn quic_server_config(crypto: Arc<QuicServerConfig>, s: &Settings) -> quinn::ServerConfig {
    let mut transport = quinn::TransportConfig::default();
    transport.congestion_controller_factory(s.quic_cc.factory(s.quic_initial_window));
    // Every session observed, so each connection's record says how its handshake went.
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crate::observe::ObservedQuic::new(crypto)));
    cfg.transport_config(Arc::new(transport));
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Settings {
        Settings {
            tcp_cc: TcpCc::Cubic,
            quic_cc: QuicCc::Cubic,
            quic_initial_window: None,
            scheduler: Scheduler::RoundRobin,
        }
    }

    #[test]
    fn applies_quic_updates_and_refuses_bad_ones() {
        let s = base()
            .with_update(br#"{"quic_cc": "bbr", "quic_initial_window": 40000}"#)
            .unwrap();
        assert_eq!(s.quic_cc, QuicCc::Bbr);
        assert_eq!(s.quic_initial_window, Some(40000));
        let s = s.with_update(br#"{"quic_initial_window": null}"#).unwrap();
        assert_eq!(s.quic_initial_window, None);
        assert!(base()
            .with_update(br#"{"quic_cc": "vegas"}"#)
            .unwrap_err()
            .to_string()
            .contains("vegas"));
        assert!(base().with_update(br#"{"tcp_cc": "nonexistent"}"#).is_err());
        assert!(base().with_update(br#"{"colour": 1}"#).is_err());
        assert!(base().with_update(b"[1]").is_err());
    }

    #[test]
    fn applies_a_scheduler_and_refuses_unknown_ones() {
        let s = base().with_update(br#"{"scheduler": "rfc9218"}"#).unwrap();
        assert_eq!(s.scheduler, Scheduler::Rfc9218);
        let e = base()
            .with_update(br#"{"scheduler": "fifo"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("scheduler") && e.contains("sequential"), "{e}");
        assert!(base().with_update(br#"{"scheduler": 1}"#).is_err());
        assert_eq!(
            serde_json::to_value(s).unwrap()["scheduler"],
            serde_json::json!("rfc9218")
        );
    }
}
