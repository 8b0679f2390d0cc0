"""A campaign's time left counts its link checks still to come (run/loop/eta.py)."""

from __future__ import annotations

from clarke.results.meta import LinkCheckRecord
from clarke.run.loop.eta import TimeLeft


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_time_left_is_runs_at_their_pace_plus_checks_at_theirs() -> None:
    """Two link points of two runs each: check, run, run, check | check, run, run, check.
    After the first point (a 60 s check, two 3 s runs, a 60 s check) what is left is two
    runs and two checks: 2 x 3 + 2 x 60 s. A rate of runs alone would say 6 s."""
    clock = Clock()
    left = TimeLeft(runs=4, checks=4, clock=clock)
    assert left.seconds() is None  # nothing finished yet
    left.check_began()
    clock.now += 60
    left.check_ended()
    for _ in range(2):
        clock.now += 3
        left.run_ended()
    left.check_began()
    clock.now += 60
    left.check_ended()
    assert left.seconds() == 2 * 3 + 2 * 60
    assert (left.runs_left, left.checks_left) == (2, 2)


def test_runs_passed_over_are_not_waited_for_and_the_end_is_zero() -> None:
    clock = Clock()
    left = TimeLeft(runs=3, checks=0, clock=clock)
    left.passed_over()  # done by an earlier invocation
    clock.now += 5
    left.run_ended()
    assert left.seconds() == 5
    clock.now += 7
    left.run_ended()
    assert left.seconds() == 0


def test_the_log_line_of_a_run_gives_the_time_left_with_the_checks() -> None:
    """What `clarke run` prints per run in a log (docker compose logs, a study's shard):
    after a 100 s check and a 4 s run, one run and three checks are left."""
    import io

    from rich.console import Console

    from clarke.run.loop.console import ProgressDisplay
    from clarke.run.loop.link_checks import LinkCheck
    from helpers import record

    clock, out = Clock(), io.StringIO()
    display = ProgressDisplay(Console(file=out, width=200), total=2, checks=4, clock=clock)
    check = LinkCheck("lan", "before")
    with display:
        display.checking(check)
        clock.now += 100
        display.checked(check, LinkCheckRecord(phase="before", profile="lan"))
        clock.now += 4
        display.recorded(record(0), final=True)
    assert "[1/2] lan-h2-bbr-uniform-100k-r1 ok" in out.getvalue()
    assert "ETA 5 min" in out.getvalue(), out.getvalue()  # 4 s + 3 x 100 s
