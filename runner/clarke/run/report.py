"""The end-of-campaign summary table, printed to the terminal."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from clarke.run.summary import METRICS, CellSummary


def _fmt(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:,.0f}"


def table(cells: list[CellSummary], title: str) -> Table:
    t = Table(title=title, show_lines=False)
    for col in ("profile", "http", "cc", "page", "ok", "failed"):
        t.add_column(col, justify="right" if col in ("ok", "failed") else "left")
    for m in METRICS:
        t.add_column(f"{m[:-3].upper()} mean ms", justify="right")
        t.add_column("median", justify="right")
        t.add_column("95 % CI", justify="right")
    for c in cells:
        profile, http, cc, model, size = c.cell
        row = [profile, http, cc, f"{model}-{size}", str(c.ok), str(c.failed)]
        for m in METRICS:
            s = c.metrics.get(m)
            if s is None:
                row += ["-", "-", "-"]
            else:
                ci = "-" if math.isnan(s.ci_low) else f"{_fmt(s.ci_low)} to {_fmt(s.ci_high)}"
                row += [_fmt(s.mean), _fmt(s.median), ci]
        t.add_row(*row)
    return t


def print_summary(cells: list[CellSummary], title: str, console: Console | None = None) -> None:
    (console or Console(width=200)).print(table(cells, title))
