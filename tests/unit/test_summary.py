"""Per-cell statistics: the last attempt of each run counts once; failed loads never
enter the numbers; the CI is Student's t."""

from __future__ import annotations

import math

from clarke.results.record import Status
from clarke.results.summary import MetricStats, summarise
from helpers import record


def test_t_interval() -> None:
    s = MetricStats.of([1.0, 2.0, 3.0])
    assert (s.n, s.mean, s.median) == (3, 2.0, 2.0)
    assert math.isclose(s.ci_high - s.mean, 4.302652729911275 / math.sqrt(3), rel_tol=1e-9)
    assert math.isnan(MetricStats.of([5.0]).ci_low)


def test_summary_counts_final_attempts_and_ignores_failures() -> None:
    ok = [record(i) for i in range(4)]
    retried = record(4, status=Status.failed)
    retried_ok = record(4).model_copy(update={"attempt": 2})
    failed = record(5, status=Status.failed)
    cells = summarise([*ok, retried, retried_ok, failed])
    assert len(cells) == 1
    c = cells[0]
    assert (c.ok, c.failed) == (5, 1)
    assert c.metrics["plt_ms"].n == 5
    assert c.metrics["plt_ms"].mean == sum(100.0 + i for i in range(5)) / 5


def test_a_summary_of_no_load_prints_without_a_cell() -> None:
    """A campaign interrupted before its first load finished has no cell to show: the
    summary says so instead of failing (the outcome is still printed after it)."""
    import io

    from rich.console import Console

    from clarke.run.loop.console import print_summary

    out = io.StringIO()
    print_summary([], "interrupted: per cell", Console(file=out, width=100))
    assert "interrupted: per cell" in out.getvalue()
