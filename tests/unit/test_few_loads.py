"""A cell with very few loads: its 95 % CI of the mean never reaches below zero (every
metric summarised is a time, a count or a size), and it is marked when it rests on fewer
than three loads, in the summary, the console, the report and the per-cell export."""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from clarke.cli import cli
from clarke.report import html
from clarke.results.record import RunRecord
from clarke.results.summary import FEW_LOADS, MetricStats, summarise
from clarke.run.loop.console import FEW_MARK, table
from helpers import record

DATA = Path(__file__).resolve().parents[1] / "data"


def _two_loads() -> list[RunRecord]:
    """Two loads 557 ms apart: Student's t with one degree of freedom reaches far below
    zero (the unclipped interval is about -460 to 6,617 ms)."""
    a, b = record(0), record(1)
    return [
        a.model_copy(update={"metrics": {**a.metrics, "plt_ms": 2800.0}}),
        b.model_copy(update={"metrics": {**b.metrics, "plt_ms": 3357.0}}),
    ]


def test_the_interval_is_cut_at_zero_and_marked_under_three_loads() -> None:
    s = MetricStats.of([2800.0, 3357.0])
    assert s.ci_low == 0.0 and math.isclose(
        s.ci_high, 3078.5 + 12.706204736 * 557 / 2, rel_tol=1e-6
    )
    assert s.few and FEW_LOADS == 3
    three = MetricStats.of([2800.0, 3357.0, 3000.0])
    assert not three.few and three.ci_low > 0
    # A tight interval is left as it is.
    tight = MetricStats.of([1000.0, 1010.0, 990.0])
    assert math.isclose(tight.ci_low, 1000 - 4.302652729911275 * 10 / math.sqrt(3))


def test_the_console_marks_it() -> None:
    console = Console(width=300, record=True)
    console.print(table(summarise(_two_loads()), "t"))
    text = console.export_text()
    plt_rows = [line for line in text.splitlines() if "6,617" in line]
    assert plt_rows and all(line.rstrip().endswith(f"0 to 6,617 {FEW_MARK}") for line in plt_rows)
    assert f"{FEW_MARK} fewer than 3 loads" in text
    assert "-460" not in text


def test_the_console_leaves_three_loads_unmarked() -> None:
    console = Console(width=300, record=True)
    console.print(table(summarise([record(i) for i in range(3)]), "t"))
    assert "fewer than 3 loads" not in console.export_text()


def test_the_report_and_the_cells_export_mark_it(tmp_path: Path) -> None:
    d = tmp_path / "r"
    shutil.copytree(DATA / "recorded-lan", d)  # 22 cells of two loads each
    page = html.build(d)
    assert page.count('class="few"') >= 22 and "(n=2)" in page
    out = CliRunner().invoke(cli, ["results", "export", str(d), "--cells"])
    assert out.exit_code == 0, out.output
    with (d / "cells.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 22
    for row in rows:
        assert row["plt_ms_n"] == "2" and row["plt_ms_few"] == "True"
        assert float(row["plt_ms_ci_low"]) >= 0
