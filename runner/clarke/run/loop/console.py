"""What `clarke run` shows in the terminal: progress while it runs (an Observer of the
loop, which changes nothing) and the summary at the end.

The summary fits a 100-column terminal: one block per metric, each cell in one column
(the values of the dimensions that differ between the cells, joined by `/`; those that
do not are said once above the blocks), then its loads, mean, median and 95 % CI. With
sequential repetitions a last block says how many loads each cell took and why it
stopped. The report (clarke report) and `clarke results export --cells` have the full
table, one column per dimension."""

from __future__ import annotations

import math
from collections.abc import Callable
from time import monotonic

from rich.console import Console, Group, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from clarke.campaign import dimensions
from clarke.campaign.plan import Run
from clarke.results.meta import LinkCheckRecord
from clarke.results.metric_families import LABEL
from clarke.results.record import RunRecord, Status
from clarke.results.summary import FEW_LOADS, METRICS, CellSummary, MetricStats
from clarke.run.loop.eta import TimeLeft
from clarke.run.loop.link_checks import LinkCheck
from clarke.sequential import Decision, Stop

SUMMARY_WIDTH = 100
FEW_MARK = "*"


def _fmt(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:,.0f}"


def ci_text(s: MetricStats) -> str:
    """The 95 % CI as text, marked when it rests on fewer than FEW_LOADS loads."""
    if math.isnan(s.ci_low):
        return "-"
    return f"{_fmt(s.ci_low)} to {_fmt(s.ci_high)}" + (f" {FEW_MARK}" if s.few else "")


def stop_text(d: Decision) -> str:
    """Why a sequential cell stopped, in a few words."""
    if d.stop is Stop.precise:
        return "precise enough"
    if d.stop is Stop.exhausted:
        return f"all {d.tried} runs"
    return "not finished"


def _cells_column(cells: list[CellSummary]) -> tuple[str, list[str], str]:
    """The cells' column: its header, each cell's text, and what every cell shares."""
    every = [c.cell for c in cells]
    if not every:  # no load finished (interrupted at once): nothing is shared
        return "cell", [], ""
    columns = dimensions.table_columns(every)
    varying = [d for d in columns if len({c[d] for c in every}) > 1]
    fixed = [d for d in columns if d not in varying]
    header = "cell (" + "/".join(d.column for d in varying) + ")" if varying else "cell"
    texts = ["/".join(c.cell.texts()[d.name] for d in varying) if varying else "all" for c in cells]
    shared = ", ".join(f"{d.column} {every[0].texts()[d.name]}" for d in fixed)
    return header, texts, shared


def _metric_block(cells: list[CellSummary], metric: str, head: str, texts: list[str]) -> Table:
    t = Table(title=f"{LABEL.get(metric, metric)} (ms)", title_justify="left", box=None)
    t.add_column(head, no_wrap=True)
    for col in ("ok", "failed", "mean", "median", "95 % CI of the mean"):
        t.add_column(col, justify="right", no_wrap=True)
    for c, text in zip(cells, texts, strict=True):
        s = c.metrics.get(metric)
        stats = ["-"] * 3 if s is None else [_fmt(s.mean), _fmt(s.median), ci_text(s)]
        t.add_row(text, str(s.n if s else 0), str(c.failed), *stats)
    return t


def _stop_block(cells: list[CellSummary], head: str, texts: list[str]) -> Table | None:
    stops = [(c, text) for c, text in zip(cells, texts, strict=True) if c.stop is not None]
    if not stops:
        return None
    i0 = stops[0][0].stop
    assert i0 is not None
    title = f"Sequential repetitions: {i0.interval.confidence:.0%} interval for the median"
    t = Table(title=title, title_justify="left", box=None)
    t.add_column(head, no_wrap=True)
    for col in ("loads", "stopped", "median", "interval", "±"):
        t.add_column(col, justify="right", no_wrap=True)
    for c, text in stops:
        d = c.stop
        assert d is not None
        i = d.interval
        interval = f"{_fmt(i.low)} to {_fmt(i.high)}" if i.bounded else "not yet"
        half = f"{i.relative_half_width:.1%}" if i.bounded else "-"
        t.add_row(text, str(i.n), stop_text(d), _fmt(i.median), interval, half)
    return t


