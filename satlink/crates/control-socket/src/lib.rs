//! The control socket of Clarke's Rust link parts (satlink, splittcp): a Unix stream
//! socket only its owner may connect to (mode 0600), one JSON request per line, one JSON
//! reply line per request, several requests per connection. What a request means is the
//! part's own: it gives `serve` the function that answers a line.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

/// How long a connection may stay silent before it is closed: a client that went away
/// without closing does not keep its thread.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Bind the socket at `path` (replacing a stale one), make it owner-only, and answer
/// every non-empty line a client sends with `answer(line)`, a thread per connection.
pub fn serve<A>(path: &Path, answer: A) -> Result<()>
where
    A: Fn(&str) -> Value + Send + Sync + 'static,
{
    if path.exists() {
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove stale socket {}", path.display()))?;
    }
    let listener = UnixListener::bind(path)
        .with_context(|| format!("cannot bind control socket {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} owner-only", path.display()))?;
    let answer = Arc::new(answer);
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let answer = Arc::clone(&answer);
                let _ = std::thread::Builder::new()
                    .name("control-conn".into())
                    .spawn(move || connection(conn, &*answer));
            }
        })?;
    Ok(())
}

fn connection(conn: UnixStream, answer: &dyn Fn(&str) -> Value) {
    let _ = conn.set_read_timeout(Some(IDLE_TIMEOUT));
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { return };
        if line.trim().is_empty() {
            continue;
        }
        let mut reply = answer(&line).to_string();
        reply.push('\n');
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("control-socket-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn answers_each_line_on_an_owner_only_socket_that_replaces_a_stale_file() {
        let dir = scratch("serve");
        let path = dir.join("ctl.sock");
        std::fs::write(&path, "stale").unwrap();
        serve(&path, |line| json!({"echo": line})).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);

        let mut client = UnixStream::connect(&path).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        client.write_all(b"one\n\n  \ntwo\n").unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
        let mut replies = String::new();
        client.read_to_string(&mut replies).unwrap();
        assert_eq!(replies, "{\"echo\":\"one\"}\n{\"echo\":\"two\"}\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_path_it_cannot_bind_is_an_error_naming_it() {
        let dir = scratch("unbindable");
        let path = dir.join("missing-dir").join("ctl.sock");
        let err = serve(&path, |_| Value::Null).unwrap_err().to_string();
        assert!(
            err.contains("cannot bind control socket") && err.contains("missing-dir"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
