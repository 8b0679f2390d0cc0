"""A load on the link's timeline: where in its schedule the load fell, and the delay and
rate it actually crossed (satlink's `crossed` counters), for every record.

Link time comes from the gateway's stats (its schedule's clock: satlink's link time at
the moment it answered), carried back to the browser's navigation start by the wall
clock both share (the runner notes when it asked; the page reports
performance.timeOrigin). The slot phase is that link time less the schedule's
slot_offset_s, modulo its slot_s (docs/schedules.md)."""

from __future__ import annotations

from typing import Any

from clarke.run.session.verdicts import link_overhead
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


QUEUE_DROP_CAUSES = ("queue_full", "queue_head", "codel", "fq_overflow")


def queue_metrics(link_stats: dict[str, Any]) -> dict[str, float]:
    """queue_delay_<dir>_{p50,p99}_ms: the sojourn time of the frames that left the
    shaping station's queue during the load (satlink's `queue_delay` histogram, reset
    before the load), and link_drops_<dir>_<cause> for the queue's drop causes
    (docs/queues.md); nothing for a link that does not count them (OpenSAND, netem)."""
    out: dict[str, float] = {}
    for direction, role in SENDER.items():
        shaped = (link_stats.get(role) or {}).get(direction) or {}
        delay = shaped.get("queue_delay") or {}
        if delay.get("count"):
            for stat in ("p50", "p99"):
                value = delay.get(f"{stat}_ms")
                if isinstance(value, int | float):
                    out[f"queue_delay_{direction}_{stat}_ms"] = float(value)
        drops = shaped.get("drops")
        if isinstance(drops, dict) and "queue_full" in drops:
            for cause in QUEUE_DROP_CAUSES:
                value = drops.get(cause, 0)
                if isinstance(value, int | float):
                    out[f"link_drops_{direction}_{cause}"] = float(value)
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
    phase = schedule.slot_phase_s(at_nav_ms / 1000)
    if phase is not None:
        out["slot_phase_s"] = phase
    return out


def navigate_at(
    schedule: Schedule | None,
    state: dict[str, Any],
    asked_unix_ms: float,
    phase_s: float,
    lead_s: float,
) -> float | None:
    """The wall-clock time (Unix ms) of the first link time at `phase_s` into a slot
    that leaves the browser `lead_s` to start, from the gateway's schedule `state` read
    at `asked_unix_ms`; None without a slotted schedule or a link clock."""
    link_ms = state.get("link_time_ms")
    if schedule is None or not schedule.slot_s or not isinstance(link_ms, int | float):
        return None
    slot_ms = schedule.slot_s * 1000
    phase_ms = (schedule.slot_offset_s + phase_s) * 1000  # slots start at slot_offset_s
    earliest = link_ms + lead_s * 1000
    target = (earliest - phase_ms) // slot_ms * slot_ms + phase_ms
    if target < earliest:
        target += slot_ms
    return asked_unix_ms + (target - link_ms)


def link_metrics(
    link_stats: dict[str, Any],
    page_bytes: int,
    with_cross_traffic: bool,
    asked_unix_ms: float,
    time_origin_ms: float | None,
    schedule: Schedule | None,
) -> tuple[dict[str, float], dict[str, Any]]:
    """A load's metrics from the link's stats (the bytes it carried and their overhead
    over the page, the rates and queues crossed, where on the link's timeline the load
    was) and that timeline (at_navigation)."""
    metrics = link_overhead(link_stats, page_bytes)
    if with_cross_traffic:
        # The link counted the cross traffic too: its bytes stay (link_bytes_*), but
        # they are no overhead of the page's.
        metrics = {k: v for k, v in metrics.items() if k.startswith("link_bytes_")}
    metrics |= crossed_metrics(link_stats) | queue_metrics(link_stats)
    at = at_navigation(link_stats, asked_unix_ms, time_origin_ms, schedule)
    metrics |= {k: v for k, v in at.items() if k in ("link_time_s", "slot_phase_s")}
    return metrics, at
