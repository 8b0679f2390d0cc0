//! The event log (`--events FILE`): a header of `#` lines (command, configuration, base
//! time, format), then one event per line. Format in satlink/README.md.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use anyhow::{Context, Result};
use satlink_model::{Event, LinkConfig};

use crate::sys;

pub struct EventLog {
    out: BufWriter<File>,
    base: u64,
}

/// `f` for forward (gateway -> terminal), `r` for return.
pub type Dir = char;

impl EventLog {
    pub fn create(path: &Path, role: &str, cfg: &LinkConfig, base: u64) -> Result<Self> {
        let file = File::create(path)
            .with_context(|| format!("cannot create event log {}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        let cmd: Vec<String> = std::env::args().collect();
        let unix_ns = sys::unix_now_ns();
        let header = format!(
            "# satlink event log, format 1\n\
             # command: {}\n\
             # role: {role} version: {}\n\
             # config: {}\n\
             # base: monotonic_ns={base} unix_ns={unix_ns}\n\
             # columns: time_ms dir event bytes [detail]; time_ms since base; dir f=forward (gateway->terminal) r=return\n\
             # events: + enqueued | - serialization starts (detail: queue_delay_ms due_ms) | d dropped (detail: cause)\n\
             #         > sent on the carrier (detail: lateness_ms) | < received from the carrier, written to the TUN | x relayed by the satellite\n",
            cmd.join(" "),
            env!("CARGO_PKG_VERSION"),
            serde_json::to_string(cfg).unwrap_or_default(),
        );
        out.write_all(header.as_bytes())?;
        Ok(EventLog { out, base })
    }

    fn ms(&self, t: u64) -> f64 {
        t.saturating_sub(self.base) as f64 / 1e6
    }

    pub fn model(&mut self, dir: Dir, e: &Event) {
        let _ = match *e {
            Event::Enqueue { t, len } => writeln!(self.out, "{:.3} {dir} + {len}", self.ms(t)),
            Event::Dequeue {
                t,
                len,
                queue_delay,
                release,
            } => writeln!(
                self.out,
                "{:.3} {dir} - {len} {:.3} {:.3}",
                self.ms(t),
                queue_delay as f64 / 1e6,
                self.ms(release)
            ),
            Event::Drop { t, len, cause } => {
                writeln!(
                    self.out,
                    "{:.3} {dir} d {len} {}",
                    self.ms(t),
                    cause.as_str()
                )
            }
        };
    }

    pub fn sent(&mut self, dir: Dir, t: u64, len: usize, lateness: u64) {
        let _ = writeln!(
            self.out,
            "{:.3} {dir} > {len} {:.3}",
            self.ms(t),
            lateness as f64 / 1e6
        );
    }

    pub fn simple(&mut self, dir: Dir, t: u64, kind: char, len: usize) {
        let _ = writeln!(self.out, "{:.3} {dir} {kind} {len}", self.ms(t));
    }

    pub fn drop_io(&mut self, dir: Dir, t: u64, len: usize, cause: &str) {
        let _ = writeln!(self.out, "{:.3} {dir} d {len} {cause}", self.ms(t));
    }

    pub fn config(&mut self, t: u64, cfg: &LinkConfig) {
        let _ = writeln!(
            self.out,
            "# config at {:.3}: {}",
            self.ms(t),
            serde_json::to_string(cfg).unwrap_or_default()
        );
    }

    /// When the schedule in `# config` took effect and its link time then (0, or with
    /// `"clock": "utc"` the Unix time modulo its loop): its steps are at link times.
    pub fn schedule_epoch(&mut self, t: u64, id: Option<&str>, link_time_ns: u64) {
        let _ = writeln!(
            self.out,
            "# schedule {} epoch at {:.6} link time {:.6}",
            id.unwrap_or("-"),
            self.ms(t),
            link_time_ns as f64 / 1e6
        );
    }

    pub fn flush(&mut self) {
        let _ = self.out.flush();
    }
}

/// The event log of a role whose threads all write to it, or none (no `--events`).
/// A thread that panicked holding the lock leaves the log as it was: the others go on
/// writing to it rather than lose their events.
pub struct SharedEventLog(Option<Mutex<EventLog>>);

impl SharedEventLog {
    pub fn new(log: Option<EventLog>) -> Self {
        SharedEventLog(log.map(Mutex::new))
    }

    /// The log, held until the guard is dropped; None without `--events`.
    pub fn lock(&self) -> Option<MutexGuard<'_, EventLog>> {
        self.0
            .as_ref()
            .map(|log| log.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn flush(&self) {
        if let Some(mut log) = self.lock() {
            log.flush();
        }
    }
}
