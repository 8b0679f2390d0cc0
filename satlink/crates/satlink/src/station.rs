//! The ground stations: GW (shapes the forward direction) and ST (shapes the return
//! direction). Each owns a TUN device on its LAN side and one UDP socket on the
//! emulation network, connected to the satellite.
//!
//! Threads:
//! - ingress: reads the TUN, enqueues into the link model, and sends at once what is
//!   already due (the unshaped fast path: no hand-over between threads);
//! - timer: sleeps until the model's next deadline (futex wait on CLOCK_MONOTONIC with
//!   1 ns timer slack, then a short spin), sends what is due;
//! - rx: receives carrier datagrams in batches (recvmmsg) and writes them to the TUN.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use satlink_model::{DirConfig, Direction, Histogram, LinkConfig, Way};

use crate::control::Controlled;
use crate::events::{Dir, EventLog, SharedEventLog};
use crate::{sys, warn};

/// Which ground station.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gw,
    St,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Gw => "gw",
            Kind::St => "st",
        }
    }
    /// (shaped direction, received direction) as (name, event-log letter).
    fn dirs(self) -> ((&'static str, Dir), (&'static str, Dir)) {
        match self {
            Kind::Gw => (("forward", 'f'), ("return", 'r')),
            Kind::St => (("return", 'r'), ("forward", 'f')),
        }
    }
    /// The direction this station shapes.
    fn way(self) -> Way {
        match self {
            Kind::Gw => Way::Forward,
            Kind::St => Way::Return,
        }
    }
    fn shaped(self, cfg: &LinkConfig) -> DirConfig {
        cfg.dir(self.way()).clone()
    }
}

struct Shaper {
    dir: Direction<Vec<u8>>,
    free: Vec<Vec<u8>>,
    lateness: Histogram,
    io_errors: u64,
    /// What the timer thread sleeps until (None: until woken).
    timer_deadline: Option<u64>,
}

/// The receiving side's delay line: frames that arrived before their due time.
#[derive(Default)]
struct Hold {
    q: VecDeque<(u64, Vec<u8>)>,
    free: Vec<Vec<u8>>,
    lateness: Histogram,
    waiting_until: Option<u64>,
}

#[derive(Default)]
pub struct Counters {
    pub frames_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub frames_out: AtomicU64,
    pub bytes_out: AtomicU64,
    pub oversize: AtomicU64,
    pub io_error: AtomicU64,
}

impl Counters {
    pub fn json(&self) -> Value {
        json!({
            "frames_in": self.frames_in.load(Relaxed),
            "bytes_in": self.bytes_in.load(Relaxed),
            "frames_out": self.frames_out.load(Relaxed),
            "bytes_out": self.bytes_out.load(Relaxed),
            "drops": {"queue_full": 0, "queue_head": 0, "codel": 0, "fq_overflow": 0, "loss": 0,
                      "oversize": self.oversize.load(Relaxed),
                      "io_error": self.io_error.load(Relaxed),
                      "outage": 0},
        })
    }
    pub fn reset(&self) {
        for c in [
            &self.frames_in,
            &self.bytes_in,
            &self.frames_out,
            &self.bytes_out,
            &self.oversize,
            &self.io_error,
        ] {
            c.store(0, Relaxed);
        }
    }
}

pub struct Station {
    kind: Kind,
    dev: String,
    emu_bind: SocketAddr,
    sat: SocketAddr,
    spin_ns: u64,
    rt_priority: i32,
    shaper: Mutex<Shaper>,
    cv: Condvar,
    rx: Counters,
    hold: Mutex<Hold>,
    hold_cv: Condvar,
    config: Mutex<LinkConfig>,
    events: SharedEventLog,
    started: u64,
    reset_at: AtomicU64,
    udp: UdpSocket,
    tun: File,
}

pub struct Options {
    pub kind: Kind,
    pub dev: String,
    pub emu_bind: SocketAddr,
    pub sat: SocketAddr,
    pub spin_us: u64,
    pub rt_priority: i32,
    pub config: LinkConfig,
    pub events: Option<EventLog>,
}

