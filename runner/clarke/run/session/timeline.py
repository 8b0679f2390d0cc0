"""A load on the link's timeline: where in its schedule the load fell, and the delay and
rate it actually crossed (satlink's `crossed` counters), for every record.

Link time comes from the gateway's stats (its schedule's clock: satlink's link time at
the moment it answered), carried back to the browser's navigation start by the wall
clock both share (the runner notes when it asked; the page reports
performance.timeOrigin). The slot phase is that link time less the schedule's
slot_offset_s, modulo its slot_s (docs/schedules.md)."""

from __future__ import annotations

from collections.abc import Mapping

from clarke.results.details import Timeline
from clarke.results.station_records import LinkDirection, LinkRoleStats, ScheduleState, Spread
from clarke.run.session.verdicts import link_overhead
from clarke.schedules import Schedule
from clarke.vocab import SENDER

SPREAD = ("min", "mean", "max")


def shaped(link_stats: Mapping[str, LinkRoleStats], direction: str) -> LinkDirection | None:
    """`direction` as the station that shapes it counts it."""
    station = link_stats.get(SENDER[direction])
    return station.direction(direction) if station is not None else None


def _spread(s: Spread | None) -> dict[str, float | None]:
    return {stat: getattr(s, stat) for stat in SPREAD} if s is not None else {}


def crossed_metrics(link_stats: Mapping[str, LinkRoleStats]) -> dict[str, float]:
    """link_delay_<dir>_{min,mean,max}_ms and link_rate_<dir>_{min,mean,max}_mbps of the
    frames that crossed during the load; nothing for a direction with no frames or a
    link that does not count them (OpenSAND, netem)."""
    out: dict[str, float] = {}
    for direction in SENDER:  # the station that shapes it counts
        d = shaped(link_stats, direction)
        crossed = d.crossed if d is not None else None
        if crossed is None or not crossed.frames:
            continue
        delays, rates = _spread(crossed.delay_ms), _spread(crossed.rate_bps)
        for stat in SPREAD:
            delay, rate = delays.get(stat), rates.get(stat)
            if delay is not None:
                out[f"link_delay_{direction}_{stat}_ms"] = float(delay)
            if rate is not None:
                out[f"link_rate_{direction}_{stat}_mbps"] = rate / 1e6
    return out


QUEUE_DROP_CAUSES = ("queue_full", "queue_head", "codel", "fq_overflow")


def queue_metrics(link_stats: Mapping[str, LinkRoleStats]) -> dict[str, float]:
    """queue_delay_<dir>_{p50,p99}_ms: the sojourn time of the frames that left the
    shaping station's queue during the load (satlink's `queue_delay` histogram, reset
    before the load), and link_drops_<dir>_<cause> for the queue's drop causes
    (docs/queues.md); nothing for a link that does not count them (OpenSAND, netem)."""
    out: dict[str, float] = {}
    for direction in SENDER:
        d = shaped(link_stats, direction)
        if d is None:
            continue
        delay = d.queue_delay
        if delay is not None and delay.count:
            for stat, value in (("p50", delay.p50_ms), ("p99", delay.p99_ms)):
                if value is not None:
                    out[f"queue_delay_{direction}_{stat}_ms"] = float(value)
        drops = d.drops
        if drops is not None and "queue_full" in drops:
            for cause in QUEUE_DROP_CAUSES:
                out[f"link_drops_{direction}_{cause}"] = float(drops.get(cause, 0))
    return out


def at_navigation(
    link_stats: Mapping[str, LinkRoleStats],
    asked_unix_ms: float,
    time_origin_unix_ms: float | None,
    schedule: Schedule | None,
) -> Timeline:
    """The schedule's id, the link time at navigation start and the slot phase; nothing
    when the link runs no schedule, only the first two when the browser gave no time
    origin."""
    forward = shaped(link_stats, "forward")
    state = forward.schedule if forward is not None else None
    if state is None or schedule is None:
        return Timeline()
    out = Timeline(schedule_id=state.id, step_index=state.step_index)
    link_ms = state.link_time_ms
    if link_ms is None or time_origin_unix_ms is None:
        return out
    at_nav_ms = link_ms - (asked_unix_ms - time_origin_unix_ms)
    if schedule.length_s:
        at_nav_ms %= schedule.length_s * 1000
    out.link_time_s = at_nav_ms / 1000
    out.navigation_unix_ms = time_origin_unix_ms  # the anchor of results/link_timeline.py
    phase = schedule.slot_phase_s(at_nav_ms / 1000)
    if phase is not None:
        out.slot_phase_s = phase
    return out


def navigate_at(
    schedule: Schedule | None,
    state: ScheduleState | None,
    asked_unix_ms: float,
    phase_s: float,
    lead_s: float,
) -> float | None:
    """The wall-clock time (Unix ms) of the first link time at `phase_s` into a slot
    that leaves the browser `lead_s` to start, from the gateway's schedule `state` read
    at `asked_unix_ms`; None without a slotted schedule or a link clock."""
    link_ms = state.link_time_ms if state is not None else None
    if schedule is None or not schedule.slot_s or link_ms is None:
        return None
    slot_ms = schedule.slot_s * 1000
    phase_ms = (schedule.slot_offset_s + phase_s) * 1000  # slots start at slot_offset_s
    earliest = link_ms + lead_s * 1000
    target = (earliest - phase_ms) // slot_ms * slot_ms + phase_ms
    if target < earliest:
        target += slot_ms
    return asked_unix_ms + (target - link_ms)


def link_metrics(
    link_stats: Mapping[str, LinkRoleStats],
    page_bytes: int,
    with_cross_traffic: bool,
    asked_unix_ms: float,
    time_origin_ms: float | None,
    schedule: Schedule | None,
) -> tuple[dict[str, float], Timeline]:
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
    metrics |= {
        k: v
        for k, v in (("link_time_s", at.link_time_s), ("slot_phase_s", at.slot_phase_s))
        if v is not None
    }
    return metrics, at
