"""A load on the link's timeline: where in its schedule the load fell, and the delay and
rate it actually crossed (satlink's `crossed` counters), for every record.

Link time comes from the gateway's stats (its schedule's clock: satlink's link time at
the moment it answered), carried back to the browser's navigation start by the wall
clock both share (the runner notes when it asked; the page reports
performance.timeOrigin). The slot phase is that link time modulo the schedule's slot_s
(docs/schedules.md)."""

from __future__ import annotations

from typing import Any

from clarke.schedules import Schedule
from clarke.vocab import SENDER


def crossed_metrics(link_stats: dict[str, Any]) -> dict[str, float]:
    """link_delay_<dir>_{min,mean,max}_ms and link_rate_<dir>_{min,mean,max}_mbps of the
    frames that crossed during the load; nothing for a direction with no frames or a
    link that does not count them (OpenSAND, netem)."""
    out: dict[str, float] = {}
    for direction, role in SENDER.items():  # the station that shapes it counts
        crossed = ((link_stats.get(role) or {}).get(direction) or {}).get("crossed") or {}
        if not crossed.get("frames"):
            continue
        for stat in ("min", "mean", "max"):
            delay = (crossed.get("delay_ms") or {}).get(stat)
            rate = (crossed.get("rate_bps") or {}).get(stat)
            if isinstance(delay, int | float):
                out[f"link_delay_{direction}_{stat}_ms"] = float(delay)
            if isinstance(rate, int | float):
                out[f"link_rate_{direction}_{stat}_mbps"] = rate / 1e6
    return out


def at_navigation(
    link_stats: dict[str, Any],
    asked_unix_ms: float,
    time_origin_unix_ms: float | None,
    schedule: Schedule | None,
) -> dict[str, Any]:
    """The schedule's id, the link time at navigation start and the slot phase, or {}
    when the link runs no schedule or the browser gave no time origin."""
    forward = (link_stats.get(SENDER["forward"]) or {}).get("forward") or {}
    state = forward.get("schedule")
    if not isinstance(state, dict) or schedule is None:
        return {}
    out: dict[str, Any] = {"schedule_id": state.get("id"), "step_index": state.get("step_index")}
    link_ms = state.get("link_time_ms")
    if not isinstance(link_ms, int | float) or time_origin_unix_ms is None:
        return out
    at_nav_ms = link_ms - (asked_unix_ms - time_origin_unix_ms)
    if schedule.length_s:
        at_nav_ms %= schedule.length_s * 1000
    out["link_time_s"] = at_nav_ms / 1000
    out["navigation_unix_ms"] = time_origin_unix_ms  # the anchor of results/link_timeline.py
    if schedule.slot_s:
        out["slot_phase_s"] = (at_nav_ms / 1000) % schedule.slot_s
    return out
