"""Do the testbeds of a parallel campaign (`clarke run --parallel N`) measure alike?

Each testbed ran a share of every cell's repetitions (campaign.plan.ShardBy.repetition),
so every cell's loads on each testbed are samples of the same distribution unless the
testbeds differ (a slower CPU set, a neighbour's load). Each testbed after the first is
compared with the first, cell by cell, as `clarke compare` compares two campaigns
(run/compare/cells.py: median ratio with a bootstrap CI, Mann-Whitney U with Holm's correction
across the cells, the same threshold and alpha). A (cell, metric) whose verdict is not
`same` disagrees beyond noise and is warned about; one with fewer than
compare.MIN_SAMPLES successful loads on either side is shown (medians) but not judged."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from clarke.campaign.dimensions import Cell
from clarke.results.record import RunRecord
from clarke.results.summary import METRICS
from clarke.run.compare.cells import MIN_SAMPLES, Verdict, cell_samples, compare_cells

TOO_FEW = "too few"


@dataclass(frozen=True)
class Row:
    """One cell's metric on the reference testbed and on another one."""

    cell: Cell
    metric: str
    testbed: str  # the other testbed's lane (its shard label, i/N)
    n_reference: int
    n_testbed: int
    median_reference: float  # NaN without a successful load
    median_testbed: float
    ratio: float  # median_testbed / median_reference
    p_holm: float  # NaN when not judged
    verdict: str  # compare.Verdict's value, or TOO_FEW

    @property
    def disagrees(self) -> bool:
        return self.verdict in (Verdict.slower.value, Verdict.faster.value)


@dataclass(frozen=True)
class TestbedCheck:
    reference: str  # the lane the others are compared with
    lanes: dict[str, list[str]]  # lane -> the testbeds (netns-<id>) that ran its loads
    threshold: float
    alpha: float
    rows: list[Row]

    @property
    def disagreeing(self) -> list[Row]:
        return [r for r in self.rows if r.disagrees]

    @property
    def judged(self) -> int:
        return sum(1 for r in self.rows if r.verdict != TOO_FEW)

    def to_json(self) -> dict[str, Any]:
        def clean(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {
            "reference": self.reference,
            "lanes": self.lanes,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "min_samples": MIN_SAMPLES,
            "judged": self.judged,
            "disagreeing": len(self.disagreeing),
            "rows": [
                {
                    **{k: clean(v) if isinstance(v, float) else v for k, v in asdict(r).items()},
                    "cell": r.cell.texts(),
                }
                for r in self.rows
            ],
        }


def _median(values: list[float]) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def check_testbeds(
    records: list[RunRecord], *, threshold: float = 0.10, alpha: float = 0.05
) -> TestbedCheck:
    """Group the loads by the lane that ran them (each record's `shard`, i/N) and compare
    every lane after the first with the first."""
    by_lane: dict[str, list[RunRecord]] = {}
    names: dict[str, list[str]] = {}
    for r in records:
        by_lane.setdefault(r.shard, []).append(r)
        if r.testbed and r.testbed not in names.setdefault(r.shard, []):
            names[r.shard].append(r.testbed)
    order = sorted(by_lane, key=_lane_key)
    if not order:
        return TestbedCheck("", {}, threshold, alpha, [])
    reference = order[0]
    base = cell_samples(by_lane[reference])
    rows: list[Row] = []
    for lane in order[1:]:
        cur = cell_samples(by_lane[lane])
        judged = {
            (m.cell, m.metric): m
            for m in compare_cells(base, cur, threshold=threshold, alpha=alpha)[0]
        }
        for cell in sorted(base.keys() | cur.keys()):
            for metric in METRICS:
                a = base.get(cell, {}).get(metric, [])
                b = cur.get(cell, {}).get(metric, [])
                ma, mb = _median(a), _median(b)
                j = judged.get((cell, metric))
                rows.append(
                    Row(
                        cell,
                        metric,
                        lane,
                        len(a),
                        len(b),
                        ma,
                        mb,
                        mb / ma if a and b and ma else math.nan,
                        j.p_holm if j else math.nan,
                        j.verdict.value if j else TOO_FEW,
                    )
                )
    lanes = {lane: names.get(lane, []) for lane in order}
    return TestbedCheck(reference, lanes, threshold, alpha, rows)


def _lane_key(label: str) -> tuple[int, str]:
    head = label.partition("/")[0]
    return (int(head), label) if head.isdigit() else (0, label)


def warnings(check: TestbedCheck) -> list[str]:
    """One line per (cell, metric) on which a testbed disagrees with the reference."""
    return [
        f"testbed {r.testbed} vs {check.reference}: {r.cell.path} {r.metric}: median "
        f"{r.median_testbed:,.1f} vs {r.median_reference:,.1f} ms (x{r.ratio:.3f}, "
        f"p (Holm) {r.p_holm:.4f}): {r.verdict}"
        for r in check.disagreeing
    ]
