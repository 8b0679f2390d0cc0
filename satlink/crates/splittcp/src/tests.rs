//! The relay on loopback: no TPROXY (a fixed destination), no root.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::*;

/// An upstream that answers each connection with "<n bytes read>:" + the bytes reversed,
/// once the client has half-closed.
fn upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            thread::spawn(move || {
                let mut s = s;
                let mut got = Vec::new();
                s.read_to_end(&mut got).unwrap();
                let mut reply = format!("{}:", got.len()).into_bytes();
                reply.extend(got.iter().rev());
                s.write_all(&reply).unwrap();
            });
        }
    });
    addr
}

fn proxy(to: SocketAddr, hop_side: HopSide, hop: HopOptions) -> (SocketAddr, Arc<Stats>) {
    let listen_hop = (hop_side == HopSide::Inbound).then_some(&hop);
    let l = sys::listen("127.0.0.1:0".parse().unwrap(), false, listen_hop).unwrap();
    let addr = l.local_addr().unwrap();
    let stats = Arc::new(Stats::default());
    let p = Arc::new(Proxy {
        destination: Destination::Fixed(to),
        hop_side,
        hop,
    });
    let s = Arc::clone(&stats);
    thread::spawn(move || p.serve(l, s));
    (addr, stats)
}

fn exchange(via: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut c = TcpStream::connect(via).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(payload).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    out
}

fn settled(stats: &Stats, open: usize) -> Snapshot {
    for _ in 0..200 {
        let snap = stats.snapshot();
        if snap.connections.iter().filter(|c| c.open).count() == open {
            return snap;
        }
        thread::sleep(Duration::from_millis(10));
    }
    stats.snapshot()
}

#[test]
fn relays_both_ways_with_half_close_and_counts_bytes() {
    let up = upstream();
    let (via, stats) = proxy(up, HopSide::Outbound, HopOptions::default());
    let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let reply = exchange(via, &payload);
    let head = format!("{}:", payload.len()).into_bytes();
    assert_eq!(&reply[..head.len()], &head[..]);
    assert!(reply[head.len()..].iter().eq(payload.iter().rev()));
    let snap = settled(&stats, 0);
    assert_eq!((snap.accepted, snap.relayed, snap.failed), (1, 1, 0));
    assert_eq!(snap.bytes_to_server, payload.len() as u64);
    assert_eq!(snap.bytes_to_client, reply.len() as u64);
    let conn = &snap.connections[0];
    assert_eq!(conn.destination, up.to_string());
    assert_eq!(conn.bytes_to_server, payload.len() as u64);
    assert!(conn.error.is_none());
    assert_ne!(conn.relayed_from, conn.accepted_from);
}

#[test]
fn one_relayed_connection_per_accepted_one() {
    let up = upstream();
    let (via, stats) = proxy(up, HopSide::Outbound, HopOptions::default());
    let handles: Vec<_> = (0..6u8)
        .map(|i| thread::spawn(move || exchange(via, &[i; 1000])))
        .collect();
    for h in handles {
        assert!(h.join().unwrap().starts_with(b"1000:"));
    }
    let snap = settled(&stats, 0);
    assert_eq!((snap.accepted, snap.relayed), (6, 6));
    assert_eq!(snap.connections.len(), 6);
    stats.reset();
    let snap = stats.snapshot();
    assert_eq!((snap.accepted, snap.connections.len()), (0, 0));
}

#[test]
fn hop_congestion_control_is_set_on_the_hop_socket() {
    // reno is built into every Linux kernel, and never the default.
    let up = upstream();
    for side in [HopSide::Outbound, HopSide::Inbound] {
        let hop = HopOptions {
            cc: Some("reno".into()),
            buffer_bytes: 1 << 20,
        };
        let (via, stats) = proxy(up, side, hop);
        exchange(via, b"x");
        let snap = settled(&stats, 0);
        assert_eq!(snap.connections[0].hop_cc, "reno", "{side:?}");
    }
}

#[test]
fn unknown_congestion_control_fails_the_connection_with_the_reason() {
    let up = upstream();
    let hop = HopOptions {
        cc: Some("no-such-cc".into()),
        buffer_bytes: 0,
    };
    let (via, stats) = proxy(up, HopSide::Outbound, hop);
    let reply = exchange(via, b"x");
    assert!(reply.is_empty());
    let snap = settled(&stats, 0);
    assert_eq!((snap.accepted, snap.relayed, snap.failed), (1, 0, 1));
    assert!(snap.connections[0]
        .error
        .as_deref()
        .unwrap_or("")
        .contains("TCP_CONGESTION no-such-cc"));
}

#[test]
fn refused_destination_counts_as_failed() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap(); // dropped: closed
    let (via, stats) = proxy(closed, HopSide::Outbound, HopOptions::default());
    assert!(exchange(via, b"hello").is_empty());
    let snap = settled(&stats, 0);
    assert_eq!((snap.accepted, snap.relayed, snap.failed), (1, 0, 1));
}

#[test]
fn control_requests() {
    let stats = Stats::default();
    let health = serde_json::json!({"version": "t"});
    assert_eq!(
        control::handle(r#"{"cmd":"health"}"#, &stats, &health),
        health
    );
    assert_eq!(
        control::handle(r#"{"cmd":"stats"}"#, &stats, &health)["accepted"],
        0
    );
    assert_eq!(
        control::handle(r#"{"cmd":"reset_stats"}"#, &stats, &health)["ok"],
        true
    );
    assert!(control::handle(r#"{"cmd":"set"}"#, &stats, &health)["error"].is_string());
}
