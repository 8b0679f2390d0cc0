//! satlink's requests on its control socket (the control-socket crate: owner-only, one
//! JSON request per line, one JSON reply line per request), and `satlink ctl`'s client.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::{json, Value};

use satlink_model::LinkConfig;

/// A request on the control socket.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Health {},
    Stats {},
    Set { config: Value },
    ResetStats {},
}

/// What a role answers on its control socket.
pub trait Controlled: Send + Sync + 'static {
    fn health(&self) -> Value;
    fn stats(&self) -> Value;
    fn set(&self, cfg: LinkConfig) -> Value;
    fn reset_stats(&self);
}

/// Parse one request line and answer it.
pub fn handle(line: &str, role: &dyn Controlled) -> Value {
    let req: Request = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => return json!({"error": format!("bad request: {e}")}),
    };
    match req {
        Request::Health {} => role.health(),
        Request::Stats {} => role.stats(),
        Request::ResetStats {} => {
            role.reset_stats();
            json!({"ok": true})
        }
        Request::Set { config } => match LinkConfig::from_value(config) {
            Ok(cfg) => role.set(cfg),
            Err(e) => json!({"error": e.to_string()}),
        },
    }
}

/// Serve the control socket (owner-only, a stale one replaced) on a thread.
pub fn serve(path: &Path, role: Arc<dyn Controlled>) -> Result<()> {
    control_socket::serve(path, move |line| handle(line, &*role))
}

/// `satlink ctl SOCKET REQUEST`: send one request, print the reply.
pub fn client(path: &PathBuf, request: &str) -> Result<String> {
    let mut s = UnixStream::connect(path)
        .with_context(|| format!("cannot connect to control socket {}", path.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(request.trim().as_bytes())?;
    s.write_all(b"\n")?;
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .context("no reply on the control socket")?;
    Ok(line.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Fake(Mutex<Vec<String>>);

    impl Controlled for Fake {
        fn health(&self) -> Value {
            json!({"role": "fake"})
        }
        fn stats(&self) -> Value {
            json!({"forward": {}})
        }
        fn set(&self, cfg: LinkConfig) -> Value {
            self.0
                .lock()
                .unwrap()
                .push(format!("{}", cfg.forward.rate_bps));
            json!({"ok": true})
        }
        fn reset_stats(&self) {
            self.0.lock().unwrap().push("reset".into());
        }
    }

    #[test]
    fn requests_parse() {
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"cmd":"health"}"#).unwrap(),
            Request::Health {}
        );
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"cmd":"reset_stats"}"#).unwrap(),
            Request::ResetStats {}
        );
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"reboot"}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"set"}"#).is_err());
    }

    #[test]
    fn handle_answers_and_reports_errors() {
        let f = Fake(Mutex::new(vec![]));
        assert_eq!(handle(r#"{"cmd":"health"}"#, &f), json!({"role": "fake"}));
        assert_eq!(handle(r#"{"cmd":"reset_stats"}"#, &f), json!({"ok": true}));
        let ok = handle(
            r#"{"cmd":"set","config":{"forward":{"rate_bps":5},"return":{}}}"#,
            &f,
        );
        assert_eq!(ok, json!({"ok": true}));
        assert_eq!(*f.0.lock().unwrap(), vec!["reset", "5"]);
        let bad = handle(
            r#"{"cmd":"set","config":{"forward":{"rat":5},"return":{}}}"#,
            &f,
        );
        assert!(
            bad["error"]
                .as_str()
                .unwrap()
                .contains("unknown field `rat`"),
            "{bad}"
        );
        // A schedule is part of the config; its errors name the field.
        let ok = handle(
            r#"{"cmd":"set","config":{"forward":{"rate_bps":7},"return":{},
                "schedule":{"id":"s","end":"loop","length_ms":20,"steps":[{"at_ms":0},
                  {"at_ms":10,"forward":{"outage":true}}]}}}"#,
            &f,
        );
        assert_eq!(ok, json!({"ok": true}));
        let bad = handle(
            r#"{"cmd":"set","config":{"forward":{},"return":{},
                "schedule":{"steps":[{"at_ms":0},{"at_ms":0}]}}}"#,
            &f,
        );
        assert_eq!(
            bad["error"],
            "schedule.steps[1].at_ms must be greater than steps[0].at_ms (0) to the ns, got 0"
        );
        let bad = handle(
            r#"{"cmd":"set","config":{"forward":{},"return":{},
                "schedule":{"steps":[{"at_ms":0,"forward":{"outages":true}}]}}}"#,
            &f,
        );
        assert!(
            bad["error"]
                .as_str()
                .unwrap()
                .contains("schedule.steps[0].forward.outages: unknown field `outages`"),
            "{bad}"
        );
        assert_eq!(*f.0.lock().unwrap(), vec!["reset", "5", "7"]);
        let bad = handle("not json", &f);
        assert!(bad["error"].as_str().unwrap().starts_with("bad request"));
        let bad = handle(r#"{"cmd":"stats","x":1}"#, &f);
        assert!(bad["error"].is_string(), "{bad}");
    }
}
