//! Per-connection statistics: kept after a connection closes until a reset, refreshed
//! from the kernel (TCP_INFO) or quinn for live connections on every snapshot, and
//! appended to the log when a connection closes.
//!
//! A reset opens a new window. A connection still open at the reset (a QUIC connection
//! whose browser was killed lingers until its idle timeout) stays out of the snapshots
//! unless it serves another request, so it is not counted again in the next load.
//!
//! `wire_bytes_sent` is the transport payload the server sent, retransmissions
//! included: TCP segment payload (TLS records and their headers included) from
//! `tcpi_bytes_sent`; UDP datagram payload (QUIC headers, frames and AEAD tags
//! included) from quinn. IP, TCP and UDP headers are not in it; `ip_bytes_estimate`
//! adds them from the segment / datagram counts.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use serde::Serialize;

use crate::exchanges::{ExchangeLog, ExchangesView};
use crate::hello::Handshake;
use crate::tcpinfo::{self, TcpInfo};

/// IPv4 (20) + TCP with timestamps (20 + 12) header bytes per segment.
const TCP4_HEADERS: u64 = 52;
/// IPv6 (40) + TCP with timestamps (32).
const TCP6_HEADERS: u64 = 72;
/// IPv4 (20) + UDP (8).
const UDP4_HEADERS: u64 = 28;
/// IPv6 (40) + UDP (8).
const UDP6_HEADERS: u64 = 48;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// QUIC counters from quinn.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct QuicInfo {
    pub udp_bytes_sent: u64,
    pub udp_datagrams_sent: u64,
    pub udp_bytes_received: u64,
    pub sent_packets: u64,
    pub lost_packets: u64,
    pub lost_bytes: u64,
    pub congestion_events: u64,
    pub cwnd_bytes: u64,
    pub rtt_us: u64,
    pub min_rtt_us: u64,
    pub mtu: u16,
    /// Flow control: how often origin was held by the client's limits (STREAM_DATA_BLOCKED
    /// and DATA_BLOCKED frames sent) and how often the client raised them (MAX_STREAM_DATA
    /// and MAX_DATA frames received). A stream held by its limit lets quinn send a
    /// lower-priority one meanwhile.
    pub stream_data_blocked_sent: u64,
    pub data_blocked_sent: u64,
    pub max_stream_data_received: u64,
    pub max_data_received: u64,
}

impl QuicInfo {
    pub fn from_connection(conn: &quinn::Connection) -> Self {
        let s = conn.stats();
        Self {
            udp_bytes_sent: s.udp_tx.bytes,
            udp_datagrams_sent: s.udp_tx.datagrams,
            udp_bytes_received: s.udp_rx.bytes,
            sent_packets: s.path.sent_packets,
            lost_packets: s.path.lost_packets,
            lost_bytes: s.path.lost_bytes,
            congestion_events: s.path.congestion_events,
            cwnd_bytes: s.path.cwnd,
            rtt_us: s.path.rtt.as_micros() as u64,
            min_rtt_us: s.path.min_rtt.as_micros() as u64,
            mtu: s.path.current_mtu,
            stream_data_blocked_sent: s.frame_tx.stream_data_blocked,
            data_blocked_sent: s.frame_tx.data_blocked,
            max_stream_data_received: s.frame_rx.max_stream_data,
            max_data_received: s.frame_rx.max_data,
        }
    }
}

/// The transport's own counters.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Tcp(Option<TcpInfo>),
    Quic(Option<QuicInfo>),
}

