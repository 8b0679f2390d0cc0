//! Schedules on a simulated clock: each step takes effect exactly at its time (to the
//! ns), and no frame is lost, duplicated or reordered that the step did not ask for.

use super::*;
use crate::direction::Event;
use crate::drop_cause::DropCause;
use crate::{Direction, LinkConfig, MS};

const US: Nanos = 1_000;
/// A link time 0 that is not 0 on the caller's clock.
const EPOCH: Nanos = 7_000_000_003;

fn link(json: &str) -> LinkConfig {
    LinkConfig::from_json(json).unwrap_or_else(|e| panic!("{e}"))
}

/// The forward direction of `json`, its schedule applied at `epoch`, handing frames over
/// at the end of serialization as the stations do.
fn forward(json: &str, epoch: Nanos) -> Direction<u32> {
    let cfg = link(json);
    let mut d = Direction::new(cfg.forward.clone());
    d.set_far_hold(true);
    d.apply(epoch, cfg.forward.clone(), cfg.schedule_of(Way::Forward));
    d
}

/// Feed `arrivals` (time, len) as frames 0, 1, ... and poll the model at every deadline
/// in between, as the timer thread does; (id, end of serialization, due time) of the
/// frames that crossed, in the order the model handed them over.
fn run(d: &mut Direction<u32>, arrivals: &[(Nanos, usize)]) -> Vec<(u32, Nanos, Nanos)> {
    let mut out = vec![];
    let mut poll = |d: &mut Direction<u32>, until: Option<Nanos>| {
        while let Some(t) = d.next_deadline().filter(|&t| until.is_none_or(|u| t <= u)) {
            while let Some(dep) = d.pop_due(t) {
                assert!(dep.sent <= t);
                out.push((dep.payload, dep.sent, dep.release));
            }
        }
    };
    for (i, &(t, len)) in arrivals.iter().enumerate() {
        poll(d, Some(t));
        let _ = d.enqueue(t, len, i as u32);
    }
    poll(d, None);
    out
}

/// The ids that crossed are distinct and in order, and due times never decrease.
fn in_order(out: &[(u32, Nanos, Nanos)]) {
    for w in out.windows(2) {
        assert!(w[0].0 < w[1].0, "reordered or duplicated: {w:?}");
        assert!(w[0].2 <= w[1].2, "due times reordered: {w:?}");
    }
}

fn ids(out: &[(u32, Nanos, Nanos)]) -> Vec<u32> {
    out.iter().map(|x| x.0).collect()
}

#[test]
fn a_delay_step_up_and_down_on_a_constant_stream() {
    // 1000-byte frames every ms at 80 Mb/s (0.1 ms each); one-way delay 10 ms, 30 ms
    // from 50 ms, 5 ms from 100 ms.
    let mut d = forward(
        r#"{"forward": {"rate_bps": 80000000, "uplink_delay_ms": 6, "downlink_delay_ms": 4},
            "return": {},
            "schedule": {"id": "steps", "steps": [
              {"at_ms": 0},
              {"at_ms": 50, "forward": {"uplink_delay_ms": 26}},
              {"at_ms": 100, "forward": {"uplink_delay_ms": 0, "downlink_delay_ms": 5}}]}}"#,
        EPOCH,
    );
    let arrivals: Vec<_> = (0..200).map(|i| (EPOCH + i * MS, 1000)).collect();
    let out = run(&mut d, &arrivals);
    // Nothing lost or duplicated, in order.
    assert_eq!(ids(&out), (0..200).collect::<Vec<_>>());
    in_order(&out);
    let due = |i: usize| out[i].2 - EPOCH;
    for (i, &(_, sent, _)) in out.iter().enumerate() {
        assert_eq!(sent, EPOCH + i as u64 * MS + 100 * US);
    }
    // Before the first step: end of serialization + 10 ms.
    assert_eq!(due(0), 10_100 * US);
    assert_eq!(due(49), 59_100 * US);
    // The frame serialized after 50 ms gets 30 ms.
    assert_eq!(due(50), 80_100 * US);
    assert_eq!(due(99), 129_100 * US);
    // The delay drops to 5 ms: frames may not overtake frame 99, they bunch up behind
    // it (due at 129.1 ms) until their own 5 ms is later.
    for i in 100..=124 {
        assert_eq!(due(i), 129_100 * US, "frame {i}");
    }
    assert_eq!(due(125), 130_100 * US);
    assert_eq!(due(199), 204_100 * US);
    // What was applied: 50 frames at 10 ms, 50 at 30 ms, 100 at 5 ms.
    let c = d.stats().crossed.to_json();
    assert_eq!(c.frames, 200);
    assert_eq!((c.delay_ms.min, c.delay_ms.max), (5.0, 30.0));
    assert!((c.delay_ms.mean - 12.5).abs() < 1e-9, "{}", c.delay_ms.mean);
    assert_eq!(
        (c.rate_bps.min, c.rate_bps.mean, c.rate_bps.max),
        (8e7, 8e7, 8e7)
    );
    d.reset_stats();
    assert_eq!(d.stats().crossed.to_json().frames, 0);
    assert_eq!(d.stats().crossed.to_json().delay_ms.max, 0.0);
}

