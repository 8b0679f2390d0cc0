//! The control socket, as satlink's: a Unix stream socket, one JSON request per line
//! ({"cmd": "health" | "stats" | "reset_stats"}), one JSON reply line per request. Only
//! its owner may connect (mode 0600).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
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

/// Bind the socket (replacing a stale one), owner-only, and serve it on a thread.
pub fn serve(path: &Path, reporter: Arc<Reporter>, health: Value) -> Result<()> {
    if path.exists() {
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove stale socket {}", path.display()))?;
    }
    let listener = UnixListener::bind(path)
        .with_context(|| format!("cannot bind control socket {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} owner-only", path.display()))?;
    let health = Arc::new(health);
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let (reporter, health) = (Arc::clone(&reporter), Arc::clone(&health));
                let _ = std::thread::Builder::new()
                    .name("control-conn".into())
                    .spawn(move || connection(conn, &reporter, &health));
            }
        })?;
    Ok(())
}

fn connection(conn: UnixStream, reporter: &Reporter, health: &Value) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { return };
        if line.trim().is_empty() {
            continue;
        }
        let mut reply = handle(&line, reporter, health).to_string();
        reply.push('\n');
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}
