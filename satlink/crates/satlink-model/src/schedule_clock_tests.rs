//! `"clock": "utc"`: link time is the Unix time modulo the loop, so a loop of whole
//! minutes puts each step at the same second of every minute, on every station.

use super::*;
use crate::{Direction, LinkConfig, MS};

const S: Nanos = 1_000 * MS;
/// When the config is applied on the caller's (monotonic) clock.
const EPOCH: Nanos = 7_000_000_003;
/// The Unix time then: 2024-05-17T00:00:04.25Z.
const UNIX_AT_EPOCH: u128 = 1_715_904_004_250_000_000;

fn link(json: &str) -> LinkConfig {
    LinkConfig::from_json(json).unwrap_or_else(|e| panic!("{e}"))
}

/// A 60 s loop with steps at seconds 12, 27, 42 and 57 of the minute (Starlink's
/// reconfigurations): the forward delay is 10, 20, 30, 40 ms in the slots they start.
const MINUTE: &str = r#"{"forward": {"uplink_delay_ms": 40}, "return": {},
    "schedule": {"end": "loop", "length_ms": 60000, "clock": "utc", "steps": [
      {"at_ms": 0},
      {"at_ms": 12000, "forward": {"uplink_delay_ms": 10}},
      {"at_ms": 27000, "forward": {"uplink_delay_ms": 20}},
      {"at_ms": 42000, "forward": {"uplink_delay_ms": 30}},
      {"at_ms": 57000, "forward": {"uplink_delay_ms": 40}}]}}"#;

fn applied(json: &str, unix_ns: u128) -> Direction<u32> {
    let cfg = link(json);
    let mut d = Direction::new(cfg.forward.clone());
    let schedule = cfg.schedule_of(Way::Forward).map(|s| s.aligned(unix_ns));
    d.apply(EPOCH, cfg.forward.clone(), schedule);
    d
}

#[test]
fn utc_link_time_is_the_unix_time_modulo_the_loop() {
    let d = applied(MINUTE, UNIX_AT_EPOCH);
    // Applied 4.25 s into a minute: link time 4.25 s, in the step at 0 (the slot that
    // started at second 57 of the minute before).
    assert_eq!(d.schedule_position(EPOCH), Some((4_250 * MS, 0)));
    // Seconds 12, 27, 42, 57 of the minute are the steps, to the nanosecond.
    for (k, second) in [12u64, 27, 42, 57].into_iter().enumerate() {
        let at = EPOCH + (second * S - 4_250 * MS);
        assert_eq!(d.schedule_position(at - 1).map(|p| p.1), Some(k));
        assert_eq!(d.schedule_position(at), Some((second * S, k + 1)));
        assert_eq!(d.params_at(at).delay_ns, (10 + 10 * k as u64) * MS);
    }
    // And again in every later minute.
    let later = EPOCH + 3600 * S + (27 * S - 4_250 * MS);
    assert_eq!(d.schedule_position(later), Some((27 * S, 2)));
    assert_eq!(d.params_at(later - 1).delay_ns, 10 * MS);
    assert_eq!(d.params_at(later).delay_ns, 20 * MS);
}

#[test]
fn two_stations_applying_at_different_moments_share_the_link_time() {
    // The second station applies the config 37 ms later (on both clocks).
    let a = applied(MINUTE, UNIX_AT_EPOCH);
    let cfg = link(MINUTE);
    let mut b = Direction::<u32>::new(cfg.forward.clone());
    let s = cfg
        .schedule_of(Way::Forward)
        .map(|s| s.aligned(UNIX_AT_EPOCH + 37_000_000));
    b.apply(EPOCH + 37 * MS, cfg.forward.clone(), s);
    for t in [EPOCH + 40 * MS, EPOCH + 7_750 * MS, EPOCH + 100 * S] {
        assert_eq!(a.schedule_position(t), b.schedule_position(t));
    }
}

#[test]
fn apply_clock_ignores_the_unix_time() {
    let json = MINUTE.replace(r#""clock": "utc", "#, "");
    let d = applied(&json, UNIX_AT_EPOCH);
    assert_eq!(d.schedule_position(EPOCH), Some((0, 0)));
    assert_eq!(d.schedule().map(|s| s.clock()), Some(Clock::Apply));
    // Not written when it is the default, so older readers read the config.
    let out = serde_json::to_string(&link(&json)).unwrap();
    assert!(!out.contains("clock"), "{out}");
    assert!(serde_json::to_string(&link(MINUTE))
        .unwrap()
        .contains(r#""clock":"utc""#));
}

#[test]
fn utc_clock_needs_a_loop() {
    let e = LinkConfig::from_json(
        r#"{"forward": {}, "return": {},
            "schedule": {"clock": "utc", "steps": [{"at_ms": 0}]}}"#,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "schedule.clock \"utc\" needs \"end\": \"loop\" (link time is the Unix time modulo \
         length_ms)"
    );
    let e = LinkConfig::from_json(
        r#"{"forward": {}, "return": {},
            "schedule": {"clock": "gps", "end": "loop", "length_ms": 10, "steps": [{"at_ms": 0}]}}"#,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("schedule.clock: unknown variant `gps`"),
        "{e}"
    );
}