#[test]
fn a_step_takes_effect_to_the_nanosecond() {
    // Unlimited rate: the end of serialization is the arrival.
    let mut d = forward(
        r#"{"forward": {"uplink_delay_ms": 10}, "return": {},
            "schedule": {"steps": [{"at_ms": 0},
              {"at_ms": 50, "forward": {"uplink_delay_ms": 30}}]}}"#,
        EPOCH,
    );
    let step = EPOCH + 50 * MS;
    let out = run(&mut d, &[(step - 1, 100), (step, 100)]);
    assert_eq!(
        out,
        vec![(0, step - 1, step - 1 + 10 * MS), (1, step, step + 30 * MS)]
    );
    assert_eq!(d.schedule_position(step - 1), Some((50 * MS - 1, 0)));
    assert_eq!(d.schedule_position(step), Some((50 * MS, 1)));
    // A frame on the air across the step (1 ms at 8 Mb/s, from 49.5 to 50.5 ms) gets
    // the delay and the loss in force at the end of its serialization; the frame before
    // it (48 to 49 ms) the old ones.
    let mut d = forward(
        r#"{"forward": {"rate_bps": 8000000, "uplink_delay_ms": 10}, "return": {},
            "schedule": {"steps": [{"at_ms": 0},
              {"at_ms": 50, "forward": {"uplink_delay_ms": 30}},
              {"at_ms": 100, "forward": {"loss": {"packet_rate": 0.999999}}}]}}"#,
        EPOCH,
    );
    let out = run(
        &mut d,
        &[
            (step - 2 * MS, 1000),
            (step - 500 * US, 1000),
            (step + 48 * MS, 1000),
            (step + 49_500 * US, 1000),
        ],
    );
    assert_eq!(
        out,
        vec![
            (0, step - MS, step + 9 * MS),
            (1, step + 500 * US, step + 30_500 * US),
            (2, step + 49 * MS, step + 79 * MS)
        ]
    );
    assert_eq!(d.stats().drops.loss, 1);
    // Fractional at_ms, to the ns: 0.000001 ms.
    let mut d = forward(
        r#"{"forward": {"uplink_delay_ms": 10}, "return": {},
            "schedule": {"steps": [{"at_ms": 0},
              {"at_ms": 1.000001, "forward": {"uplink_delay_ms": 20}}]}}"#,
        0,
    );
    let out = run(&mut d, &[(MS, 100), (MS + 1, 100)]);
    assert_eq!(out[0].2, 11 * MS);
    assert_eq!(out[1].2, MS + 1 + 20 * MS);
}

