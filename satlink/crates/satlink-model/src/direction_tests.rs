//! The model on a simulated clock: exact departure times.

use super::*;
use crate::dir_config::{LossConfig, QueueLimit};
use crate::MS;

const US: Nanos = 1_000;

fn dir(rate_bps: u64, queue: QueueLimit, delay_ms: f64) -> Direction<u32> {
    Direction::new(DirConfig {
        rate_bps,
        queue,
        uplink_delay_ms: delay_ms,
        ..DirConfig::unshaped()
    })
}

/// Drain everything, stepping the simulated clock to each deadline; (id, release).
pub(super) fn drain(d: &mut Direction<u32>) -> Vec<(u32, Nanos)> {
    let mut out = vec![];
    while let Some(t) = d.next_deadline() {
        while let Some(dep) = d.pop_due(t) {
            assert!(dep.release <= t);
            out.push((dep.payload, dep.release));
        }
    }
    out
}

#[test]
fn serialization_at_the_rate() {
    // 1500 bytes at 10 Mb/s = 1.2 ms each, back to back.
    let mut d = dir(10_000_000, QueueLimit::Bytes(1_000_000), 0.0);
    for i in 0..3 {
        d.enqueue(0, 1500, i).unwrap();
    }
    assert_eq!(
        drain(&mut d),
        vec![(0, 1200 * US), (1, 2400 * US), (2, 3600 * US)]
    );
    // An idle link starts serializing at arrival.
    d.enqueue(10 * MS, 100, 3).unwrap();
    assert_eq!(drain(&mut d), vec![(3, 10 * MS + 80 * US)]);
}

#[test]
fn delay_line_adds_the_fixed_delay() {
    let mut d: Direction<u32> = Direction::new(DirConfig {
        rate_bps: 10_000_000,
        uplink_delay_ms: 125.0,
        downlink_delay_ms: 125.0,
        framing_delay_ms: 15.0,
        ..DirConfig::unshaped()
    });
    d.enqueue(5 * MS, 1500, 7).unwrap();
    let due = 5 * MS + 1200 * US + 265 * MS;
    assert_eq!(d.next_deadline(), Some(due));
    assert!(d.pop_due(due - 1).is_none());
    let dep = d.pop_due(due).unwrap();
    assert_eq!((dep.payload, dep.release), (7, due));
    // A late poll does not change the schedule.
    d.enqueue(1000 * MS, 1500, 8).unwrap();
    let dep = d.pop_due(2000 * MS).unwrap();
    assert_eq!(dep.release, 1000 * MS + 1200 * US + 265 * MS);
    assert_eq!(d.next_deadline(), None);
}

#[test]
fn unlimited_rate_and_no_delay_release_at_once() {
    let mut d = dir(0, QueueLimit::Ms(1.0), 0.0);
    for i in 0..1000 {
        d.enqueue(42, 1500, i).unwrap();
    }
    assert_eq!(d.queue_frames(), 0);
    let got: Vec<_> = std::iter::from_fn(|| d.pop_due(42))
        .map(|x| x.payload)
        .collect();
    assert_eq!(got, (0..1000).collect::<Vec<_>>());
}

#[test]
fn drop_tail_in_bytes() {
    // The frame in service has left the queue: the 3000-byte bound holds 2 more.
    let mut d = dir(10_000_000, QueueLimit::Bytes(3000), 0.0);
    d.enqueue(0, 1500, 0).unwrap();
    d.enqueue(0, 1500, 1).unwrap();
    d.enqueue(0, 1500, 2).unwrap();
    assert_eq!(d.queue_bytes(), 3000);
    assert_eq!(d.enqueue(0, 1500, 3), Err((3, DropCause::QueueFull)));
    // At 1.2 ms frame 1 starts: room for one more.
    d.enqueue(1200 * US, 1500, 4).unwrap();
    assert_eq!(
        drain(&mut d),
        vec![
            (0, 1200 * US),
            (1, 2400 * US),
            (2, 3600 * US),
            (4, 4800 * US)
        ]
    );
    let s = d.stats();
    assert_eq!((s.frames_in, s.frames_out, s.drops.queue_full), (5, 4, 1));
    assert_eq!(s.bytes_out, 6000);
    // Queueing delays 0, 1.2, 2.4, 2.4 ms.
    assert_eq!(s.queue_delay.count(), 4);
    assert!((s.queue_delay.summary().mean_ms - 1.5).abs() < 1e-9);
    assert_eq!(s.queue_delay.summary().max_ms, 2.4);
}

#[test]
fn drop_tail_in_ms() {
    // 3 ms at 8 Mb/s = 3000 bytes.
    let mut d = dir(8_000_000, QueueLimit::Ms(3.0), 0.0);
    assert_eq!(d.config().queue_limit_bytes(), 3000);
    for i in 0..4 {
        let _ = d.enqueue(0, 1000, i);
    }
    // 1 in service + 3 queued; the 5th is dropped.
    assert_eq!(d.enqueue(0, 1000, 4), Err((4, DropCause::QueueFull)));
    assert_eq!(
        drain(&mut d),
        vec![(0, MS), (1, 2 * MS), (2, 3 * MS), (3, 4 * MS)]
    );
}

#[test]
fn oversize_frames_are_dropped() {
    let mut d = dir(0, QueueLimit::Bytes(100_000), 0.0);
    assert_eq!(d.enqueue(0, 1501, 1), Err((1, DropCause::Oversize)));
    assert_eq!(d.stats().drops.oversize, 1);
}

