//! Jitter on a simulated clock: each frame's due time is its own draw on top of the
//! delay, exactly, and frames never overtake each other.

use super::tests::drain;
use super::*;
use crate::dir_config::{LossConfig, QueueLimit};
use crate::jitter::{Exponential, JitterConfig, JitterState, Uniform};
use crate::MS;

const US: Nanos = 1_000;

fn jittery(jitter: JitterConfig, loss: Option<LossConfig>, seed: u64) -> Direction<u32> {
    Direction::new(DirConfig {
        rate_bps: 10_000_000,
        queue: QueueLimit::Bytes(10_000_000),
        uplink_delay_ms: 10.0,
        jitter: Some(jitter),
        loss,
        seed,
        ..DirConfig::unshaped()
    })
}

#[test]
fn each_frame_gets_its_own_draw_exactly() {
    let model = JitterConfig::Exponential(Exponential { mean_ms: 3.0 });
    let mut d = jittery(model, None, 5);
    // One 1000-byte frame (0.8 ms at 10 Mb/s) every 100 ms: no frame waits for another.
    for i in 0..50 {
        d.enqueue(i * 100 * MS, 1000, i as u32).unwrap();
    }
    let got = drain(&mut d);
    let mut draws = JitterState::new(5);
    let want: Vec<(u32, Nanos)> = (0..50)
        .map(|i| {
            let end = i as Nanos * 100 * MS + 800 * US;
            (i, end + 10 * MS + draws.draw(Some(model)))
        })
        .collect();
    assert_eq!(got, want);
    // The draws vary: not all frames are due after the same delay.
    let delays: Vec<Nanos> = got
        .iter()
        .map(|&(i, due)| due - i as Nanos * 100 * MS)
        .collect();
    assert!(delays.iter().min() < delays.iter().max());
    assert!(delays.iter().all(|&x| x >= 10 * MS + 800 * US));
}

#[test]
fn frames_never_overtake_and_wait_for_the_frame_ahead() {
    // Draws of up to 20 ms on frames 1.2 ms apart: many draws are smaller than the one
    // ahead; such a frame is due with the frame ahead, never before it.
    let model = JitterConfig::Uniform(Uniform { max_ms: 20.0 });
    let mut d = jittery(model, None, 11);
    for i in 0..2000 {
        d.enqueue(0, 1500, i).unwrap();
    }
    let got = drain(&mut d);
    assert_eq!(
        got.iter().map(|x| x.0).collect::<Vec<_>>(),
        (0..2000).collect::<Vec<_>>()
    );
    let mut draws = JitterState::new(11);
    let mut ahead = 0;
    let mut held = 0;
    for &(i, due) in &got {
        let own = (i as Nanos + 1) * 1200 * US + 10 * MS + draws.draw(Some(model));
        assert_eq!(due, own.max(ahead), "frame {i}");
        held += usize::from(ahead > own);
        ahead = due;
    }
    assert!(held > 500, "only {held} frames waited for the one ahead");
}

#[test]
fn jitter_leaves_the_loss_draws_alone() {
    let loss = Some(LossConfig::PacketRate(0.1));
    let crossed = |jitter: Option<JitterConfig>| {
        let mut d: Direction<u32> = Direction::new(DirConfig {
            rate_bps: 10_000_000,
            queue: QueueLimit::Bytes(10_000_000),
            loss,
            jitter,
            seed: 3,
            ..DirConfig::unshaped()
        });
        for i in 0..1000 {
            d.enqueue(i as Nanos * 10 * MS, 500, i).unwrap();
        }
        drain(&mut d).into_iter().map(|x| x.0).collect::<Vec<_>>()
    };
    let plain = crossed(None);
    assert!(plain.len() < 950 && plain.len() > 850, "{}", plain.len());
    let model = JitterConfig::Exponential(Exponential { mean_ms: 2.0 });
    assert_eq!(crossed(Some(model)), plain);
}

#[test]
fn crossed_delay_counts_the_draws() {
    let model = JitterConfig::Uniform(Uniform { max_ms: 4.0 });
    let mut d = jittery(model, None, 2);
    for i in 0..4000 {
        d.enqueue(i * 20 * MS, 100, i as u32).unwrap();
    }
    drain(&mut d);
    let c = d.stats().crossed.to_json();
    assert_eq!(c.frames, 4000);
    // 10 ms of delay plus a draw in [0, 4] ms: mean 12 ms.
    assert!(c.delay_ms.min >= 10.0 && c.delay_ms.max <= 14.0, "{c:?}");
    assert!((c.delay_ms.mean - 12.0).abs() < 0.1, "{c:?}");
}