#[test]
fn a_rate_step_applies_from_the_next_start_of_serialization() {
    let json = |at: &str| {
        format!(
            r#"{{"forward": {{"rate_bps": 10000000, "queue": {{"bytes": 1000000}}}},
                "return": {{}},
                "schedule": {{"steps": [{{"at_ms": 0}},
                  {{"at_ms": {at}, "forward": {{"rate_bps": 20000000}}}},
                  {{"at_ms": 15, "forward": {{"rate_bps": 10000000}}}}]}}}}"#
        )
    };
    // 20 frames of 1500 bytes at once: 1.2 ms each at 10 Mb/s, 0.6 ms at 20 Mb/s.
    let burst: Vec<_> = (0..20).map(|_| (EPOCH, 1500)).collect();
    let mut d = forward(&json("9.6"), EPOCH);
    let out = run(&mut d, &burst);
    assert_eq!(ids(&out), (0..20).collect::<Vec<_>>());
    let ends: Vec<Nanos> = out.iter().map(|x| x.1 - EPOCH).collect();
    let mut expect: Vec<Nanos> = (1..=8).map(|k| k * 1200 * US).collect();
    // Frame 8 starts at 9.6 ms exactly: the new rate.
    expect.extend((1..=9).map(|k| 9600 * US + k * 600 * US));
    // Frame 16 ends at 15 ms exactly; frame 17 starts then, at 10 Mb/s again.
    assert_eq!(expect.last(), Some(&(15 * MS)));
    expect.extend((1..=3).map(|k| 15 * MS + k * 1200 * US));
    assert_eq!(ends, expect);
    // One ns later, frame 8 started before the step: it keeps the old rate to its end
    // (10.8 ms); frame 9 goes at the new rate.
    let mut d = forward(&json("9.600001"), EPOCH);
    let out = run(&mut d, &burst);
    assert_eq!(out[8].1 - EPOCH, 10_800 * US);
    assert_eq!(out[9].1 - EPOCH, 11_400 * US);
    let c = d.stats().crossed.to_json();
    assert_eq!((c.rate_bps.min, c.rate_bps.max), (1e7, 2e7));
}

#[test]
fn an_outage_drops_exactly_the_frames_that_would_start_in_it() {
    // 1000-byte frames every ms at 16 Mb/s (0.5 ms each), plus one at 19.9 ms that
    // ends inside the outage; outage from 20 ms to 30.5 ms, with rate 0 while it lasts.
    let mut d = forward(
        r#"{"forward": {"rate_bps": 16000000, "uplink_delay_ms": 20}, "return": {},
            "schedule": {"id": "outage", "steps": [{"at_ms": 0},
              {"at_ms": 20, "forward": {"outage": true, "rate_bps": 0}},
              {"at_ms": 30.5, "forward": {"outage": false, "rate_bps": 16000000}}]}}"#,
        EPOCH,
    );
    d.set_trace(true);
    let mut arrivals: Vec<(Nanos, usize)> = (0..=19).map(|i| (EPOCH + i * MS, 1000)).collect();
    arrivals.push((EPOCH + 19_900 * US, 1000)); // id 20: starts 19.9, ends 20.4
    arrivals.extend((20..60).map(|i| (EPOCH + i * MS, 1000))); // ids 21..
    let out = run(&mut d, &arrivals);
    in_order(&out);
    // Frame 20 starts before the outage and crosses; the stream frames arriving at
    // 20 ms (it starts at 20.4 behind frame 20) .. 30 ms (ids 21..=31) start inside it
    // and are dropped; the frame at 31 ms (id 32) crosses.
    let dropped: Vec<u32> = (0..arrivals.len() as u32)
        .filter(|i| !ids(&out).contains(i))
        .collect();
    assert_eq!(dropped, (21..=31).collect::<Vec<_>>());
    assert_eq!(out[20], (20, EPOCH + 20_400 * US, EPOCH + 40_400 * US));
    assert_eq!(out[21].0, 32);
    assert_eq!(out[21].1, EPOCH + 31_500 * US);
    let s = d.stats();
    assert_eq!(
        (s.drops.outage, s.drops.loss, s.drops.queue_full),
        (11, 0, 0)
    );
    assert_eq!(s.frames_out, arrivals.len() as u64 - 11);
    // Each drop is timed at the start of serialization it would have had.
    let drops: Vec<Nanos> = d
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Drop {
                t,
                cause: DropCause::Outage,
                ..
            } => Some(t - EPOCH),
            _ => None,
        })
        .collect();
    let mut expect = vec![20_400 * US];
    expect.extend((21..=30).map(|i| i * MS));
    assert_eq!(drops, expect);
}