impl Station {
    /// Create the TUN device and the carrier socket.
    pub fn new(o: Options) -> Result<Arc<Self>> {
        let tun = sys::open_tun(&o.dev)?;
        let unshaped = o.config.is_unshaped(o.kind.way());
        sys::set_offload(&tun, unshaped)
            .with_context(|| format!("cannot set the offloads of {} (TUNSETOFFLOAD)", o.dev))?;
        let udp = UdpSocket::bind(o.emu_bind)
            .with_context(|| format!("cannot bind UDP {} (--emu-bind)", o.emu_bind))?;
        udp.connect(o.sat)
            .with_context(|| format!("cannot address the satellite at {}", o.sat))?;
        sys::set_buffers(&udp, 8 << 20);
        let mut dir = Direction::new(o.kind.shaped(&o.config));
        dir.set_trace(o.events.is_some());
        dir.set_far_hold(true);
        let now = sys::now();
        // The schedule's epoch: now, as the config is applied (link time 0, or the Unix
        // time modulo its loop with "clock": "utc").
        let schedule = o
            .config
            .schedule_of(o.kind.way())
            .map(|s| s.aligned(sys::unix_now_ns()));
        let start = schedule.as_ref().map_or(0, |s| s.link_time(0));
        dir.apply(now, o.kind.shaped(&o.config), schedule);
        let mut events = o.events;
        if let (Some(ev), Some(s)) = (events.as_mut(), &o.config.schedule) {
            ev.schedule_epoch(now, s.id.as_deref(), start);
        }
        Ok(Arc::new(Station {
            kind: o.kind,
            dev: o.dev,
            emu_bind: o.emu_bind,
            sat: o.sat,
            spin_ns: o.spin_us * 1000,
            rt_priority: o.rt_priority,
            shaper: Mutex::new(Shaper {
                dir,
                free: Vec::new(),
                lateness: Histogram::new(),
                io_errors: 0,
                timer_deadline: None,
            }),
            cv: Condvar::new(),
            rx: Counters::default(),
            hold: Mutex::new(Hold::default()),
            hold_cv: Condvar::new(),
            config: Mutex::new(o.config),
            events: SharedEventLog::new(events),
            started: now,
            reset_at: AtomicU64::new(now),
            udp,
            tun,
        }))
    }

    pub fn spawn(self: &Arc<Self>) -> Result<()> {
        sys::spawn_named(self, "ingress", Self::ingress)?;
        sys::spawn_named(self, "timer", Self::timer)?;
        sys::spawn_named(self, "rx", Self::receive)?;
        sys::spawn_named(self, "deliver", Self::deliver)?;
        Ok(())
    }

    pub fn flush_events(&self) {
        self.events.flush();
    }

    fn lock(&self) -> MutexGuard<'_, Shaper> {
        self.shaper.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn realtime(&self, thread: &str) {
        sys::realtime_or_warn(thread, self.rt_priority);
    }

    fn ingress(&self) {
        self.realtime("ingress");
        let mut scratch = vec![0u8; sys::DGRAM_MAX];
        loop {
            let n = match (&self.tun).read(&mut scratch) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    warn!("tun read failed dev={} error={e}", self.dev);
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            if n <= sys::VNET_HDR {
                continue;
            }
            let now = sys::now();
            // virtio_net_hdr: flags, gso_type, ...; gso_type != 0 is a TSO super-packet.
            let segmented = scratch[1] != 0;
            let mut g = self.lock();
            let mut buf = g.free.pop().unwrap_or_else(|| Vec::with_capacity(2048));
            buf.clear();
            buf.extend_from_slice(&[0; sys::DUE_HDR]); // the due time, set when sent
            buf.extend_from_slice(&scratch[..n]);
            let len = n - sys::VNET_HDR;
            let flow = satlink_model::flow_hash(&scratch[sys::VNET_HDR..n]);
            if let Err((buf, _)) = g.dir.enqueue_flow(now, len, buf, segmented, flow) {
                g.free.push(buf);
            }
            self.release_due(&mut g, now);
            if let Some(next) = g.dir.next_deadline() {
                if g.timer_deadline.is_none_or(|t| next < t) {
                    self.cv.notify_one();
                }
            }
        }
    }

    /// Send every frame due by `now`; log the model's events.
    fn release_due(&self, g: &mut Shaper, now: u64) {
        let (shaped, _) = self.kind.dirs();
        while let Some(mut dep) = g.dir.pop_due(now) {
            let t = sys::now();
            let late = t.saturating_sub(dep.sent);
            g.lateness.record(late);
            dep.payload[..sys::DUE_HDR].copy_from_slice(&dep.release.to_be_bytes());
            if self.udp.send(&dep.payload).is_err() {
                g.io_errors += 1;
            }
            if let Some(mut ev) = self.events.lock() {
                ev.sent(shaped.1, t, dep.len, late);
            }
            if g.free.len() < 8192 {
                g.free.push(dep.payload);
            }
        }
        if let Some(mut ev) = self.events.lock() {
            for e in g.dir.take_events() {
                ev.model(shaped.1, &e);
            }
        }
    }

