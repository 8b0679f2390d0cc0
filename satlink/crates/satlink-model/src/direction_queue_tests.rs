//! Queue disciplines inside a direction, on a simulated clock: what the rate shaper,
//! the schedule and the stats make of them.

use super::*;
use crate::config::LinkConfig;
use crate::dir_config::{CodelConfig, Discipline, FqCodelConfig, QueueLimit, Way};
use crate::MS;

const US: Nanos = 1_000;

/// A frame: (flow, id, arrival).
type Frame = (u64, u32, Nanos);

fn dir(rate_bps: u64, queue: QueueLimit, discipline: Discipline) -> Direction<Frame> {
    Direction::new(DirConfig {
        rate_bps,
        queue,
        discipline,
        ..DirConfig::unshaped()
    })
}

/// Feed `arrivals` (time, flow, len), polling the model at every deadline in between as
/// the timer thread does; the departures (frame, release) in the order handed over.
fn run(d: &mut Direction<Frame>, arrivals: &[(Nanos, u64, usize)]) -> Vec<(Frame, Nanos)> {
    let mut out = vec![];
    let mut poll = |d: &mut Direction<Frame>, until: Option<Nanos>| {
        while let Some(t) = d.next_deadline().filter(|&t| until.is_none_or(|u| t <= u)) {
            while let Some(dep) = d.pop_due(t) {
                assert!(dep.release <= t);
                out.push((dep.payload, dep.release));
            }
        }
    };
    for (i, &(t, flow, len)) in arrivals.iter().enumerate() {
        poll(d, Some(t));
        let _ = d.enqueue_flow(t, len, (flow, i as u32, t), false, flow);
    }
    poll(d, None);
    out
}

/// A bulk flow (1) of 1500-byte packets at `bulk_bps` for `secs`, and a sparse flow (2)
/// of 100-byte packets every 50 ms.
fn bulk_and_sparse(bulk_bps: u64, secs: u64) -> Vec<(Nanos, u64, usize)> {
    let gap = 1500 * 8 * 1_000_000_000 / bulk_bps;
    let mut a: Vec<(Nanos, u64, usize)> = (0..secs * 1_000_000_000 / gap)
        .map(|i| (i * gap, 1, 1500))
        .collect();
    a.extend((0..secs * 20).map(|i| (i * 50 * MS + 7 * US, 2, 100)));
    a.sort();
    a
}

/// Delays (release - arrival) of flow 2's packets, ms, after the first second.
fn sparse_delays_ms(out: &[(Frame, Nanos)]) -> Vec<f64> {
    out.iter()
        .filter(|((flow, _, at), _)| *flow == 2 && *at > 1_000 * MS)
        .map(|((_, _, at), release)| (release - at) as f64 / 1e6)
        .collect()
}

#[test]
fn fq_codel_isolates_flows_a_bulk_flow_does_not_raise_a_sparse_flows_delay() {
    // 10 Mb/s, a bulk flow sending 15 Mb/s into it for 4 s.
    let arrivals = bulk_and_sparse(15_000_000, 4);
    let mut fq = dir(
        10_000_000,
        QueueLimit::Packets(10_240),
        Discipline::FqCodel(FqCodelConfig::default()),
    );
    let fq_out = run(&mut fq, &arrivals);
    let mut tail = dir(10_000_000, QueueLimit::Ms(500.0), Discipline::DropTail);
    let tail_out = run(&mut tail, &arrivals);
    let fq_sparse = sparse_delays_ms(&fq_out);
    let tail_sparse = sparse_delays_ms(&tail_out);
    assert_eq!(fq_sparse.len(), 60, "every sparse packet crossed");
    // Under FQ-CoDel a sparse packet waits at most for the bulk packet on the wire
    // (1.2 ms) plus its own serialization (0.08 ms).
    let worst = fq_sparse.iter().cloned().fold(0.0, f64::max);
    assert!(worst <= 1.3, "sparse delay under fq_codel up to {worst} ms");
    // Under drop-tail it waits behind the bulk flow's standing queue (up to 500 ms).
    let tail_median = tail_sparse[tail_sparse.len() / 2];
    assert!(
        tail_median > 300.0,
        "sparse delay under drop-tail {tail_median} ms"
    );
    // FQ-CoDel's drops are the bulk flow's, by CoDel (the bound is never reached).
    let s = fq.stats();
    assert!(s.drops.codel > 0);
    assert_eq!((s.drops.queue_full, s.drops.fq_overflow), (0, 0));
    assert!(tail.stats().drops.queue_full > 0);
}