#[test]
fn an_outage_flushes_the_queue_at_its_start() {
    // 10 frames at 15 ms, 1 ms each at 8 Mb/s: those that would start at 15..19 ms
    // cross; at 20 ms the outage drops the other 5 (they never get on the air, so
    // each leaves the link free for the next); after the outage the link works again.
    let mut d = forward(
        r#"{"forward": {"rate_bps": 8000000, "queue": {"bytes": 100000}}, "return": {},
            "schedule": {"steps": [{"at_ms": 0},
              {"at_ms": 20, "forward": {"outage": true}},
              {"at_ms": 40, "forward": {"outage": false}}]}}"#,
        EPOCH,
    );
    d.set_trace(true);
    let mut arrivals: Vec<_> = (0..10).map(|_| (EPOCH + 15 * MS, 1000)).collect();
    arrivals.push((EPOCH + 39 * MS, 1000));
    arrivals.push((EPOCH + 40 * MS, 1000));
    let out = run(&mut d, &arrivals);
    assert_eq!(ids(&out), vec![0, 1, 2, 3, 4, 11]);
    assert_eq!(out[4].1, EPOCH + 20 * MS); // started at 19 ms, ends in the outage
    assert_eq!(out[5].1, EPOCH + 41 * MS);
    assert_eq!(d.stats().drops.outage, 6);
    let times: Vec<Nanos> = d
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Drop { t, .. } => Some(t - EPOCH),
            _ => None,
        })
        .collect();
    assert_eq!(
        times,
        vec![20 * MS, 20 * MS, 20 * MS, 20 * MS, 20 * MS, 39 * MS]
    );
}

#[test]
fn a_loop_wraps_around_and_a_hold_stays() {
    let json = r#"{"forward": {"uplink_delay_ms": 10}, "return": {"uplink_delay_ms": 1},
        "schedule": {"id": "loop", "end": "loop", "length_ms": 100, "steps": [{"at_ms": 0},
          {"at_ms": 60, "forward": {"uplink_delay_ms": 20}, "return": {"rate_bps": 1000}}]}}"#;
    let mut d = forward(json, EPOCH);
    let arrivals: Vec<_> = (0..300).map(|i| (EPOCH + i * MS, 100)).collect();
    let out = run(&mut d, &arrivals);
    assert_eq!(ids(&out), (0..300).collect::<Vec<_>>());
    in_order(&out);
    let due = |i: usize| out[i].2 - EPOCH;
    assert_eq!(due(59), 69 * MS);
    assert_eq!(due(60), 80 * MS);
    assert_eq!(due(99), 119 * MS);
    // Wrap-around at 100 ms: 10 ms again, bunched behind frame 99 until 109 ms.
    assert_eq!(due(100), 119 * MS);
    assert_eq!(due(109), 119 * MS);
    assert_eq!(due(110), 120 * MS);
    assert_eq!(due(160), 180 * MS);
    assert_eq!(due(259), 269 * MS);
    assert_eq!(due(260), 280 * MS);
    assert_eq!(d.schedule_position(EPOCH + 250 * MS), Some((50 * MS, 0)));
    assert_eq!(d.schedule_position(EPOCH + 260 * MS), Some((60 * MS, 1)));
    assert_eq!(
        d.schedule_position(EPOCH + 300 * MS - 1),
        Some((100 * MS - 1, 1))
    );
    assert_eq!(d.schedule_position(EPOCH + 300 * MS), Some((0, 0)));
    // The return direction has its own timeline from the same steps.
    let r = link(json).schedule_of(Way::Return).unwrap();
    assert_eq!(r.at(30 * MS).1.rate_bps, 0);
    assert_eq!(r.at(160 * MS).1.rate_bps, 1000);
    assert_eq!(r.at(160 * MS).1.delay_ns, MS);
    assert_eq!(
        (r.steps(), r.length_ns(), r.id()),
        (2, Some(100 * MS), Some("loop"))
    );

    // Hold: the last step stays in force.
    let mut d = forward(
        &json.replace(r#""end": "loop", "length_ms": 100,"#, ""),
        EPOCH,
    );
    let out = run(&mut d, &[(EPOCH + 10_000 * MS, 100)]);
    assert_eq!(out[0].2, EPOCH + 10_020 * MS);
    assert_eq!(
        d.schedule_position(EPOCH + 10_000 * MS),
        Some((10_000 * MS, 1))
    );
}