    fn timer(&self) {
        sys::set_timer_slack(1);
        self.realtime("timer");
        let mut g = self.lock();
        loop {
            self.release_due(&mut g, sys::now());
            let deadline = g.dir.next_deadline();
            g.timer_deadline = deadline;
            g = wait_until_due(&self.shaper, &self.cv, g, deadline, self.spin_ns);
        }
    }

    fn receive(&self) {
        self.realtime("rx");
        let mut m = sys::MmsgBuffers::new();
        loop {
            let n = m.recv_batch(&self.udp, self.emu_bind);
            let t = sys::now();
            let mut h = self.hold.lock().unwrap_or_else(|e| e.into_inner());
            let mut wake = false;
            for i in 0..n {
                let (data, _, truncated) = m.get(i);
                const HDR: usize = sys::DUE_HDR + sys::VNET_HDR;
                let len = data.len().saturating_sub(HDR);
                self.rx.frames_in.fetch_add(1, Relaxed);
                self.rx.bytes_in.fetch_add(len as u64, Relaxed);
                if truncated || data.len() <= HDR {
                    self.rx.oversize.fetch_add(1, Relaxed);
                    self.log_rx('d', t, len, Some("oversize"));
                    continue;
                }
                let mut due = [0u8; 8];
                due.copy_from_slice(&data[..sys::DUE_HDR]);
                let due = u64::from_be_bytes(due);
                if h.q.is_empty() && due <= t {
                    h.lateness.record(t - due);
                    self.write_tun(&data[sys::DUE_HDR..], t);
                } else {
                    let mut buf = h.free.pop().unwrap_or_else(|| Vec::with_capacity(2048));
                    buf.clear();
                    buf.extend_from_slice(&data[sys::DUE_HDR..]);
                    wake |= h.waiting_until.is_none_or(|w| due < w);
                    h.q.push_back((due, buf));
                }
            }
            if wake {
                self.hold_cv.notify_one();
            }
        }
    }

    fn log_rx(&self, kind: char, t: u64, len: usize, cause: Option<&str>) {
        if let Some(mut ev) = self.events.lock() {
            let recv = self.kind.dirs().1 .1;
            match cause {
                Some(c) => ev.drop_io(recv, t, len, c),
                None => ev.simple(recv, t, kind, len),
            }
        }
    }

    /// Write one carrier payload (virtio_net_hdr + IP packet) to the TUN device.
    fn write_tun(&self, pkt: &[u8], t: u64) {
        let len = pkt.len() - sys::VNET_HDR;
        // A TUN write takes one whole packet or fails.
        match (&self.tun).write(pkt) {
            Ok(n) if n == pkt.len() => {
                self.rx.frames_out.fetch_add(1, Relaxed);
                self.rx.bytes_out.fetch_add(len as u64, Relaxed);
                self.log_rx('<', t, len, None);
            }
            _ => {
                self.rx.io_error.fetch_add(1, Relaxed);
                self.log_rx('d', t, len, Some("io_error"));
            }
        }
    }

    /// Hold received frames until their due time, then write them to the TUN device.
    fn deliver(&self) {
        sys::set_timer_slack(1);
        self.realtime("deliver");
        let mut h = self.hold.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = sys::now();
            while h.q.front().is_some_and(|(due, _)| *due <= now) {
                let (due, buf) = h.q.pop_front().expect("checked");
                let t = sys::now();
                h.lateness.record(t.saturating_sub(due));
                self.write_tun(&buf, t);
                if h.free.len() < 8192 {
                    h.free.push(buf);
                }
            }
            let due = h.q.front().map(|(due, _)| *due);
            h.waiting_until = due;
            h = wait_until_due(&self.hold, &self.hold_cv, h, due, self.spin_ns);
        }
    }
}

/// Waits on `cv` with `guard` until `due` (None: until notified), or until notified
/// before it: asleep until `spin_ns` before `due` (timers wake late), then spinning with
/// the lock released. Returns the guard, locked again.
fn wait_until_due<'a, T>(
    mutex: &'a Mutex<T>,
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    due: Option<u64>,
    spin_ns: u64,
) -> MutexGuard<'a, T> {
    let Some(due) = due else {
        return cv.wait(guard).unwrap_or_else(|e| e.into_inner());
    };
    let now = sys::now();
    if due > now + spin_ns {
        let d = Duration::from_nanos(due - now - spin_ns);
        cv.wait_timeout(guard, d)
            .unwrap_or_else(|e| e.into_inner())
            .0
    } else if due > now {
        drop(guard);
        while sys::now() < due {
            std::hint::spin_loop();
        }
        mutex.lock().unwrap_or_else(|e| e.into_inner())
    } else {
        guard
    }
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Where the shaped direction's schedule is at `now` (None without a schedule).
fn schedule_json(dir: &Direction<Vec<u8>>, now: u64) -> Option<Value> {
    let s = dir.schedule()?;
    let (link_time, step) = dir.schedule_position(now)?;
    Some(json!({
        "id": s.id(),
        "link_time_ms": link_time as f64 / 1e6,
        "step_index": step,
    }))
}