/// frames_in = frames_out + drops + still queued, and no id crossed twice.
fn conserved(d: &Direction<Frame>, out: &[(Frame, Nanos)]) {
    let s = d.stats();
    let dr = &s.drops;
    let dropped = dr.queue_full + dr.queue_head + dr.codel + dr.fq_overflow + dr.loss;
    assert_eq!(
        s.frames_in,
        s.frames_out + dropped + d.queue_frames() as u64 + d.in_flight_frames() as u64
    );
    let mut ids: Vec<u32> = out.iter().map(|((_, id, _), _)| *id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), out.len());
}

#[test]
fn drop_head_in_a_direction_sends_the_newest_frames() {
    // 8 Mb/s: 1 ms per 1000-byte frame; room for 3 waiting frames.
    let mut d = dir(8_000_000, QueueLimit::Packets(3), Discipline::DropHead);
    let arrivals: Vec<_> = (0..6).map(|_| (0, 0, 1000)).collect();
    let out = run(&mut d, &arrivals);
    // Frame 0 went on the wire at once; 1 and 2 were pushed out by 4 and 5.
    let ids: Vec<u32> = out.iter().map(|((_, id, _), _)| *id).collect();
    assert_eq!(ids, vec![0, 3, 4, 5]);
    assert_eq!(
        out.iter().map(|(_, r)| *r).collect::<Vec<_>>(),
        vec![MS, 2 * MS, 3 * MS, 4 * MS]
    );
    assert_eq!(d.stats().drops.queue_head, 2);
    conserved(&d, &out);
}

#[test]
fn codel_drops_use_no_link_time_and_lose_nothing_else() {
    let arrivals = bulk_and_sparse(20_000_000, 3);
    let mut d = dir(
        10_000_000,
        QueueLimit::Packets(1000),
        Discipline::Codel(CodelConfig::default()),
    );
    let out = run(&mut d, &arrivals);
    conserved(&d, &out);
    assert!(d.stats().drops.codel > 0);
    // The link stays busy: a frame's serialization (1.2 ms for 1500 bytes) starts when
    // the one before ends, dropped frames in between taking none.
    let busy: Vec<Nanos> = out
        .iter()
        .filter(|((_, _, at), _)| *at > 500 * MS && *at < 2_500 * MS)
        .map(|(_, r)| *r)
        .collect();
    for w in busy.windows(2) {
        assert!(
            w[1] - w[0] <= 1200 * US,
            "idle link between {} and {}",
            w[0],
            w[1]
        );
    }
}

#[test]
fn codel_measures_sojourn_at_the_rate_in_force_after_a_schedule_step() {
    // 10 Mb/s, then 2 Mb/s from 1 s: the same arrivals build a standing queue only
    // after the step, and CoDel starts dropping only then.
    let cfg = LinkConfig::from_json(
        r#"{"forward": {"rate_bps": 10000000, "queue": {"ms": 5000},
                        "discipline": {"codel": {}}},
            "return": {},
            "schedule": {"steps": [{"at_ms": 0}, {"at_ms": 1000, "forward": {"rate_bps": 2000000}}]}}"#,
    )
    .unwrap();
    let mut d: Direction<Frame> = Direction::new(cfg.forward.clone());
    d.apply(0, cfg.forward.clone(), cfg.schedule_of(Way::Forward));
    d.set_trace(true);
    // 5 Mb/s of 1250-byte frames: 2 ms apart.
    let arrivals: Vec<_> = (0..1500).map(|i| (i * 2 * MS, 1, 1250)).collect();
    let out = run(&mut d, &arrivals);
    conserved(&d, &out);
    let first_codel_drop = d
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            Event::Drop {
                t,
                cause: DropCause::Codel,
                ..
            } => Some(t),
            _ => None,
        })
        .expect("CoDel dropped after the rate fell");
    // Sojourn passes target (5 ms) within a few ms of the step, and the first drop
    // comes one interval (100 ms) after that.
    assert!(
        (1_100 * MS..1_120 * MS).contains(&first_codel_drop),
        "first CoDel drop at {first_codel_drop}"
    );
    assert_eq!(d.stats().drops.queue_full, 0);
}

#[test]
fn changing_the_discipline_at_run_time_keeps_the_waiting_frames() {
    let mut d = dir(8_000_000, QueueLimit::Packets(100), Discipline::DropTail);
    for i in 0..5 {
        d.enqueue_flow(0, 1000, (i % 2, i as u32, 0), false, i % 2)
            .unwrap();
    }
    let mut cfg = d.config().clone();
    cfg.discipline = Discipline::FqCodel(FqCodelConfig::default());
    d.reconfigure(10 * US, cfg);
    assert_eq!(d.queue_frames(), 4);
    let out = run(&mut d, &[]);
    assert_eq!(out.len(), 5);
    conserved(&d, &out);
}