#[test]
fn loss_uses_the_link_and_is_deterministic() {
    let run = || {
        let mut d: Direction<u32> = Direction::new(DirConfig {
            rate_bps: 12_000_000,
            queue: QueueLimit::Bytes(100_000_000),
            loss: Some(LossConfig::PacketRate(0.25)),
            seed: 9,
            ..DirConfig::unshaped()
        });
        for i in 0..10_000 {
            d.enqueue(0, 1500, i).unwrap();
        }
        let out = drain(&mut d);
        (out, d.stats().drops.loss)
    };
    let (out, lost) = run();
    assert_eq!(out.len() as u64 + lost, 10_000);
    assert!((2300..2700).contains(&lost), "{lost}");
    // Survivors keep the slot they were serialized in (1 ms per frame at 12 Mb/s).
    for (id, release) in &out {
        assert_eq!(*release, (*id as u64 + 1) * MS);
    }
    assert_eq!(run().1, lost);
}

#[test]
fn bit_error_rate_depends_on_length() {
    let lost = |len: usize| {
        let mut d: Direction<u32> = Direction::new(DirConfig {
            loss: Some(LossConfig::BitErrorRate(1e-5)),
            seed: 5,
            ..DirConfig::unshaped()
        });
        for i in 0..20_000 {
            let _ = d.enqueue(0, len, i);
        }
        d.stats().drops.loss as f64 / 20_000.0
    };
    assert!((lost(1500) - 0.113).abs() < 0.007, "{}", lost(1500));
    assert!(lost(60) < 0.01);
}

#[test]
fn reconfigure_rate_at_run_time() {
    let mut d = dir(10_000_000, QueueLimit::Bytes(1_000_000), 0.0);
    d.enqueue(0, 1500, 0).unwrap();
    d.enqueue(0, 1500, 1).unwrap();
    // At 0.5 ms frame 0 is being serialized: it keeps its end at 1.2 ms; frame 1 goes
    // at the new 20 Mb/s (0.6 ms).
    let mut cfg = d.config().clone();
    cfg.rate_bps = 20_000_000;
    d.reconfigure(500 * US, cfg);
    assert_eq!(drain(&mut d), vec![(0, 1200 * US), (1, 1800 * US)]);
}

#[test]
fn reconfigure_delay_never_reorders() {
    let mut d = dir(0, QueueLimit::Bytes(1_000_000), 100.0);
    d.enqueue(0, 100, 0).unwrap();
    let mut cfg = d.config().clone();
    cfg.uplink_delay_ms = 10.0;
    d.reconfigure(MS, cfg);
    d.enqueue(2 * MS, 100, 1).unwrap();
    d.enqueue(200 * MS, 100, 2).unwrap();
    // Frame 1 would be due at 12 ms but may not overtake frame 0 (due at 100 ms).
    assert_eq!(
        drain(&mut d),
        vec![(0, 100 * MS), (1, 100 * MS), (2, 210 * MS)]
    );
}

#[test]
fn reconfigure_queue_and_loss() {
    let mut d = dir(10_000_000, QueueLimit::Bytes(1_000_000), 0.0);
    let mut cfg = d.config().clone();
    cfg.queue = QueueLimit::Bytes(1500);
    d.reconfigure(0, cfg.clone());
    d.enqueue(0, 1500, 0).unwrap(); // in service
    d.enqueue(0, 1500, 1).unwrap(); // queued
    assert!(d.enqueue(0, 1500, 2).is_err());
    cfg.loss = Some(LossConfig::PacketRate(0.999_999));
    d.reconfigure(0, cfg);
    d.enqueue(10 * MS, 1500, 3).unwrap();
    // Frame 1 was queued before the change but is serialized after it: lost too.
    let out = drain(&mut d);
    assert_eq!(out, vec![(0, 1200 * US)]);
    assert_eq!(d.stats().drops.loss, 2);
}

#[test]
fn events_are_traced() {
    let mut d = dir(10_000_000, QueueLimit::Bytes(1500), 0.0);
    d.set_trace(true);
    d.enqueue(0, 1500, 0).unwrap();
    d.enqueue(0, 1500, 1).unwrap();
    let _ = d.enqueue(0, 1500, 2);
    let ev = d.take_events();
    assert_eq!(ev[0], Event::Enqueue { t: 0, len: 1500 });
    assert_eq!(
        ev[1],
        Event::Dequeue {
            t: 0,
            len: 1500,
            queue_delay: 0,
            release: 1200 * US
        }
    );
    assert_eq!(
        ev[3],
        Event::Drop {
            t: 0,
            len: 1500,
            cause: DropCause::QueueFull
        }
    );
    assert!(d.take_events().is_empty());
}

#[test]
fn far_hold_hands_over_at_the_end_of_serialization() {
    let mut d: Direction<u32> = Direction::new(DirConfig {
        rate_bps: 10_000_000,
        uplink_delay_ms: 250.0,
        ..DirConfig::unshaped()
    });
    d.set_far_hold(true);
    d.enqueue(0, 1500, 0).unwrap();
    d.enqueue(0, 1500, 1).unwrap();
    assert_eq!(d.next_deadline(), Some(1200 * US));
    assert!(d.pop_due(1200 * US - 1).is_none());
    let a = d.pop_due(1200 * US).unwrap();
    assert_eq!((a.sent, a.release), (1200 * US, 251_200 * US));
    let b = d.pop_due(5 * MS).unwrap();
    assert_eq!((b.sent, b.release), (2400 * US, 252_400 * US));
}