#[test]
fn reapplying_restarts_the_schedule_and_a_plain_config_removes_it() {
    let cfg = link(
        r#"{"forward": {"uplink_delay_ms": 10}, "return": {},
            "schedule": {"steps": [{"at_ms": 0},
              {"at_ms": 50, "forward": {"uplink_delay_ms": 30}}]}}"#,
    );
    let mut d = forward(&serde_json::to_string(&cfg).unwrap(), 0);
    assert_eq!(d.params_at(60 * MS).delay_ns, 30 * MS);
    // Applied again at 60 ms: link time 0 is now 60 ms.
    d.apply(60 * MS, cfg.forward.clone(), cfg.schedule_of(Way::Forward));
    assert_eq!(d.params_at(60 * MS).delay_ns, 10 * MS);
    assert_eq!(d.params_at(110 * MS).delay_ns, 30 * MS);
    assert_eq!(d.schedule_position(70 * MS), Some((10 * MS, 0)));
    d.reconfigure(120 * MS, cfg.forward.clone());
    assert!(d.schedule().is_none());
    assert_eq!(d.schedule_position(130 * MS), None);
    assert_eq!(d.params_at(1000 * MS).delay_ns, 10 * MS);
}

#[test]
fn gilbert_elliott_loss_only_while_its_step_is_in_force() {
    let mut d = forward(
        r#"{"forward": {"uplink_delay_ms": 1, "seed": 4}, "return": {},
            "schedule": {"steps": [{"at_ms": 0},
              {"at_ms": 100, "forward": {"loss": {"gilbert_elliott":
                 {"p_good_bad": 0.2, "p_bad_good": 0.2, "loss_good": 0.0, "loss_bad": 0.8}}}},
              {"at_ms": 200, "forward": {"loss": null}}]}}"#,
        EPOCH,
    );
    let arrivals: Vec<_> = (0..3000).map(|i| (EPOCH + i * 100 * US, 100)).collect();
    let out = run(&mut d, &arrivals);
    in_order(&out);
    let crossed = ids(&out);
    let lost: Vec<u32> = (0..3000).filter(|i| !crossed.contains(i)).collect();
    // Frames 1000..2000 cross during [100, 200) ms; stationary loss 0.5 * 0.8 = 0.4.
    assert!(lost.iter().all(|&i| (1000..2000).contains(&i)), "{lost:?}");
    assert!((330..470).contains(&lost.len()), "{}", lost.len());
    assert_eq!(d.stats().drops.loss, lost.len() as u64);
    // Seeded: the same frames again.
    let mut again = forward(
        &serde_json::to_string(&link(
            r#"{"forward": {"uplink_delay_ms": 1, "seed": 4}, "return": {},
            "schedule": {"steps": [{"at_ms": 0},
              {"at_ms": 100, "forward": {"loss": {"gilbert_elliott":
                 {"p_good_bad": 0.2, "p_bad_good": 0.2, "loss_good": 0.0, "loss_bad": 0.8}}}},
              {"at_ms": 200, "forward": {"loss": null}}]}}"#,
        ))
        .unwrap(),
        EPOCH,
    );
    assert_eq!(ids(&run(&mut again, &arrivals)), crossed);
}

#[test]
fn queue_bound_in_ms_follows_the_scheduled_rate() {
    // 10 ms of queue: 12500 bytes at 10 Mb/s, 1250 at 1 Mb/s from 5 ms on.
    let mut d = forward(
        r#"{"forward": {"rate_bps": 10000000, "queue": {"ms": 10}}, "return": {},
            "schedule": {"steps": [{"at_ms": 0},
              {"at_ms": 5, "forward": {"rate_bps": 1000000}}]}}"#,
        0,
    );
    for i in 0..9 {
        d.enqueue(0, 1500, i).unwrap(); // 1 in service, 8 x 1500 = 12000 queued
    }
    assert!(d.enqueue(0, 1500, 9).is_err());
    // At 6 ms frame 5 has started (at 1 Mb/s): 3 x 1500 queued > 1250.
    assert_eq!(d.enqueue(6 * MS, 100, 10), Err((10, DropCause::QueueFull)));
}

