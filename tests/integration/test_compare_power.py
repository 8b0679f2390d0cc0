"""The power simulation behind `clarke bench compare-power`, on the recorded loads: it
must flag no more than alpha without a slowdown, everything with a doubling, and respect the
Mann-Whitney floor (n=5 with 12 cells can never be significant)."""

from __future__ import annotations

import math
from pathlib import Path

from clarke.run.bench.power import Trials, recorded_cells, simulate, smallest_p

RECORDED = Path("tests/data/recorded-repeats")


def test_no_slowdown_is_not_detected_and_a_doubling_is() -> None:
    cells = recorded_cells(RECORDED)
    assert sorted(len(v) for v in cells.values()) == [20, 20]
    pts = {p.slowdown: p for p in simulate(cells, [10], [1], [1.0, 2.0], Trials(count=200))}
    assert pts[1.0].detected <= 0.05  # a test of size alpha: false alarms at most alpha
    assert pts[2.0].detected == 1.0


def test_five_loads_per_cell_cannot_pass_holm_over_twelve_cells() -> None:
    assert math.isclose(smallest_p(5), 2 / 252)
    assert smallest_p(5) > 0.05 / 12
    pts = simulate(recorded_cells(RECORDED), [5], [12], [3.0], Trials(count=50))
    assert pts[0].detected == 0.0


# Both command lines: 8 loads per cell, 60 trials.
POWER = ("bench", "compare-power", "-n", "8", "--trials", "60")


def test_cli_prints_the_table(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli(*POWER, "--cells", "2", "--at", "1.05", "--max-slowdown", "1.6")
    assert code == 0, out
    assert "n per cell" in out and "C=2" in out
    assert "detection rate, n=8, C=2: +5%:" in out
    assert "not reached up to +60%" in out


def test_cli_prints_the_recorded_family(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli(*POWER, "--family", "recorded", "--at", "1.1", "--step", "0.05")
    assert code == 0, out
    assert "family: the 2 recorded cells" in out
    assert "false alarms per night (C=2)" in out and "n=8   +10.0%:" in out