/// One connection as `/stats` and the log report it.
#[derive(Debug, Clone, Serialize)]
pub struct ConnRecord {
    pub id: u64,
    /// `h1`, `h2` or `h3`.
    pub protocol: &'static str,
    pub tls: bool,
    pub peer: String,
    pub local: String,
    /// The congestion control in use: for TCP as the kernel reports it.
    pub cc: String,
    /// Response body bytes handed to the protocol stack.
    pub app_bytes_sent: u64,
    pub requests: u64,
    /// The paths it was asked for since the last reset, in the order the requests
    /// arrived (at most `MAX_PATHS`): the runner joins them with the browser's resource
    /// timings.
    pub request_paths: Vec<String>,
    /// The host name the client asked for in its TLS handshake (SNI), if it sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// Whether it arrived on a replayed site's listener (`--site-listen`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub site: bool,
    /// Transport payload bytes sent, retransmissions included (see the module doc).
    pub wire_bytes_sent: u64,
    /// Segments (TCP) or UDP datagrams (QUIC) sent.
    pub wire_packets_sent: u64,
    /// IP-level estimate: `wire_bytes_sent` plus IP and TCP/UDP headers per packet.
    pub ip_bytes_estimate: u64,
    /// Retransmitted TCP payload bytes, or bytes in QUIC packets declared lost.
    pub retrans_bytes: u64,
    /// Retransmitted TCP segments, or QUIC packets declared lost.
    pub lost_packets: u64,
    pub cwnd_bytes: u64,
    /// TCP: the congestion window it started with, in segments, read from TCP_INFO as
    /// it was accepted (the route's initcwnd where it has one, else the kernel's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_cwnd_segments: Option<u32>,
    /// TCP: the SYN-ACKs it retransmitted before it was accepted (tcpi_total_retrans as
    /// it was accepted). After two or more, Linux starts the connection with one segment
    /// whatever the route's initcwnd (RFC 5681, section 3.1, as the kernel applies it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handshake_retransmits: Option<u32>,
    /// QUIC: the initial congestion window quinn started it with, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_window_bytes: Option<u64>,
    pub rtt_us: u64,
    pub start_unix_ms: u64,
    pub end_unix_ms: Option<u64>,
    pub open: bool,
    /// Opened before the last reset: a connection of an earlier page load that served a
    /// request in this window (one that serves none stays hidden: `lingering`).
    pub opened_before_reset: bool,
    /// The TLS handshake as the server saw it (hello.rs): full or resumed, and what the
    /// ClientHello offered; null for cleartext, and until the handshake is done.
    pub tls_handshake: Option<Handshake>,
    pub transport: Transport,
    /// Why the transport counters could not be read, if they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats_error: Option<String>,
    /// Its scheduler, each request and response, the priority signals, the DATA frames'
    /// order (exchanges.rs).
    #[serde(flatten)]
    pub scheduling: ExchangesView,
}

impl ConnRecord {
    fn apply_tcp(&mut self, info: std::io::Result<TcpInfo>, v6: bool) {
        match info {
            Ok(t) => {
                self.wire_bytes_sent = t.bytes_sent;
                self.wire_packets_sent = t.segs_out as u64;
                let hdr = if v6 { TCP6_HEADERS } else { TCP4_HEADERS };
                self.ip_bytes_estimate = t.bytes_sent + t.segs_out as u64 * hdr;
                self.retrans_bytes = t.bytes_retrans;
                self.lost_packets = t.total_retrans as u64;
                self.cwnd_bytes = t.snd_cwnd as u64 * t.snd_mss as u64;
                self.rtt_us = t.rtt_us as u64;
                self.transport = Transport::Tcp(Some(t));
                self.stats_error = None;
            }
            Err(e) => self.stats_error = Some(format!("TCP_INFO: {e}")),
        }
    }

    fn apply_quic(&mut self, q: QuicInfo, v6: bool) {
        self.wire_bytes_sent = q.udp_bytes_sent;
        self.wire_packets_sent = q.udp_datagrams_sent;
        let hdr = if v6 { UDP6_HEADERS } else { UDP4_HEADERS };
        self.ip_bytes_estimate = q.udp_bytes_sent + q.udp_datagrams_sent * hdr;
        self.retrans_bytes = q.lost_bytes;
        self.lost_packets = q.lost_packets;
        self.cwnd_bytes = q.cwnd_bytes;
        self.rtt_us = q.rtt_us;
        self.transport = Transport::Quic(Some(q));
    }
}