def table(cells: list[CellSummary], title: str) -> RenderableType:
    """The summary: one block per metric (and one for sequential repetitions), each
    cell in one column; fits SUMMARY_WIDTH columns."""
    head, texts, shared = _cells_column(cells)
    parts: list[RenderableType] = [Text(title, style="bold")]
    if shared:
        parts.append(Text(f"every cell: {shared}"))
    for m in METRICS:
        parts += [Text(""), _metric_block(cells, m, head, texts)]
    stop = _stop_block(cells, head, texts)
    if stop is not None:
        parts += [Text(""), stop]
    if any(s.few for c in cells for s in c.metrics.values()):
        parts.append(
            Text(
                f"{FEW_MARK} fewer than {FEW_LOADS} loads: Student's t over so few is wide and "
                "rests on normality; take more repetitions before trusting it."
            )
        )
    return Group(*parts)


def print_summary(cells: list[CellSummary], title: str, console: Console | None = None) -> None:
    (console or Console(width=SUMMARY_WIDTH)).print(table(cells, title))


class ProgressDisplay:
    """The loop's progress: a bar in a terminal, a line per finished run in a log
    (docker compose logs, CI). A run counts once, when its last attempt is recorded. The
    time left counts the link checks still to come (eta.py)."""

    def __init__(
        self, console: Console, total: int, checks: int = 0, clock: Callable[[], float] = monotonic
    ) -> None:
        self.console, self.total = console, total
        self.left = TimeLeft(total, checks, clock)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
        )
        self.progress = Progress(*columns, console=console, transient=False)
        self.task = self.progress.add_task("runs", total=total, eta="")

    def eta(self) -> str:
        """`ETA 12 min`, or "" before a run has finished."""
        seconds = self.left.seconds()
        return "" if seconds is None else f"ETA {seconds / 60:.0f} min"

    def __enter__(self) -> ProgressDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def skipped(self, run: Run) -> None:
        self.left.passed_over()
        self.progress.advance(self.task)

    def dropped(self, run: Run) -> None:
        """A run its cell no longer needs: the campaign is that much shorter."""
        self.total -= 1
        self.left.passed_over()
        self.progress.update(self.task, total=self.total)

    def stopped(self, run: Run, decision: Decision) -> None:
        i = decision.interval
        why = (
            f"within ±{i.relative_half_width:.1%} of its median"
            if decision.stop is Stop.precise
            else f"all its {decision.tried} runs tried"
        )
        self.progress.console.print(f"{run.cell.path}: stopped after {i.n} loads, {why}")

    def checking(self, check: LinkCheck) -> None:
        self.left.check_began()
        self.progress.update(self.task, description=f"checking link {check.profile}")

    def checked(self, check: LinkCheck, result: LinkCheckRecord) -> None:
        self.left.check_ended()
        self.progress.update(self.task, eta=self.eta())
        if result.error:
            self.progress.console.print(f"[yellow]link check failed: {result.error}[/]")

    def loading(self, run: Run, attempt: int) -> None:
        self.progress.update(self.task, description=run.run_id)

    def recorded(self, record: RunRecord, final: bool) -> None:
        if record.status is Status.failed:
            self.progress.console.print(
                f"[red]{record.run_id} attempt {record.attempt}: {record.reason}[/]"
            )
        if not final:
            return
        self.left.run_ended()
        eta = self.eta()
        self.progress.update(self.task, advance=1, eta=eta)
        if not self.console.is_terminal:
            t = self.progress.tasks[0]
            plt = record.metrics.get("plt_ms")
            self.console.print(
                f"[{int(t.completed)}/{self.total}] {record.run_id} {record.status.value}"
                + (f" PLT {plt:.0f} ms" if plt is not None else "")
                + (f", {eta}" if eta else "")
            )
