"""link_schedule points (clarke.results.link_timeline) from tests/data/recorded-schedule:
six real loads on the schedule-check square wave (one-way delay 10 ms, 40 ms at 2 s, a
4 s loop), each anchoring the schedule to the wall clock at its navigation start."""

from __future__ import annotations

from clarke.results import store
from clarke.results.link_timeline import link_schedule_points
from clarke.results.record import RunRecord
from helpers import RECORDED_SCHEDULE


def _records() -> list[RunRecord]:
    _, journal = store.open_existing(RECORDED_SCHEDULE)
    return list(journal.records())


def _forward(records: list[RunRecord]) -> list[tuple[int, float]]:
    out = []
    for p in link_schedule_points(records):
        line = p.to_line_protocol()
        if "direction=forward" in line:
            fields, stamp = line.split(" ")[1:]
            delay = float(fields.split(",")[0].removeprefix("one_way_delay_ms="))
            out.append((int(stamp), delay))
    return sorted(out)


def test_points_cover_the_campaign_and_follow_the_square_wave() -> None:
    records = _records()
    points = _forward(records)
    assert {d for _, d in points} == {10.0, 40.0}
    first = min(r.started_at for r in records).timestamp() * 1e9
    last = max(r.finished_at for r in records).timestamp() * 1e9
    assert abs(points[0][0] - first) < 1e3 and points[-1][0] <= last + 1e3
    # Changes of level, anchored by different loads, fall on one 2 s grid: the loads'
    # anchors agree with one another to within a few ms.
    changes = [t for (t, d), (_, before) in zip(points[1:], points, strict=False) if d != before]
    assert len(changes) >= 8
    offsets = [((t - changes[0]) / 1e6) % 2000 for t in changes]
    assert all(min(o, 2000 - o) < 50 for o in offsets), offsets


def test_each_load_crossed_what_the_schedule_held_during_it() -> None:
    points = _forward(_records())
    for r in _records():
        assert r.details.timeline is not None and r.details.timeline.navigation_unix_ms
        start = r.details.timeline.navigation_unix_ms * 1e6
        end = start + r.metrics["plt_ms"] * 1e6
        held = [d for t, d in points if t <= start][-1:] + [d for t, d in points if start < t < end]
        crossed = (r.metrics["link_delay_forward_min_ms"], r.metrics["link_delay_forward_max_ms"])
        assert min(held) >= crossed[0] - 1 and max(held) <= crossed[1] + 1, (r.run_id, held)


def test_a_changed_schedule_gives_no_points() -> None:
    records = _records()
    for r in records:
        assert r.details.timeline is not None
        r.details.timeline.schedule_id = "other"
    assert link_schedule_points(records) == []
