"""The link's schedule on the campaign's wall clock, as `link_schedule` points for
Grafana: what the link held (one-way delay and rate per direction) from the start of
each load on a scheduled profile until the next load begins, so that a panel draws the
schedule and the loads on one time axis.

Each load anchors the schedule's clock to the wall clock: its record carries the link
time at navigation start (`details.timeline.link_time_s`) and that navigation's wall time
(`navigation_unix_ms`), both read by run/session/timeline.py from satlink's own clock. The steps
come from the profile as this checkout reads it, and only when its schedule id is the one
the link ran (the id carries a digest of the steps unless the file names its own): a
changed profile gives no points rather than wrong ones. Loads recorded before
`navigation_unix_ms` existed give none either."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass

from influxdb_client import Point, WritePrecision

from clarke import profiles
from clarke.campaign.dimensions import PROFILE
from clarke.errors import ClarkeError
from clarke.profiles import LinkProfile
from clarke.results.record import RunRecord
from clarke.schedules.model import End
from clarke.vocab import DIRECTIONS

MEASUREMENT = "link_schedule"
# Per load and direction: a 10 ms trace over a 50 s window. Grafana draws no finer; the
# record's crossed min/max keeps what a load met between points.
MAX_POINTS_PER_LOAD = 5_000


@dataclass(frozen=True)
class Anchor:
    """One load's window on the wall clock and the link time at a wall time in it."""

    start_ms: float
    end_ms: float
    wall_ms: float
    link_s: float


def _anchor(r: RunRecord, end_ms: float) -> Anchor | None:
    timeline = r.details.timeline
    if timeline is None:
        return None
    link_s, wall_ms = timeline.link_time_s, timeline.navigation_unix_ms
    if link_s is None or wall_ms is None:
        return None
    return Anchor(r.started_at.timestamp() * 1000, end_ms, float(wall_ms), float(link_s))


def _steps_in(
    profile: LinkProfile, direction: str, a: Anchor
) -> Iterator[tuple[float, tuple[float, float]]]:
    """(wall ms, (delay ms, rate Mb/s)) in force at the window's start, then at every step
    the link took inside the window."""
    schedule = profile.schedule
    assert schedule is not None
    held = profile.in_force(direction)
    at = [s[0] for s in held]
    period = schedule.length_s if schedule.end is End.loop else None

    def link_at(wall_ms: float) -> float:
        return a.link_s + (wall_ms - a.wall_ms) / 1000

    def value(link_s: float) -> tuple[float, float]:
        if period:
            link_s %= period
        i = max(bisect.bisect_right(at, link_s) - 1, 0)
        return held[i][1], held[i][2]

    first, last = link_at(a.start_ms), link_at(a.end_ms)
    # The record's link time is taken modulo a loop's period, so a window may start at a
    # negative link time: on a loop that is the previous period; on a held schedule, the
    # link had not started and its first step is what it held.
    yield a.start_ms, value(first if period else max(first, 0.0))
    cycles = range(math.floor(first / period), math.floor(last / period) + 1) if period else [0]
    for cycle in cycles:
        base = cycle * (period or 0.0)
        for step_at in at:
            link_s = base + step_at
            if first < link_s <= last:
                yield a.wall_ms + (link_s - a.link_s) * 1000, value(link_s)


def link_schedule_points(records: list[RunRecord]) -> list[Point]:
    """`link_schedule` points (tags campaign, campaign_id, profile, schedule_id, direction;
    fields one_way_delay_ms, rate_mbps) over every load on a scheduled profile, from its
    start to the next load's start (its own end when the next load runs another
    profile, whose link restarts its clock)."""
    ordered = sorted(records, key=lambda r: (r.started_at, r.run_index, r.attempt))
    read: dict[str, LinkProfile | None] = {}
    points: list[Point] = []
    for i, r in enumerate(ordered):
        schedule_id = r.details.timeline.schedule_id if r.details.timeline else None
        if not schedule_id:
            continue
        if r.cell.link not in read:
            try:
                read[r.cell.link] = profiles.read(r.cell.link)
            except ClarkeError:
                read[r.cell.link] = None  # a profile this checkout does not have
        profile = read[r.cell.link]
        if profile is None or profile.schedule is None or profile.schedule.id != schedule_id:
            continue
        following = ordered[i + 1] if i + 1 < len(ordered) else None
        same_link = following is not None and following.cell.link == r.cell.link
        end = following.started_at if following is not None and same_link else r.finished_at
        anchor = _anchor(r, end.timestamp() * 1000)
        if anchor is None:
            continue
        for direction in DIRECTIONS:
            for n, (wall_ms, (delay, rate)) in enumerate(_steps_in(profile, direction, anchor)):
                if n >= MAX_POINTS_PER_LOAD:
                    break
                p = Point(MEASUREMENT).tag("campaign", r.campaign)
                p = p.tag("campaign_id", r.campaign_id).tag("profile", r.cell[PROFILE])
                p = p.tag("schedule_id", schedule_id).tag("direction", direction)
                p = p.field("one_way_delay_ms", delay).field("rate_mbps", rate)
                points.append(p.time(round(wall_ms * 1_000_000), WritePrecision.NS))
    return points
