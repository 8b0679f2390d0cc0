"""A load on the link's timeline: link time carried back to navigation start, the slot
phase, the crossed counters, and where an aimed navigation lands."""

from __future__ import annotations

from pathlib import Path

import pytest

from clarke.campaign.dimensions import HTTP
from clarke.campaign.model import SlotPhase
from clarke.campaign.plan import plan_file, positions_per_profile
from clarke.results.station_records import LinkRoleStats
from clarke.run.session.timeline import at_navigation, crossed_metrics
from clarke.schedules import Schedule
from helpers import link_stats, looped_minute

SCHEDULE = Schedule.model_validate(looped_minute())


def _stats(link_time_ms: float) -> dict[str, LinkRoleStats]:
    crossed = {
        "frames": 10,
        "delay_ms": {"min": 15.0, "mean": 15.5, "max": 16.0},
        "rate_bps": {"min": 1e8, "mean": 1e8, "max": 1e8},
    }
    return link_stats(
        {
            "gateway": {
                "forward": {
                    "crossed": crossed,
                    "schedule": {"id": "x", "link_time_ms": link_time_ms, "step_index": 2},
                }
            },
            "terminal": {"return": {"crossed": {"frames": 0}}},
        }
    )


def test_link_time_is_carried_back_to_navigation_start_and_wraps_with_the_loop() -> None:
    got = at_navigation(
        _stats(20_000), asked_unix_ms=1_000_500, time_origin_unix_ms=1_000_000, schedule=SCHEDULE
    )
    assert got.written() == {
        "schedule_id": "x",
        "step_index": 2,
        "link_time_s": 19.5,
        "slot_phase_s": 4.5,
        "navigation_unix_ms": 1_000_000,
    }
    wrapped = at_navigation(_stats(200), 1_000_500, 1_000_000, SCHEDULE)
    assert wrapped.link_time_s == pytest.approx(59.7)
    assert at_navigation(_stats(200), 1_000_500, None, SCHEDULE).written() == {
        "schedule_id": "x",
        "step_index": 2,
    }
    assert at_navigation(_stats(200), 1_000_500, 1_000_000, None).written() == {}


def test_crossed_counters_become_metrics_only_for_directions_with_frames() -> None:
    m = crossed_metrics(_stats(0))
    assert m["link_delay_forward_mean_ms"] == 15.5 and m["link_rate_forward_max_mbps"] == 100
    assert not [k for k in m if "return" in k]


def test_slot_phases_fixed_and_spread() -> None:
    assert SlotPhase(mode="fixed", at_s=20).phase_s(15, 1, 3) == 5
    assert [SlotPhase(mode="spread").phase_s(15, r, 3) for r in (1, 2, 3)] == [2.5, 7.5, 12.5]


def test_sweep_gives_a_profiles_loads_evenly_spaced_phases_in_plan_order() -> None:
    """campaigns/geo-rain-fade.yaml: 24 loads on one profile, phases 17.5 s apart through
    the 420 s loop, HTTP/2 and /3 alternating; the positions come from the whole plan, so
    the second shard's loads aim where they would in the whole campaign."""
    plan = plan_file(Path("campaigns/geo-rain-fade.yaml"))
    positions = positions_per_profile(plan.runs)
    sweep = SlotPhase(mode="sweep")
    aims = [sweep.phase_s(420, r.repetition, 12, positions[r.index]) for r in plan.runs]
    assert aims == [420 * (k + 0.5) / 24 for k in range(24)]
    assert [r.cell[HTTP] for r in plan.runs[:4]] == ["2", "3", "2", "3"]
    second = plan.shard(2, 2)
    assert [positions[r.index] for r in second] == [(r.index, 24) for r in second]
    with pytest.raises(ValueError, match="at_s"):
        SlotPhase(mode="fixed")
    with pytest.raises(ValueError, match="at_s"):
        SlotPhase(mode="spread", at_s=1)