impl Controlled for Station {
    fn health(&self) -> Value {
        let now = sys::now();
        let g = self.lock();
        let schedule = schedule_json(&g.dir, now).map(|mut v| {
            let s = g.dir.schedule().expect("has a schedule");
            v["steps"] = json!(s.steps());
            v["end"] = json!(if s.length_ns().is_some() {
                "loop"
            } else {
                "hold"
            });
            v["length_ms"] = json!(s.length_ns().map(|l| l as f64 / 1e6));
            v
        });
        drop(g);
        json!({
            "role": self.kind.name(),
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_s": secs(now - self.started),
            "dev": self.dev,
            "emu_bind": self.emu_bind.to_string(),
            "sat": self.sat.to_string(),
            "shapes": self.kind.dirs().0 .0,
            "config": *self.config.lock().unwrap_or_else(|e| e.into_inner()),
            "schedule": schedule,
        })
    }

    fn stats(&self) -> Value {
        let ((shaped, _), (recv, _)) = self.kind.dirs();
        let now = sys::now();
        let g = self.lock();
        let mut s = serde_json::to_value(g.dir.stats().to_json()).unwrap_or_default();
        s["drops"]["io_error"] = json!(g.io_errors);
        s["discipline"] = json!(g.dir.config().discipline.name());
        s["queue_bytes"] = json!(g.dir.queue_bytes());
        s["queue_frames"] = json!(g.dir.queue_frames());
        s["in_flight_frames"] = json!(g.dir.in_flight_frames());
        s["release_lateness"] = serde_json::to_value(g.lateness.summary()).unwrap_or_default();
        if let Some(sched) = schedule_json(&g.dir, now) {
            s["schedule"] = sched;
        }
        drop(g);
        let mut r = self.rx.json();
        let h = self.hold.lock().unwrap_or_else(|e| e.into_inner());
        r["delivery_lateness"] = serde_json::to_value(h.lateness.summary()).unwrap_or_default();
        r["held_frames"] = json!(h.q.len());
        drop(h);
        json!({
            "role": self.kind.name(),
            "uptime_s": secs(now - self.started),
            "since_reset_s": secs(now - self.reset_at.load(Relaxed)),
            shaped: s,
            recv: r,
        })
    }

    fn set(&self, cfg: LinkConfig) -> Value {
        let shaped = self.kind.shaped(&cfg);
        let schedule = cfg.schedule_of(self.kind.way());
        let mut g = self.lock();
        if let Err(e) = sys::set_offload(&self.tun, cfg.is_unshaped(self.kind.way())) {
            return json!({"error": format!("cannot set the offloads of {}: {e}", self.dev)});
        }
        // A schedule's epoch: the moment it is applied, under the lock (link time 0, or
        // the Unix time modulo its loop with "clock": "utc").
        let now = sys::now();
        let schedule = schedule.map(|s| s.aligned(sys::unix_now_ns()));
        let start = schedule.as_ref().map_or(0, |s| s.link_time(0));
        g.dir.apply(now, shaped, schedule);
        self.cv.notify_one();
        drop(g);
        if let Some(mut ev) = self.events.lock() {
            ev.config(now, &cfg);
            if let Some(s) = &cfg.schedule {
                ev.schedule_epoch(now, s.id.as_deref(), start);
            }
        }
        crate::info!(
            "config applied {}",
            serde_json::to_string(&cfg).unwrap_or_default()
        );
        let mut c = self.config.lock().unwrap_or_else(|e| e.into_inner());
        *c = cfg;
        json!({"ok": true, "config": *c})
    }

    fn reset_stats(&self) {
        let mut g = self.lock();
        g.dir.reset_stats();
        g.lateness = Histogram::new();
        g.io_errors = 0;
        drop(g);
        self.rx.reset();
        self.hold.lock().unwrap_or_else(|e| e.into_inner()).lateness = Histogram::new();
        self.reset_at.store(sys::now(), Relaxed);
    }
}
