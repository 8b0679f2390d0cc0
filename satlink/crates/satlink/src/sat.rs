//! The satellite (SAT): a transparent relay between the gateway and the terminal on
//! the emulation network, as in OpenSAND's transparent mode. It applies no delay of its
//! own (the sending ground station computes every frame's due time, which keeps one
//! timer per direction); it counts frames per direction and drops oversize frames.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use satlink_model::LinkConfig;

use crate::control::Controlled;
use crate::events::{EventLog, SharedEventLog};
use crate::station::Counters;
use crate::sys;

pub struct Sat {
    emu_bind: SocketAddr,
    gw: SocketAddr,
    st: SocketAddr,
    udp: UdpSocket,
    config: Mutex<LinkConfig>,
    forward: Counters,
    return_: Counters,
    unknown_source: AtomicU64,
    events: SharedEventLog,
    started: u64,
    reset_at: AtomicU64,
    rt_priority: i32,
}

impl Sat {
    pub fn new(
        emu_bind: SocketAddr,
        gw: SocketAddr,
        st: SocketAddr,
        config: LinkConfig,
        events: Option<EventLog>,
        rt_priority: i32,
    ) -> Result<Arc<Self>> {
        let udp = UdpSocket::bind(emu_bind)
            .with_context(|| format!("cannot bind UDP {emu_bind} (--emu-bind)"))?;
        sys::set_buffers(&udp, 8 << 20);
        let now = sys::now();
        Ok(Arc::new(Sat {
            emu_bind,
            gw,
            st,
            udp,
            config: Mutex::new(config),
            forward: Counters::default(),
            return_: Counters::default(),
            unknown_source: AtomicU64::new(0),
            events: SharedEventLog::new(events),
            started: now,
            reset_at: AtomicU64::new(now),
            rt_priority,
        }))
    }

    pub fn spawn(self: &Arc<Self>) -> Result<()> {
        sys::spawn_named(self, "relay", Self::relay)?;
        Ok(())
    }

    pub fn flush_events(&self) {
        self.events.flush();
    }

    fn relay(&self) {
        sys::realtime_or_warn("relay", self.rt_priority);
        let mut m = sys::MmsgBuffers::new();
        let mut fwd: Vec<(usize, SocketAddr)> = Vec::with_capacity(sys::BATCH);
        let mut ret: Vec<(usize, SocketAddr)> = Vec::with_capacity(sys::BATCH);
        loop {
            let n = m.recv_batch(&self.udp, self.emu_bind);
            let t = sys::now();
            let (max_f, max_r) = {
                let c = self.config.lock().unwrap_or_else(|e| e.into_inner());
                (c.forward.max_frame_bytes, c.return_.max_frame_bytes)
            };
            let mut ev = self.events.lock();
            fwd.clear();
            ret.clear();
            for i in 0..n {
                let (data, src, truncated) = m.get(i);
                let (c, max, dst, picks, letter) = if src == self.gw {
                    (&self.forward, max_f, self.st, &mut fwd, 'f')
                } else if src == self.st {
                    (&self.return_, max_r, self.gw, &mut ret, 'r')
                } else {
                    self.unknown_source.fetch_add(1, Relaxed);
                    continue;
                };
                const HDR: usize = sys::DUE_HDR + sys::VNET_HDR;
                let len = data.len().saturating_sub(HDR);
                // virtio_net_hdr gso_type != 0: a TSO super-packet.
                let segmented = data.len() > HDR && data[sys::DUE_HDR + 1] != 0;
                c.frames_in.fetch_add(1, Relaxed);
                c.bytes_in.fetch_add(len as u64, Relaxed);
                if truncated || data.len() <= HDR || (len > max && !segmented) {
                    c.oversize.fetch_add(1, Relaxed);
                    if let Some(ev) = ev.as_mut() {
                        ev.drop_io(letter, t, len, "oversize");
                    }
                    continue;
                }
                c.bytes_out.fetch_add(len as u64, Relaxed);
                if let Some(ev) = ev.as_mut() {
                    ev.simple(letter, t, 'x', len);
                }
                picks.push((i, dst));
            }
            for (picks, c) in [(&fwd, &self.forward), (&ret, &self.return_)] {
                let (sent, failed) = m.send_batch(&self.udp, picks);
                c.frames_out.fetch_add(sent as u64, Relaxed);
                c.io_error.fetch_add(failed as u64, Relaxed);
            }
        }
    }
}

impl Controlled for Sat {
    fn health(&self) -> Value {
        json!({
            "role": "sat",
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_s": (sys::now() - self.started) as f64 / 1e9,
            "emu_bind": self.emu_bind.to_string(),
            "gw": self.gw.to_string(),
            "st": self.st.to_string(),
            "config": *self.config.lock().unwrap_or_else(|e| e.into_inner()),
        })
    }

    fn stats(&self) -> Value {
        let now = sys::now();
        json!({
            "role": "sat",
            "uptime_s": (now - self.started) as f64 / 1e9,
            "since_reset_s": (now - self.reset_at.load(Relaxed)) as f64 / 1e9,
            "forward": self.forward.json(),
            "return": self.return_.json(),
            "unknown_source": self.unknown_source.load(Relaxed),
        })
    }

    fn set(&self, cfg: LinkConfig) -> Value {
        if let Some(mut ev) = self.events.lock() {
            ev.config(sys::now(), &cfg);
        }
        let mut c = self.config.lock().unwrap_or_else(|e| e.into_inner());
        *c = cfg;
        json!({"ok": true, "config": *c})
    }

    fn reset_stats(&self) {
        self.forward.reset();
        self.return_.reset();
        self.unknown_source.store(0, Relaxed);
        self.reset_at.store(sys::now(), Relaxed);
    }
}
