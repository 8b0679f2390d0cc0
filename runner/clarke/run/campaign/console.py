"""What `clarke run` shows in the terminal: progress while it runs (an Observer of the
loop, which changes nothing) and the summary table at the end."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from clarke.campaign.dimensions import table_columns
from clarke.campaign.plan import Run
from clarke.results.record import RunRecord, Status
from clarke.results.summary import METRICS, CellSummary
from clarke.run.campaign.schedule import LinkCheck


def _fmt(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:,.0f}"


def table(cells: list[CellSummary], title: str) -> Table:
    """One row per cell: the dimensions a results table shows for these cells
    (clarke.campaign.dimensions.table_columns), the loads, then each metric."""
    columns = table_columns([c.cell for c in cells])
    t = Table(title=title, show_lines=False)
    for d in columns:
        t.add_column(d.column, justify="right" if d.numeric else "left")
    for col in ("ok", "failed"):
        t.add_column(col, justify="right")
    for m in METRICS:
        t.add_column(f"{m[:-3].upper()} mean ms", justify="right")
        t.add_column("median", justify="right")
        t.add_column("95 % CI", justify="right")
    for c in cells:
        texts = c.cell.texts()
        row = [texts[d.name] for d in columns] + [str(c.ok), str(c.failed)]
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


class ProgressDisplay:
    """The loop's progress: a bar in a terminal, a line per finished run in a log
    (docker compose logs, CI). A run counts once, when its last attempt is recorded."""

    def __init__(self, console: Console, total: int) -> None:
        self.console, self.total = console, total
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        self.progress = Progress(*columns, console=console, transient=False)
        self.task = self.progress.add_task("runs", total=total)

    def __enter__(self) -> ProgressDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def skipped(self, run: Run) -> None:
        self.progress.advance(self.task)

    def checking(self, check: LinkCheck) -> None:
        self.progress.update(self.task, description=f"checking link {check.profile}")

    def checked(self, check: LinkCheck, result: dict[str, Any]) -> None:
        if result.get("error"):
            self.progress.console.print(f"[yellow]link check failed: {result['error']}[/]")

    def loading(self, run: Run, attempt: int) -> None:
        self.progress.update(self.task, description=run.run_id)

    def recorded(self, record: RunRecord, final: bool) -> None:
        if record.status is Status.failed:
            self.progress.console.print(
                f"[red]{record.run_id} attempt {record.attempt}: {record.reason}[/]"
            )
        if not final:
            return
        self.progress.advance(self.task)
        if not self.console.is_terminal:
            t = self.progress.tasks[0]
            eta = t.time_remaining
            plt = record.metrics.get("plt_ms")
            self.console.print(
                f"[{int(t.completed)}/{self.total}] {record.run_id} {record.status.value}"
                + (f" PLT {plt:.0f} ms" if plt is not None else "")
                + (f", ETA {eta / 60:.0f} min" if eta is not None else "")
            )
