//! Both modes on loopback: no TPROXY (a fixed destination), no root.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::*;
use crate::gateway::Gateway;
use crate::pool::PoolSettings;
use crate::terminal::{Dialer, SharedPool, Terminal};

const KEY: &[u8] = b"a test key of thirty-two bytes!!";

/// An upstream that answers each connection with "<n bytes read>:" + the bytes reversed,
/// once the client has half-closed.
fn upstream() -> SocketAddrV4 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = sys::v4(l.local_addr().unwrap()).unwrap();
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            thread::spawn(move || {
                let mut s = s;
                let mut got = Vec::new();
                if s.read_to_end(&mut got).is_err() {
                    return;
                }
                let mut reply = format!("{}:", got.len()).into_bytes();
                reply.extend(got.iter().rev());
                let _ = s.write_all(&reply);
            });
        }
    });
    addr
}

/// Loopback tests relay to loopback: the proxy's own host, refused in production.
fn open_guard() -> Guard {
    Guard::default()
}

fn proxy(to: SocketAddrV4, hop_side: HopSide, hop: HopOptions) -> (SocketAddrV4, Arc<Stats>) {
    let (addr, stats, _) = proxy_with(to, hop_side, hop, open_guard(), 64);
    (addr, stats)
}

fn proxy_with(
    to: SocketAddrV4,
    hop_side: HopSide,
    hop: HopOptions,
    guard: Guard,
    max: usize,
) -> (SocketAddrV4, Arc<Stats>, Arc<Limit>) {
    let listen_hop = (hop_side == HopSide::Inbound).then_some(&hop);
    let l = sys::listen("127.0.0.1:0".parse().unwrap(), false, listen_hop).unwrap();
    let addr = sys::v4(l.local_addr().unwrap()).unwrap();
    let stats = Arc::new(Stats::default());
    let limit = Limit::new(max);
    let p = Arc::new(Proxy {
        destination: Destination::Fixed(to),
        hop_side,
        hop,
        guard,
    });
    let (s, lim) = (Arc::clone(&stats), Arc::clone(&limit));
    thread::spawn(move || p.serve(l, s, lim));
    (addr, stats, limit)
}

fn exchange(via: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let mut c = TcpStream::connect(via).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A proxy that refuses may have closed the connection already.
    let _ = c.write_all(payload);
    let _ = c.shutdown(Shutdown::Write);
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    out
}

