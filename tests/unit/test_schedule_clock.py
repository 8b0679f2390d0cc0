"""A schedule's clock and slot offset: link time on the UTC clock (satlink's "clock":
"utc"), slots that start at second 12 of the minute, and loads placed in them."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError

from clarke import profiles
from clarke.results.station_records import LinkRoleStats, ScheduleState
from clarke.run.session.timeline import at_navigation, navigate_at
from clarke.schedules import Schedule
from clarke.schema import problems_of
from helpers import link_stats, looped_minute

MINUTE = looped_minute(clock="utc", slot_offset_s=12)


def _gateway(link_time_ms: float) -> dict[str, LinkRoleStats]:
    return link_stats(
        {"gateway": {"forward": {"schedule": {"id": "m", "link_time_ms": link_time_ms}}}}
    )


AT_5_S = ScheduleState(link_time_ms=5_000)


def test_phases_count_from_the_slot_offset() -> None:
    s = Schedule.model_validate(MINUTE)
    assert [s.slot_phase_s(t) for t in (12, 26.5, 27, 57, 59, 0, 11.9)] == pytest.approx(
        [0, 14.5, 0, 0, 2, 3, 14.9]
    )
    # A load that navigated at link time 13.25 s (second 13.25 of the UTC minute) is
    # 1.25 s into the slot that began at second 12.
    got = at_navigation(_gateway(13_750), 1_000_500, 1_000_000, s)
    assert got.link_time_s == pytest.approx(13.25)
    assert got.slot_phase_s == pytest.approx(1.25)


def test_an_aimed_load_lands_at_its_phase_after_the_offset() -> None:
    s = Schedule.model_validate(MINUTE)
    # Asked at link time 5 s (Unix ms 1,000,000); 2 s into a slot, at least 8 s from now:
    # the slots start at 12, 27, ...: 14 s is only 9 s away, so 14 s it is.
    at = navigate_at(s, AT_5_S, 1_000_000, phase_s=2.0, lead_s=8.0)
    assert at == 1_000_000 + 9_000
    # At least 10 s away: the next one, 29 s.
    at = navigate_at(s, AT_5_S, 1_000_000, phase_s=2.0, lead_s=10.0)
    assert at == 1_000_000 + 24_000
    # Without an offset, phase 2 s is link time 2, 17, 32, ...
    plain = Schedule.model_validate({**MINUTE, "slot_offset_s": 0, "clock": "apply"})
    assert navigate_at(plain, AT_5_S, 1_000_000, 2.0, 8.0) == 1_000_000 + 12_000


def test_utc_clock_goes_to_satlink_and_needs_a_loop() -> None:
    s = Schedule.model_validate(MINUTE)
    assert s.to_satlink("p")["clock"] == "utc"
    assert "clock" not in Schedule.model_validate({**MINUTE, "clock": "apply"}).to_satlink("p")
    for bad, field in (
        ({**MINUTE, "end": "hold", "length_s": None}, "clock"),
        ({**MINUTE, "slot_offset_s": 15}, "slot_offset_s"),
        ({**MINUTE, "slot_s": None}, "slot_offset_s"),
        ({**MINUTE, "clock": "gps"}, "clock"),
    ):
        with pytest.raises(ValidationError) as e:
            Schedule.model_validate({k: v for k, v in bad.items() if v is not None})
        assert any(p.startswith(f"{field}:") for p in problems_of(e.value)), problems_of(e.value)


def test_older_schedules_keep_their_digest() -> None:
    """The id of a schedule without the new fields is what it was before they existed:
    the canonical JSON of the fields it had."""
    old = {k: v for k, v in MINUTE.items() if k not in ("clock", "slot_offset_s")}
    s = Schedule.model_validate(old)
    data = {"version": 1, "end": "loop", "length_s": 60.0, "slot_s": 15.0}
    data["steps"] = [{"at_s": 0.0, "forward": {"uplink_delay_ms": 2.0}, "return": None}]
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert s.digest() == hashlib.sha256(text.encode()).hexdigest()
    # Written at their defaults, they do not count either; set, they do.
    assert Schedule.model_validate({**old, "clock": "apply", "slot_offset_s": 0}).digest() == (
        s.digest()
    )
    assert Schedule.model_validate(MINUTE).digest() != s.digest()


def test_shipped_schedule_ids_are_unchanged() -> None:
    assert profiles.read("leo-starlink").schedule.id == "leo-starlink-20230718"  # type: ignore[union-attr]
    assert profiles.read("geo-rain-fade").schedule.id == "geo-rain-fade-10db"  # type: ignore[union-attr]


def test_jitter_and_clock_reach_satlinks_config(run_cli) -> None:  # type: ignore[no-untyped-def]
    cfg = profiles.read("leo-starlink-measured").to_satlink_config(name="m")
    assert cfg["forward"]["jitter"] == {"exponential": {"mean_ms": 4.4667}}
    assert cfg["return"]["jitter"] == {"exponential": {"mean_ms": 4.4667}}
    assert cfg["schedule"]["clock"] == "utc"
    assert "jitter" not in profiles.read("leo").to_satlink_config()["forward"]
    code, out, err = run_cli("link", "schedule", "validate", "leo-starlink-measured", "--json")
    assert code == 0, err
    assert json.loads(out[out.index("{") :])["schedule"]["clock"] == "utc"


def test_jitter_is_refused_where_it_cannot_be_emulated() -> None:
    from clarke import registry
    from clarke.errors import ValidationFailed

    p = profiles.read("leo-starlink-measured")
    for link in ("netem", "opensand"):
        with pytest.raises(ValidationFailed) as e:
            registry.get("link", link).check_profile(p, "link profile 'leo-starlink-measured'")
        assert "forward.jitter" in str(e.value) and "return.jitter" in str(e.value)
    with pytest.raises(ValidationFailed) as e:
        registry.get("link", "opensand").check_profile(p)
    assert "schedule.clock: utc" in str(e.value)
    registry.get("link", "satlink").check_profile(p)
    base = {"rate_mbps": 1, "uplink_delay_ms": 1, "downlink_delay_ms": 1}
    for jitter, field in (
        ({"exponential": {"mean_ms": 0}}, "jitter.exponential.mean_ms"),
        ({"uniform": {"max_ms": 20000}}, "jitter.uniform.max_ms"),
        ({"exponential": {"mean_ms": 1}, "uniform": {"max_ms": 1}}, "jitter"),
        ({"normal": {"sd_ms": 1}}, "jitter.normal"),
    ):
        with pytest.raises(ValidationError) as e:
            profiles.Direction.model_validate(base | {"jitter": jitter})
        assert any(p.startswith(f"{field}:") for p in problems_of(e.value)), problems_of(e.value)
