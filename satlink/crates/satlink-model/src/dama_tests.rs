//! The request-grant loop on a simulated clock: a frame after idle waits for its grant,
//! a constant assignment carries small frames at once, a steady flow gets its rate
//! granted and stops waiting, a burst drains through its volume request, a burst after
//! the grants timed out waits again, a full queue refuses.

use super::*;
use crate::queue::Bound;

const SF: Nanos = 25 * MS; // superframe

fn config(cra_kbps: f64, rbdc_max_kbps: f64, vbdc_max_kbit: f64) -> DamaConfig {
    DamaConfig {
        superframe_ms: 25.0,
        cra_kbps,
        rbdc_max_kbps,
        vbdc_max_kbit,
        request_period_sf: 1,
        allocation_latency_ms: 550.0, // 22 superframes
        rbdc_timeout_sf: 16,
    }
}

fn frame(arrival: Nanos, len: usize, id: u32) -> Waiting<u32> {
    Waiting {
        arrival,
        len,
        flow: 0,
        segmented: false,
        payload: id,
    }
}

/// Run to `until` on a clock stepped by 1 ms, each of `frames` (arrival, bytes) enqueued
/// at its arrival; (id, arrival, served) of every frame served.
fn run(d: &mut Dama<u32>, frames: &[(Nanos, usize)], until: Nanos) -> Vec<(u32, Nanos, Nanos)> {
    let mut served = vec![];
    let mut out = vec![];
    let mut next = 0;
    let mut t = 0;
    while t <= until {
        d.advance(t, &mut out);
        while next < frames.len() && frames[next].0 == t {
            d.enqueue(frame(t, frames[next].1, next as u32))
                .expect("room");
            next += 1;
        }
        for (at, f) in out.drain(..) {
            served.push((f.payload, f.arrival, at));
        }
        t += MS;
    }
    served
}

fn dama(cfg: DamaConfig) -> Dama<u32> {
    Dama::new(cfg, 2_000_000, 0, Bound::bytes(1_000_000))
}

#[test]
fn a_frame_after_idle_waits_for_its_request_to_be_granted() {
    let mut d = dama(config(0.0, 1000.0, 0.0));
    let served = run(&mut d, &[(10 * MS, 100)], 2000 * MS);
    let (_, arrival, at) = served[0];
    // Requested at the next superframe (25 ms), granted 22 superframes later (575 ms).
    assert!(at >= SF + 22 * SF, "served at {at}");
    assert!(
        at - arrival >= 550 * MS && at < 25 * SF,
        "waited {} ms",
        (at - arrival) / MS
    );
    assert_eq!(d.stats().requests, 1);
    assert_eq!(d.stats().frames_waited, 1);
}

#[test]
fn a_constant_assignment_carries_a_small_frame_within_its_superframe() {
    // 64 kbit/s: 1600 bits a superframe; a 100-byte frame is 800 of them.
    let mut d = dama(config(64.0, 0.0, 0.0));
    let served = run(&mut d, &[(10 * MS, 100)], 200 * MS);
    let (_, arrival, at) = served[0];
    assert_eq!(at - arrival, 800 * 1_000_000 / 64, "800 bits at 64 kbit/s");
    assert_eq!(d.stats().frames_waited, 0);
    assert_eq!(d.stats().requests, 0, "nothing to ask for");
}

#[test]
fn a_steady_flow_gets_its_rate_granted_and_stops_waiting() {
    // 1000 bytes every 10 ms: 800 kbit/s, below the RBDC maximum.
    let frames: Vec<(Nanos, usize)> = (0..300).map(|i| (i * 10 * MS, 1000)).collect();
    let mut d = dama(config(0.0, 1500.0, 1000.0));
    let served = run(&mut d, &frames, 4000 * MS);
    assert_eq!(served.len(), 300);
    // The first frames wait for the loop; once the rate is granted (about 600 ms in),
    // each is served within two superframes of its arrival.
    assert!(served[0].2 - served[0].1 >= 550 * MS);
    let steady: Vec<Nanos> = served
        .iter()
        .filter(|(_, arrival, _)| *arrival >= 1500 * MS)
        .map(|(_, arrival, at)| at - arrival)
        .collect();
    assert!(!steady.is_empty());
    let worst = steady.iter().max().copied().unwrap_or(0);
    assert!(
        worst <= 2 * SF,
        "worst wait under a steady flow: {} ms",
        worst / MS
    );
    assert!(d.stats().rbdc_requested_kbps_max >= 800.0);
}

