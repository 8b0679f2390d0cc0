//! splittcp's requests on its control socket (the control-socket crate, as satlink's:
//! owner-only, one JSON request per line, one JSON reply line per request):
//! {"cmd": "health" | "stats" | "reset_stats"}.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::Reporter;

#[derive(Debug, Deserialize, PartialEq)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Health {},
    Stats {},
    ResetStats {},
}

/// Parse one request line and answer it; `health` is what `health` answers.
pub fn handle(line: &str, reporter: &Reporter, health: &Value) -> Value {
    match serde_json::from_str::<Request>(line) {
        Err(e) => json!({"error": format!("bad request: {e}")}),
        Ok(Request::Health {}) => health.clone(),
        Ok(Request::Stats {}) => reporter.stats(),
        Ok(Request::ResetStats {}) => {
            reporter.reset();
            json!({"ok": true})
        }
    }
}

/// Serve the control socket (owner-only, a stale one replaced) on a thread.
pub fn serve(path: &Path, reporter: Arc<Reporter>, health: Value) -> Result<()> {
    control_socket::serve(path, move |line| handle(line, &reporter, &health))
}