fn settled(stats: &Stats, open: usize) -> Snapshot {
    for _ in 0..500 {
        let snap = stats.snapshot();
        if snap.connections.iter().filter(|c| c.open).count() == open {
            return snap;
        }
        thread::sleep(Duration::from_millis(10));
    }
    stats.snapshot()
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if f() {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out waiting until {what}");
}

fn check_reply(reply: &[u8], payload: &[u8]) {
    let head = format!("{}:", payload.len()).into_bytes();
    assert_eq!(&reply[..head.len()], &head[..]);
    assert!(reply[head.len()..].iter().eq(payload.iter().rev()));
}

#[test]
fn relays_both_ways_with_half_close_and_counts_bytes() {
    let up = upstream();
    let (via, stats) = proxy(up, HopSide::Outbound, HopOptions::default());
    let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let reply = exchange(via, &payload);
    check_reply(&reply, &payload);
    let snap = settled(&stats, 0);
    assert_eq!((snap.accepted, snap.relayed, snap.failed), (1, 1, 0));
    assert_eq!(snap.bytes_to_server, payload.len() as u64);
    assert_eq!(snap.bytes_to_client, reply.len() as u64);
    let conn = &snap.connections[0];
    assert_eq!(conn.destination, up.to_string());
    assert_eq!(conn.bytes_to_server, payload.len() as u64);
    assert!(conn.error.is_none());
    assert_ne!(conn.relayed_from, conn.accepted_from);
    let first = conn
        .hop_first_data
        .as_ref()
        .expect("the hop's window at first data");
    assert!(first.cwnd >= 1 && first.mss > 0, "{first:?}");
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
fn hop_congestion_control_and_pacing_are_set_on_the_hop_socket() {
    // reno is built into every Linux kernel, and never the default.
    let up = upstream();
    for side in [HopSide::Outbound, HopSide::Inbound] {
        let hop = HopOptions {
            cc: Some("reno".into()),
            buffer_bytes: 1 << 20,
            max_pacing_rate: 1_250_000,
        };
        let (via, stats) = proxy(up, side, hop);
        exchange(via, b"x");
        let snap = settled(&stats, 0);
        let conn = &snap.connections[0];
        assert_eq!(conn.hop_cc, "reno", "{side:?}");
        if side == HopSide::Outbound {
            let first = conn.hop_first_data.as_ref().unwrap();
            assert_eq!(first.max_pacing_rate, Some(1_250_000));
        }
    }
}

#[test]
fn unknown_congestion_control_fails_the_connection_with_the_reason() {
    let up = upstream();
    let hop = HopOptions {
        cc: Some("no-such-cc".into()),
        ..HopOptions::default()
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
    let (via, stats) = proxy(
        sys::v4(closed).unwrap(),
        HopSide::Outbound,
        HopOptions::default(),
    );
    assert!(exchange(via, b"hello").is_empty());
    let snap = settled(&stats, 0);
    assert_eq!((snap.accepted, snap.relayed, snap.failed), (1, 0, 1));
}

#[test]
fn the_guard_refuses_sources_destinations_and_the_proxy_itself() {
    let up = upstream();
    let cases = [
        (
            Guard {
                sources: vec!["198.18.0.0/24".parse().unwrap()],
                ..Guard::default()
            },
            "source",
        ),
        (
            Guard {
                destinations: vec!["198.18.2.0/24".parse().unwrap()],
                ..Guard::default()
            },
            "destination",
        ),
        (
            Guard {
                refuse_own: true,
                ..Guard::default()
            },
            "own_address",
        ),
    ];
    for (guard, why) in cases {
        let (via, stats, limit) =
            proxy_with(up, HopSide::Outbound, HopOptions::default(), guard, 8);
        assert!(exchange(via, b"relay me").is_empty(), "{why}");
        until("the refusal is counted", || stats.snapshot().refused == 1);
        let snap = stats.snapshot();
        assert_eq!(
            (snap.accepted, snap.relayed, snap.bytes_to_server),
            (0, 0, 0)
        );
        let refusals = serde_json::to_value(&snap.refusals).unwrap();
        assert_eq!(refusals[why], 1, "{why}: {refusals}");
        until("its permit is back", || limit.in_use() == 0);
    }
}

#[test]
fn connections_beyond_the_limit_are_closed_at_once() {
    // An upstream that never answers: relayed connections stay open.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let to = sys::v4(silent.local_addr().unwrap()).unwrap();
    let (via, stats, limit) = proxy_with(
        to,
        HopSide::Outbound,
        HopOptions::default(),
        open_guard(),
        3,
    );
    let held: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(via).unwrap()).collect();
    until("three are relayed", || stats.snapshot().relayed == 3);
    let mut extra = TcpStream::connect(via).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(extra.read(&mut buf).unwrap_or(0), 0, "closed at once");
    until("the refusal is counted", || {
        stats.snapshot().refusals.limit == 1
    });
    assert_eq!(limit.in_use(), 3);
    drop(held);
    drop(silent);
    until("the permits are back", || limit.in_use() == 0);
}

// --- the accelerated mode -------------------------------------------------------

struct Accelerated {
    via: SocketAddrV4,
    terminal: Arc<Stats>,
    gateway: Arc<Stats>,
    pool: Arc<SharedPool>,
}

fn gateway(key: &[u8], peer: &str) -> (SocketAddrV4, Arc<Stats>) {
    let l = sys::listen("127.0.0.1:0".parse().unwrap(), false, None).unwrap();
    let addr = sys::v4(l.local_addr().unwrap()).unwrap();
    let stats = Arc::new(Stats::default());
    let g = Arc::new(Gateway {
        peer: peer.parse().unwrap(),
        key: key.to_vec(),
        guard: open_guard(),
        hop: HopOptions::default(),
    });
    let s = Arc::clone(&stats);
    thread::spawn(move || g.serve(l, s, Limit::new(64)));
    (addr, stats)
}

fn terminal(to: SocketAddrV4, gateway: SocketAddrV4, key: &[u8], size: usize) -> Accelerated {
    let l = sys::listen("127.0.0.1:0".parse().unwrap(), false, None).unwrap();
    let via = sys::v4(l.local_addr().unwrap()).unwrap();
    let stats = Arc::new(Stats::default());
    let pool = SharedPool::new(PoolSettings {
        size,
        max_opening: 2,
        spare: 1,
        retry_ms: 50,
        retry_max_ms: 200,
    });
    let dialer = Arc::new(Dialer::new(
        SocketAddr::V4(gateway),
        key.to_vec(),
        HopOptions::default(),
    ));
    let t = Arc::new(Terminal::new(
        Destination::Fixed(to),
        open_guard(),
        dialer,
        Arc::clone(&pool),
    ));
    let s = Arc::clone(&stats);
    thread::spawn(move || t.serve(l, s, Limit::new(64)));
    Accelerated {
        via,
        terminal: stats,
        gateway: Arc::new(Stats::default()),
        pool,
    }
}

fn accelerated(size: usize) -> Accelerated {
    let up = upstream();
    let (gw, gw_stats) = gateway(KEY, "127.0.0.1");
    let mut a = terminal(up, gw, KEY, size);
    a.gateway = gw_stats;
    a
}

fn ready(pool: &SharedPool) -> u64 {
    pool.snapshot()["ready"].as_u64().unwrap()
}

#[test]
fn accelerated_relays_over_a_pre_opened_hop_and_reuses_it() {
    let a = accelerated(1);
    until("the pool is full", || ready(&a.pool) == 1);
    assert_eq!(a.gateway.snapshot().hops_accepted, 1);
    let payload: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
    check_reply(&exchange(a.via, &payload), &payload);
    // The refill opened a second one meanwhile; the first came back warm.
    until("both are ready", || ready(&a.pool) == 2);
    let opened_before = a.terminal.snapshot().hops_opened;
    check_reply(&exchange(a.via, b"again"), b"again");
    let t = settled(&a.terminal, 0);
    assert_eq!(
        t.hops_opened, opened_before,
        "no new hop connection for the second"
    );
    let hops: Vec<_> = t
        .connections
        .iter()
        .map(|c| c.hop.clone().unwrap())
        .collect();
    assert_eq!(
        hops[0].id, hops[1].id,
        "the same hop connection carried both"
    );
    assert_eq!((hops[0].streams, hops[1].streams), (1, 2));
    assert!(hops.iter().all(|h| h.pre_opened));
    let g = settled(&a.gateway, 0);
    assert_eq!((g.accepted, g.relayed), (2, 2));
    assert_eq!(
        g.hops_accepted, 2,
        "the first and the refill's; none in between"
    );
    let streams: Vec<_> = g.connections.iter().map(|c| c.stream).collect();
    assert_eq!(
        streams,
        t.connections.iter().map(|c| c.stream).collect::<Vec<_>>()
    );
    assert_eq!(g.bytes_to_server, payload.len() as u64 + 5);
    // The gateway sent the reply's first bytes onto the hop: its window then.
    assert!(g.connections[0].hop_first_data.is_some());
    let counters = &a.pool.snapshot()["counters"];
    assert_eq!(counters["taken_ready"], 2);
    assert_eq!(counters["missed"], 0);
}

#[test]
fn accelerated_client_finds_the_pool_empty_and_opens_its_own() {
    let a = accelerated(0);
    check_reply(&exchange(a.via, b"no pool"), b"no pool");
    let t = settled(&a.terminal, 0);
    let hop = t.connections[0].hop.clone().unwrap();
    assert!(!hop.pre_opened);
    assert_eq!(t.hops_opened, 1);
    assert_eq!(a.pool.snapshot()["counters"]["missed"], 1);
}

#[test]
fn a_pooled_connection_closed_by_its_peer_is_discarded_not_handed_out() {
    // Real sockets in the pool's logic, with the proxy's own liveness check.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut pool = pool::Pool::new(PoolSettings {
        size: 3,
        ..PoolSettings::default()
    });
    let mut peers = Vec::new();
    assert_eq!(pool.start_opens(0), 3);
    for _ in 0..3 {
        pool.opened(TcpStream::connect(l.local_addr().unwrap()).unwrap());
        peers.push(l.accept().unwrap().0);
    }
    // The peer of the connection that would be handed out first closes it.
    drop(peers.remove(0));
    thread::sleep(Duration::from_millis(50));
    let taken = pool.take(sys::idle_and_open);
    assert_eq!(taken.dead.len(), 1, "the closed one, discarded");
    let conn = taken.conn.expect("a live one instead");
    assert!(sys::idle_and_open(&conn));
    // Stray bytes on an idle connection make it unusable too.
    peers[1].write_all(b"?").unwrap();
    thread::sleep(Duration::from_millis(50));
    assert_eq!(pool.sweep(sys::idle_and_open).len(), 1);
    assert_eq!(pool.counters().discarded_dead, 2);
}

