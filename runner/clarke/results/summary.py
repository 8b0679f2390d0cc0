"""Per-cell statistics of a campaign's successful loads: n, mean, median and the 95 %
confidence interval of the mean (Student's t, as the study reports means over few
repetitions). Failed loads never enter these numbers; they are counted separately.

Every metric summarised is a time, a count or a size: its interval is cut at zero (a t
interval over two loads can reach far below it), and an interval over fewer than
FEW_LOADS loads is marked (`MetricStats.few`): with n = 2, Student's t has one degree of
freedom and the interval is twelve standard errors wide.

With sequential repetitions (clarke.sequential) each cell also says how many loads it
took, why it stopped and its interval for the median that holds under optional stopping
(`CellSummary.stop`), judged again here from the records and the campaign's rule."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clarke import schema
from clarke.campaign.dimensions import Cell
from clarke.campaign.model import Campaign
from clarke.results import store
from clarke.results.metric_families import DEFAULT_FAMILY, FAMILIES, metrics_of_record
from clarke.results.record import RunRecord, Status
from clarke.sequential import Decision, StoppingRule

METRICS = FAMILIES[DEFAULT_FAMILY]
# Both families' metrics, as the per-cell statistics InfluxDB receives.
ALL_FAMILY_METRICS = tuple(dict.fromkeys(m for ms in FAMILIES.values() for m in ms))
# Fewer loads than this, and an interval is marked as resting on too little.
FEW_LOADS = 3


@dataclass(frozen=True)
class MetricStats:
    n: int
    mean: float
    median: float
    ci_low: float  # NaN when n < 2; never below zero
    ci_high: float

    @classmethod
    def of(cls, values: list[float], confidence: float = 0.95) -> MetricStats:
        # scipy.stats takes a second or more to import: every `clarke` command, an
        # agent's `clarke serve` among them, would pay it at start.
        from scipy import stats

        a = np.asarray(values, dtype=float)
        mean, median = float(a.mean()), float(np.median(a))
        if len(a) < 2:
            return cls(len(a), mean, median, math.nan, math.nan)
        half = float(
            stats.t.ppf((1 + confidence) / 2, len(a) - 1) * a.std(ddof=1) / math.sqrt(len(a))
        )
        return cls(len(a), mean, median, max(0.0, mean - half), mean + half)

    @property
    def few(self) -> bool:
        """Too few loads for the interval to mean much (it is still shown, marked)."""
        return self.n < FEW_LOADS


@dataclass(frozen=True)
class CellSummary:
    cell: Cell
    ok: int
    failed: int
    metrics: dict[str, MetricStats]
    stop: Decision | None = None  # sequential repetitions: how the cell ended


def final_attempts(records: Iterable[RunRecord]) -> dict[str, RunRecord]:
    """The last attempt of each run: a run counts once, however often it was retried."""
    last: dict[str, RunRecord] = {}
    for r in records:
        if r.run_id not in last or r.attempt >= last[r.run_id].attempt:
            last[r.run_id] = r
    return last


@dataclass(frozen=True)
class Sequential:
    """A campaign's stopping rule and the runs its plan gave each cell here."""

    rule: StoppingRule
    planned: dict[Cell, int]


def summarise(
    records: Iterable[RunRecord],
    metrics: tuple[str, ...] = METRICS,
    sequential: Sequential | None = None,
) -> list[CellSummary]:
    cells: dict[Cell, list[RunRecord]] = {}
    for r in final_attempts(records).values():
        cells.setdefault(r.cell, []).append(r)
    out = []
    for cell, rs in cells.items():
        ok = [r for r in rs if r.status is Status.ok]
        of_run = [metrics_of_record(r.metrics, r.details.resources) for r in ok]
        stats_by_metric = {}
        for m in metrics:
            values = [ms[m] for ms in of_run if m in ms]
            if values:
                stats_by_metric[m] = MetricStats.of(values)
        stop = None
        if sequential is not None:
            rule = sequential.rule
            values = [r.metrics[rule.metric] for r in ok if rule.metric in r.metrics]
            stop = rule.decide(values, len(rs), sequential.planned.get(cell, rule.maximum))
        out.append(CellSummary(cell, len(ok), len(rs) - len(ok), stats_by_metric, stop))
    return out


def sequential_of(results_dir: Path) -> Sequential | None:
    """The stopping rule of the campaign a results directory ran, with each cell's
    planned runs there (plan.json: a shard's share, or the whole plan); None for fixed
    repetitions or a directory without its campaign file."""
    path = results_dir / store.CAMPAIGN_COPY
    if not path.is_file():
        return None
    rule = schema.read(Campaign, path).stopping
    if rule is None:
        return None
    planned: dict[Cell, int] = {}
    for run in store.read_plan(results_dir).runs:
        cell = Cell.parse(run)
        planned[cell] = planned.get(cell, 0) + 1
    return Sequential(rule, planned)