/// Request paths kept per connection; a page has tens of objects.
pub const MAX_PATHS: usize = 1000;

/// Counters the request handlers update without taking the registry lock.
#[derive(Debug, Default)]
pub struct Counters {
    pub app_bytes: AtomicU64,
    pub requests: AtomicU64,
    paths: Mutex<Vec<String>>,
    /// Its requests and responses one by one, and its priority signals.
    pub exchanges: ExchangeLog,
}

impl Counters {
    /// Counts a request for `path`.
    pub fn request(&self, path: &str) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut paths = self.paths.lock().unwrap_or_else(|e| e.into_inner());
        if paths.len() < MAX_PATHS {
            paths.push(path.to_owned());
        }
    }

    fn paths(&self) -> Vec<String> {
        self.paths.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn clear_paths(&self) {
        self.paths.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// How to read a live connection's transport counters.
enum Probe {
    /// A duplicate of the socket's descriptor, held until the connection ends.
    Tcp(OwnedFd),
    Quic(quinn::Connection),
}

struct Entry {
    rec: ConnRecord,
    probe: Option<Probe>,
    counters: Arc<Counters>,
    v6: bool,
    /// Its request count at the last reset, if it was open then.
    requests_at_reset: Option<u64>,
}

impl Entry {
    fn refresh(&mut self) {
        self.rec.app_bytes_sent = self.counters.app_bytes.load(Ordering::Relaxed);
        self.rec.requests = self.counters.requests.load(Ordering::Relaxed);
        self.rec.request_paths = self.counters.paths();
        self.rec.scheduling = self.counters.exchanges.view();
        match &self.probe {
            Some(Probe::Tcp(fd)) => self.rec.apply_tcp(tcpinfo::read(fd), self.v6),
            Some(Probe::Quic(c)) => self.rec.apply_quic(QuicInfo::from_connection(c), self.v6),
            None => {}
        }
    }
}

/// All connections since the last reset.
pub struct Registry {
    conns: Mutex<BTreeMap<u64, Entry>>,
    next_id: AtomicU64,
    log: Option<Mutex<File>>,
}

impl Registry {
    /// A registry; with a log path, writes the log's `#` header lines.
    pub fn new(log: Option<&Path>, header: &[String]) -> anyhow::Result<Self> {
        let log = match log {
            Some(p) => {
                let mut f = File::options()
                    .create(true)
                    .append(true)
                    .open(p)
                    .with_context(|| format!("failed to open log file {}", p.display()))?;
                for line in header {
                    writeln!(f, "# {line}").context("failed to write the log header")?;
                }
                Some(Mutex::new(f))
            }
            None => None,
        };
        Ok(Self {
            conns: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
            log,
        })
    }

    /// Appends one JSON event line to the log, if there is one.
    pub fn log_event(&self, event: &serde_json::Value) {
        if let Some(f) = &self.log {
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = writeln!(f, "{event}") {
                tracing::warn!("cannot write the log: {e}");
            }
        }
    }

    fn open(self: &Arc<Self>, mut rec: ConnRecord, probe: Probe, peer: SocketAddr) -> ConnHandle {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        rec.id = id;
        let counters = Arc::new(Counters::default());
        let entry = Entry {
            rec,
            probe: Some(probe),
            counters: counters.clone(),
            v6: peer.is_ipv6(),
            requests_at_reset: None,
        };
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, entry);
        ConnHandle {
            id,
            registry: self.clone(),
            counters,
        }
    }

    /// Registers a TCP connection; `fd` is a duplicate of its socket.
    pub fn open_tcp(
        self: &Arc<Self>,
        fd: OwnedFd,
        protocol: &'static str,
        tls: bool,
        peer: SocketAddr,
        local: SocketAddr,
        cc: String,
    ) -> ConnHandle {
        let mut rec = ConnRecord::new(protocol, tls, peer, local, cc, Transport::Tcp(None));
        // Before the first byte is sent the window is the one the connection started with.
        let accepted = tcpinfo::read(&fd).ok();
        rec.initial_cwnd_segments = accepted.map(|t| t.snd_cwnd);
        rec.handshake_retransmits = accepted.map(|t| t.total_retrans);
        self.open(rec, Probe::Tcp(fd), peer)
    }

    /// Registers a QUIC connection, started with an initial window of `initial_window`
    /// bytes.
    pub fn open_quic(
        self: &Arc<Self>,
        conn: quinn::Connection,
        local: SocketAddr,
        cc: String,
        initial_window: u64,
    ) -> ConnHandle {
        let peer = conn.remote_address();
        let mut rec = ConnRecord::new("h3", true, peer, local, cc, Transport::Quic(None));
        rec.initial_window_bytes = Some(initial_window);
        self.open(rec, Probe::Quic(conn), peer)
    }

    /// Every record of this window, live ones refreshed now.
    pub fn snapshot(&self) -> Vec<ConnRecord> {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns
            .values_mut()
            .filter_map(|e| {
                e.refresh();
                let idle_since_reset = e.requests_at_reset == Some(e.rec.requests);
                (!idle_since_reset).then(|| e.rec.clone())
            })
            .collect()
    }

    /// The ids of live connections opened before the last reset that served no request
    /// since: an earlier load's connections its browser has not closed (yet).
    pub fn lingering(&self) -> Vec<u64> {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns
            .values()
            .filter(|e| {
                e.rec.open && e.requests_at_reset == Some(e.counters.requests.load(Ordering::Relaxed))
            })
            .map(|e| e.rec.id)
            .collect()
    }

    /// Starts a new window: forgets closed connections (returns how many) and hides live
    /// ones until they serve another request.
    pub fn reset(&self) -> usize {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let before = conns.len();
        conns.retain(|_, e| e.rec.open);
        for e in conns.values_mut() {
            e.requests_at_reset = Some(e.counters.requests.load(Ordering::Relaxed));
            e.rec.opened_before_reset = true;
            e.counters.clear_paths(); // a window's paths are its own requests'
            e.counters.exchanges.clear();
        }
        before - conns.len()
    }

    fn close(&self, id: u64) {
        let rec = {
            let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            let Some(e) = conns.get_mut(&id) else { return };
            e.refresh();
            e.probe = None; // closes the duplicate descriptor / drops the handle
            e.rec.open = false;
            e.rec.end_unix_ms = Some(now_ms());
            e.rec.clone()
        };
        tracing::info!(
            id = rec.id,
            protocol = rec.protocol,
            cc = %rec.cc,
            app_bytes = rec.app_bytes_sent,
            wire_bytes = rec.wire_bytes_sent,
            "connection closed"
        );
        let mut ev = serde_json::to_value(&rec).unwrap_or_default();
        if let Some(o) = ev.as_object_mut() {
            o.insert("event".into(), "conn_closed".into());
        }
        self.log_event(&ev);
    }
}

impl ConnRecord {
    fn new(
        protocol: &'static str,
        tls: bool,
        peer: SocketAddr,
        local: SocketAddr,
        cc: String,
        transport: Transport,
    ) -> Self {
        Self {
            id: 0,
            protocol,
            tls,
            peer: peer.to_string(),
            local: local.to_string(),
            cc,
            app_bytes_sent: 0,
            requests: 0,
            request_paths: Vec::new(),
            server_name: None,
            site: false,
            wire_bytes_sent: 0,
            wire_packets_sent: 0,
            ip_bytes_estimate: 0,
            retrans_bytes: 0,
            lost_packets: 0,
            cwnd_bytes: 0,
            initial_cwnd_segments: None,
            handshake_retransmits: None,
            initial_window_bytes: None,
            rtt_us: 0,
            start_unix_ms: now_ms(),
            end_unix_ms: None,
            open: true,
            opened_before_reset: false,
            tls_handshake: None,
            transport,
            stats_error: None,
            scheduling: ExchangesView::default(),
        }
    }
}

/// A live connection's handle; closing it (or dropping it) finalizes the record.
pub struct ConnHandle {
    pub id: u64,
    registry: Arc<Registry>,
    counters: Arc<Counters>,
}

impl ConnHandle {
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// Notes what the handshake told: the name the client asked for (SNI), and whether
    /// the connection is a replayed site's.
    pub fn set_origin(&self, server_name: Option<&str>, site: bool) {
        let mut conns = self.registry.conns.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = conns.get_mut(&self.id) {
            e.rec.server_name = server_name.map(str::to_owned);
            e.rec.site = site;
        }
    }

    /// Sets the protocol once ALPN has decided it.
    pub fn set_protocol(&self, protocol: &'static str) {
        let mut conns = self.registry.conns.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = conns.get_mut(&self.id) {
            e.rec.protocol = protocol;
        }
    }

    /// Records the TLS handshake once it is done.
    pub fn set_handshake(&self, handshake: Handshake) {
        let mut conns = self.registry.conns.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = conns.get_mut(&self.id) {
            e.rec.tls_handshake = Some(handshake);
        }
    }
}

impl Drop for ConnHandle {
    fn drop(&mut self) {
        self.registry.close(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Arc<Registry> {
        Arc::new(Registry::new(None, &[]).unwrap())
    }

    /// A TCP connection on loopback, kept open while this lives.
    struct LoopbackTcp {
        _listener: std::net::TcpListener,
        stream: std::net::TcpStream,
        addr: std::net::SocketAddr,
    }

    impl LoopbackTcp {
        /// A descriptor of the connection's client end, as a registry takes one.
        fn fd(&self) -> std::os::fd::OwnedFd {
            std::os::fd::AsFd::as_fd(&self.stream)
                .try_clone_to_owned()
                .unwrap()
        }
    }

    fn loopback_tcp() -> LoopbackTcp {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stream = std::net::TcpStream::connect(addr).unwrap();
        LoopbackTcp {
            _listener: listener,
            stream,
            addr,
        }
    }

    #[test]
    fn keeps_closed_connections_until_reset() {
        let (reg, conn) = (registry(), loopback_tcp());
        let h = reg.open_tcp(conn.fd(), "h1", false, conn.addr, conn.addr, "cubic".into());
        h.counters().app_bytes.fetch_add(10, Ordering::Relaxed);
        assert!(reg.snapshot()[0].open);
        // What it started with, read as it was registered: loopback lost no SYN-ACK.
        assert!(reg.snapshot()[0].initial_cwnd_segments.is_some_and(|c| c > 0));
        assert_eq!(reg.snapshot()[0].handshake_retransmits, Some(0));
        drop(h);
        let snap = reg.snapshot();
        assert_eq!(snap.len(), 1);
        assert!(!snap[0].open);
        assert_eq!(snap[0].app_bytes_sent, 10);
        assert!(matches!(snap[0].transport, Transport::Tcp(Some(_))));
        assert_eq!(reg.reset(), 1);
        assert!(reg.snapshot().is_empty());
    }

    #[test]
    fn a_connection_open_across_a_reset_shows_again_only_when_it_serves_a_request() {
        let (reg, conn) = (registry(), loopback_tcp());
        let h = reg.open_tcp(conn.fd(), "h2", true, conn.addr, conn.addr, "bbr".into());
        for _ in 0..9 {
            h.counters().request("/old.jpg");
        }
        assert_eq!(reg.snapshot().len(), 1);
        assert!(!reg.snapshot()[0].opened_before_reset);
        assert_eq!(reg.reset(), 0);
        assert!(
            reg.snapshot().is_empty(),
            "a lingering connection entered the new window"
        );
        assert_eq!(reg.lingering(), [h.id]);
        h.counters().request("/new.jpg");
        let snap = reg.snapshot();
        assert_eq!(snap.len(), 1);
        assert_eq!(snap[0].requests, 10);
        assert_eq!(snap[0].request_paths, ["/new.jpg"]);
        assert!(
            snap[0].opened_before_reset,
            "carried over from the earlier window"
        );
        assert!(reg.lingering().is_empty());
    }
}