#[test]
fn the_refill_discards_hops_the_gateway_closed_while_idle() {
    // A gateway that proves itself, then closes every hop connection while it is idle.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let gw = sys::v4(l.local_addr().unwrap()).unwrap();
    thread::spawn(move || {
        for hop in l.incoming().flatten() {
            let nonce = [3u8; frame::NONCE_LEN];
            (&hop).write_all(&frame::challenge(&nonce)).unwrap();
            let mut hello = [0u8; frame::HELLO_LEN];
            (&hop).read_exact(&mut hello).unwrap();
            frame::verify_hello(KEY, &nonce, &hello).unwrap();
            (&hop).write_all(&frame::accepted()).unwrap();
            thread::sleep(Duration::from_millis(100));
            drop(hop);
        }
    });
    let a = terminal(upstream(), gw, KEY, 2);
    until("dead ones are found and discarded", || {
        a.pool.snapshot()["counters"]["discarded_dead"].as_u64() >= Some(2)
    });
    assert!(a.terminal.snapshot().hops_opened >= 2);
}

#[test]
fn a_hop_with_the_wrong_key_is_refused_and_never_pooled() {
    let up = upstream();
    let (gw, gw_stats) = gateway(KEY, "127.0.0.1");
    let a = terminal(up, gw, b"not the testbed's key, 32 bytes.", 1);
    until("the gateway refused it", || {
        gw_stats.snapshot().refusals.auth >= 1
    });
    assert_eq!(ready(&a.pool), 0);
    assert_eq!(gw_stats.snapshot().hops_accepted, 0);
    let err = a.pool.snapshot()["last_error"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(err.contains("opening a hop connection"), "{err}");
}

#[test]
fn the_hop_listener_takes_only_the_terminal_and_speaks_only_after_the_key() {
    let (gw, gw_stats) = gateway(KEY, "127.0.0.2");
    // From 127.0.0.1: not the terminal's address. Closed without a challenge.
    let mut c = TcpStream::connect(gw).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(c.read(&mut buf).unwrap_or(0), 0);
    until("refused: source", || {
        gw_stats.snapshot().refusals.source == 1
    });
    // From the right address but with garbage: refused once the hello is wrong.
    let (gw, gw_stats) = gateway(KEY, "127.0.0.1");
    let mut c = TcpStream::connect(gw).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut challenge = [0u8; frame::CHALLENGE_LEN];
    c.read_exact(&mut challenge).unwrap();
    c.write_all(&[b'x'; frame::HELLO_LEN]).unwrap();
    assert_eq!(c.read(&mut buf).unwrap_or(0), 0);
    until("refused: auth", || gw_stats.snapshot().refusals.auth == 1);
    assert_eq!(gw_stats.snapshot().accepted, 0);
}

#[test]
fn control_requests() {
    let reporter = Reporter {
        stats: Arc::new(Stats::default()),
        limit: Limit::new(4),
        pool: Some(SharedPool::new(PoolSettings::default())),
    };
    let health = serde_json::json!({"version": "t"});
    assert_eq!(
        control::handle(r#"{"cmd":"health"}"#, &reporter, &health),
        health
    );
    let stats = control::handle(r#"{"cmd":"stats"}"#, &reporter, &health);
    assert_eq!(stats["accepted"], 0);
    assert_eq!(stats["max_connections"], 4);
    assert_eq!(stats["pool"]["ready"], 0);
    assert_eq!(
        control::handle(r#"{"cmd":"reset_stats"}"#, &reporter, &health)["ok"],
        true
    );
    assert!(control::handle(r#"{"cmd":"set"}"#, &reporter, &health)["error"].is_string());
}