#[test]
fn a_burst_drains_through_its_volume_request_then_the_capacity_returns() {
    // 100 frames of 1250 bytes at once: 1 Mbit, asked as volume, served at up to the
    // carrier's 2 Mbit/s once granted.
    let frames: Vec<(Nanos, usize)> = (0..100).map(|_| (5 * MS, 1250)).collect();
    let mut d = dama(config(0.0, 0.0, 2000.0));
    let served = run(&mut d, &frames, 3000 * MS);
    assert_eq!(served.len(), 100, "all of it");
    assert_eq!(d.queued_frames(), 0);
    let last = served.iter().map(|s| s.2).max().unwrap_or(0);
    // Granted from 575 ms; 1 Mbit at 2 Mbit/s takes 500 ms more.
    assert!(
        (575 * MS + 500 * MS - SF..=575 * MS + 500 * MS + 2 * SF).contains(&last),
        "{last}"
    );
    // Nothing more was granted than asked: the capacity is gone after the burst.
    assert_eq!(d.capacity_bits(200), 0);
    assert!(
        (d.stats().vbdc_requested_kbit - 1000.0).abs() < 1.0,
        "{:?}",
        d.stats()
    );
}

#[test]
fn a_burst_after_the_grants_timed_out_waits_for_the_loop_again() {
    let mut frames: Vec<(Nanos, usize)> = (0..50).map(|i| (i * 10 * MS, 500)).collect();
    frames.push((3000 * MS, 500)); // after 2.5 s of silence: the RBDC grant timed out
    let mut d = dama(config(0.0, 1000.0, 0.0));
    let served = run(&mut d, &frames, 5000 * MS);
    let (_, arrival, at) = *served.last().expect("served");
    assert_eq!(arrival, 3000 * MS);
    assert!(
        at - arrival >= 550 * MS,
        "waited {} ms",
        (at - arrival) / MS
    );
}

#[test]
fn a_full_terminal_queue_refuses_the_frame() {
    let mut d = Dama::new(config(0.0, 1000.0, 0.0), 2_000_000, 0, Bound::bytes(1500));
    d.enqueue(frame(0, 1000, 1)).expect("room");
    let refused = d.enqueue(frame(0, 1000, 2)).expect_err("full");
    assert_eq!(refused.payload, 2);
}

#[test]
fn the_direction_delays_by_the_access_then_the_link() {
    use crate::dir_config::DirConfig;
    use crate::direction::Direction;
    let mut d: Direction<u32> = Direction::new(DirConfig {
        rate_bps: 2_000_000,
        uplink_delay_ms: 125.0,
        downlink_delay_ms: 125.0,
        dama: Some(config(64.0, 1000.0, 0.0)),
        ..DirConfig::unshaped()
    });
    d.enqueue(10 * MS, 100, 7).expect("room");
    let mut t = 10 * MS;
    let dep = loop {
        if let Some(dep) = d.pop_due(t) {
            break dep;
        }
        t = d.next_deadline().expect("a deadline");
    };
    // 800 bits at the constant 64 kbit/s (12.5 ms), 400 us at the carrier's 2 Mbit/s,
    // 250 ms of propagation.
    assert_eq!(dep.release, 10 * MS + 12_500_000 + 400_000 + 250 * MS);
    let stats = d.stats().to_json();
    assert_eq!(stats.dama.expect("dama stats").frames_waited, 0);
    assert_eq!(stats.access_delay.expect("access delay").count, 1);
}

#[test]
fn capacity_on_demand_is_refused_where_it_cannot_be() {
    let ok = config(0.0, 1000.0, 0.0);
    assert!(ok.validate("return", 2_000_000).is_ok());
    for (cfg, dir, rate, said) in [
        (ok, "forward", 2_000_000, "return link"),
        (ok, "return", 0, "rate_bps"),
        (
            DamaConfig {
                superframe_ms: 0.5,
                ..ok
            },
            "return",
            1,
            "superframe_ms",
        ),
        (
            DamaConfig {
                allocation_latency_ms: 10.0,
                ..ok
            },
            "return",
            1,
            "allocation_latency_ms",
        ),
        (config(0.0, 0.0, 0.0), "return", 1, "no capacity"),
        (
            DamaConfig {
                cra_kbps: f64::NAN,
                ..ok
            },
            "return",
            1,
            "cra_kbps",
        ),
    ] {
        let e = cfg.validate(dir, rate).expect_err("refused").to_string();
        assert!(e.contains(said), "{e}");
    }
}