fn err(json: &str) -> String {
    LinkConfig::from_json(json).unwrap_err().to_string()
}

fn with_schedule(schedule: &str) -> String {
    format!(r#"{{"forward": {{"rate_bps": 1000}}, "return": {{}}, "schedule": {schedule}}}"#)
}

#[test]
fn bad_schedules_are_rejected_naming_the_field() {
    let e = |s: &str| err(&with_schedule(s));
    assert_eq!(
        e(r#"{"steps": [{"at_ms": 0}, {"at_ms": 10}, {"at_ms": 10}]}"#),
        "schedule.steps[2].at_ms must be greater than steps[1].at_ms (10) to the ns, got 10"
    );
    assert_eq!(
        e(r#"{"steps": [{"at_ms": 0}, {"at_ms": 10}, {"at_ms": 5}]}"#),
        "schedule.steps[2].at_ms must be greater than steps[1].at_ms (10) to the ns, got 5"
    );
    assert_eq!(
        e(r#"{"steps": [{"at_ms": 1}]}"#),
        "schedule.steps[0].at_ms must be 0 (the first step), got 1"
    );
    assert_eq!(
        e(r#"{"steps": []}"#),
        "schedule.steps must have at least one step"
    );
    assert_eq!(
        e(r#"{"steps": [{"at_ms": 0}, {"at_ms": 5, "return": {"downlink_delay_ms": -1}}]}"#),
        "schedule.steps[1].return.downlink_delay_ms must be between 0 and 100000 ms, got -1"
    );
    assert_eq!(
        e(r#"{"steps": [{"at_ms": 0}, {"at_ms": 5, "forward": {"rate_bps": 0}}]}"#),
        "schedule.steps[1].forward.rate_bps is 0 without \"outage\": true \
         (0 only during an outage; name the rate when the outage ends)"
    );
    // 0 with the outage is fine, but it may not outlast it.
    assert_eq!(
        e(
            r#"{"steps": [{"at_ms": 0}, {"at_ms": 5, "forward": {"rate_bps": 0, "outage": true}},
              {"at_ms": 6, "forward": {"outage": false}}]}"#
        ),
        "schedule.steps[2].forward.rate_bps is 0 without \"outage\": true \
         (0 only during an outage; name the rate when the outage ends)"
    );
    // A direction unlimited in its own config stays unlimited: that 0 is no error.
    assert!(LinkConfig::from_json(&with_schedule(
        r#"{"steps": [{"at_ms": 0, "return": {"uplink_delay_ms": 3}}]}"#
    ))
    .is_ok());
    assert_eq!(
        e(r#"{"end": "loop", "steps": [{"at_ms": 0}]}"#),
        "schedule.length_ms is required with \"end\": \"loop\""
    );
    assert_eq!(
        e(r#"{"end": "loop", "length_ms": 10, "steps": [{"at_ms": 0}, {"at_ms": 10}]}"#),
        "schedule.length_ms must be greater than the last step's at_ms (10), got 10"
    );
    assert_eq!(
        e(r#"{"length_ms": 10, "steps": [{"at_ms": 0}]}"#),
        "schedule.length_ms is only valid with \"end\": \"loop\""
    );
    assert_eq!(
        e(r#"{"id": "Bad id", "steps": [{"at_ms": 0}]}"#),
        "schedule.id must match [a-z0-9][a-z0-9_.-]*, got \"Bad id\""
    );
    assert_eq!(
        e(
            r#"{"steps": [{"at_ms": 0, "forward": {"loss": {"gilbert_elliott":
              {"p_good_bad": 0.1, "p_bad_good": 1.0, "loss_good": 0, "loss_bad": 0.5}}}}]}"#
        ),
        "schedule.steps[0].forward.loss.gilbert_elliott.p_bad_good must be in [0, 1), got 1"
    );
    // Unknown keys: the path and the key.
    let u = e(r#"{"steps": [{"at_ms": 0}, {"at_ms": 1, "forward": {"delay_ms": 3}}]}"#);
    assert!(
        u.starts_with(
            "invalid link configuration: schedule.steps[1].forward.delay_ms: unknown field `delay_ms`"
        ),
        "{u}"
    );
    let u = e(r#"{"steps": [{"at_ms": 0, "at_s": 0}]}"#);
    assert!(
        u.contains("schedule.steps[0].at_s: unknown field `at_s`"),
        "{u}"
    );
    let u = e(r#"{"slot_ms": 15, "steps": [{"at_ms": 0}]}"#);
    assert!(
        u.contains("schedule.slot_ms: unknown field `slot_ms`"),
        "{u}"
    );
    let u = e(
        r#"{"steps": [{"at_ms": 0, "forward": {"loss": {"gilbert_elliott":
              {"p_good_bad": 0.1, "p_bad_good": 0.1, "loss_good": 0, "loss_bad": 0.5, "k": 1}}}}]}"#,
    );
    assert!(
        u.contains("schedule.steps[0].forward.loss.gilbert_elliott.k: unknown field `k`"),
        "{u}"
    );
    let u = e(r#"{"end": "repeat", "steps": [{"at_ms": 0}]}"#);
    assert!(u.contains("schedule.end: unknown variant `repeat`"), "{u}");
    let u = e(r#"{"steps": [{"forward": {}}]}"#);
    assert!(u.contains("missing field `at_ms`"), "{u}");
}

#[test]
fn a_schedule_round_trips_and_inherits_unnamed_fields() {
    let json = r#"{"forward": {"rate_bps": 100000000, "uplink_delay_ms": 3.1,
          "downlink_delay_ms": 2.9, "loss": {"packet_rate": 0.01}},
        "return": {"rate_bps": 15000000},
        "schedule": {"id": "leo-starlink-20261120", "end": "loop", "length_ms": 600000,
          "steps": [
            {"at_ms": 0, "forward": {"uplink_delay_ms": 3.1, "downlink_delay_ms": 2.9}},
            {"at_ms": 15000, "forward": {"outage": true}, "return": {"outage": true}},
            {"at_ms": 15050, "forward": {"outage": false, "uplink_delay_ms": 4.0,
               "loss": {"gilbert_elliott": {"p_good_bad": 0.01, "p_bad_good": 0.3,
                 "loss_good": 0.0, "loss_bad": 0.5}}}, "return": {"outage": false}},
            {"at_ms": 30000.5, "forward": {"loss": null}}]}}"#;
    let c = link(json);
    let again = link(&serde_json::to_string(&c).unwrap());
    assert_eq!(again, c);
    let f = c.schedule_of(Way::Forward).unwrap();
    let p = |t_ms: f64| *f.at((t_ms * 1e6) as Nanos).1;
    assert_eq!(p(1.0).delay_ns, 6 * MS);
    assert_eq!(p(1.0).loss, Some(LossConfig::PacketRate(0.01)));
    assert!(p(15_000.0).outage && !p(14_999.0).outage);
    assert_eq!(p(15_010.0).rate_bps, 100_000_000);
    assert!(!p(15_050.0).outage);
    assert_eq!(p(15_050.0).delay_ns, 6_900 * US);
    assert!(matches!(
        p(20_000.0).loss,
        Some(LossConfig::GilbertElliott(_))
    ));
    assert_eq!(p(30_000.0).loss, p(20_000.0).loss);
    assert_eq!(p(30_000.5).loss, None);
    assert_eq!(p(30_000.5).delay_ns, 6_900 * US);
    // Shaping anywhere in the schedule turns the unshaped fast path off.
    assert!(!c.is_unshaped(Way::Forward));
    let d = link(
        r#"{"forward": {}, "return": {}, "schedule": {"steps": [{"at_ms": 0},
            {"at_ms": 5, "forward": {"uplink_delay_ms": 9}, "return": {"rate_bps": 8}}]}}"#,
    );
    assert!(d.is_unshaped(Way::Forward));
    assert!(!d.is_unshaped(Way::Return));
}
