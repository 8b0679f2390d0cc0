"""Comparing two campaigns cell by cell, to catch regressions.

For each matrix cell and metric (PLT, FCP, LCP), over the successful loads:
- effect size: the ratio of medians, current / baseline, with a 95 % bootstrap CI
  (percentile method, seeded, so the same data give the same interval);
- significance: a two-sided Mann-Whitney U test, with Holm's correction across the
  cells, for each metric.

A (cell, metric) is `slower` when its median ratio exceeds 1 + threshold and its
Holm-adjusted p-value is below alpha, `faster` when the ratio is below 1 - threshold and
significant, `same` otherwise. A cell takes its worst verdict. Only `slower` fails."""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np
from scipy import stats

from clarke.campaign.dimensions import BROWSER, Cell
from clarke.errors import InputError
from clarke.json_value import JsonObject
from clarke.results import store
from clarke.results.record import RunRecord, Status
from clarke.results.summary import METRICS, final_attempts

MIN_SAMPLES = 2
BOOTSTRAP_RESAMPLES = 2000


class Verdict(StrEnum):
    faster = "faster"
    same = "same"
    slower = "slower"


@dataclass(frozen=True)
class MetricComparison:
    cell: Cell
    metric: str
    n_baseline: int
    n_current: int
    median_baseline: float
    median_current: float
    ratio: float
    ratio_ci: tuple[float, float]
    p: float
    p_holm: float
    verdict: Verdict


@dataclass(frozen=True)
class Comparison:
    campaign: str
    threshold: float
    alpha: float
    metrics: list[MetricComparison]
    # What was measured with other software in the current results than in the baseline
    # (browser builds, role implementations' versions): said, not judged.
    software_changes: tuple[str, ...] = ()

    def cells(self) -> dict[Cell, Verdict]:
        order = {Verdict.faster: 0, Verdict.same: 1, Verdict.slower: 2}
        out: dict[Cell, Verdict] = {}
        for m in self.metrics:
            prev = out.get(m.cell)
            if prev is None or order[m.verdict] > order[prev]:
                out[m.cell] = m.verdict
        return out

    @property
    def regressed(self) -> bool:
        return any(v is Verdict.slower for v in self.cells().values())

    def to_json(self) -> JsonObject:
        return {
            "campaign": self.campaign,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "regressed": self.regressed,
            "software_changes": list(self.software_changes),
            "cells": [{"cell": c.texts(), "verdict": v.value} for c, v in self.cells().items()],
            "metrics": [
                {
                    **asdict(m),
                    "cell": m.cell.texts(),
                    "verdict": m.verdict.value,
                }
                for m in self.metrics
            ],
        }


def holm(pvalues: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def _median_ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(b, axis=axis) / np.median(a, axis=axis)


def median_ratio_ci(a: np.ndarray, b: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """95 % bootstrap CI (percentile method, seeded: the same data give the same
    interval) of median(b) / median(a)."""
    with warnings.catch_warnings():
        # identical samples give a degenerate (NaN) interval, which is fine to show
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        boot = stats.bootstrap(
            (a, b),
            _median_ratio,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method="percentile",
            vectorized=True,
            rng=np.random.default_rng(seed),
        )
    return float(boot.confidence_interval.low), float(boot.confidence_interval.high)


def cell_samples(records: list[RunRecord]) -> dict[Cell, dict[str, list[float]]]:
    out: dict[Cell, dict[str, list[float]]] = {}
    for r in final_attempts(records).values():
        cell = r.cell
        per = out.setdefault(cell, {m: [] for m in METRICS})
        if r.status is Status.ok:
            for m in METRICS:
                if m in r.metrics:
                    per[m].append(r.metrics[m])
    return out


def compare_records(
    baseline: list[RunRecord],
    current: list[RunRecord],
    *,
    threshold: float = 0.10,
    alpha: float = 0.05,
    seed: int = 0,
) -> Comparison:
    names = {r.campaign for r in baseline} | {r.campaign for r in current}
    if len(names) != 1:
        raise InputError(f"the results are of different campaigns: {', '.join(sorted(names))}")
    base, cur = cell_samples(baseline), cell_samples(current)
    problems = [f"cell {c.path} is in the baseline only" for c in base if c not in cur]
    problems += [f"cell {c.path} is in the current results only" for c in cur if c not in base]
    out, too_few = compare_cells(base, cur, threshold=threshold, alpha=alpha, seed=seed)
    problems += too_few
    if problems:
        raise InputError("unusable input:\n  " + "\n  ".join(problems))
    if not out:
        raise InputError("unusable input: no cell has successful loads in both results")
    return Comparison(names.pop(), threshold, alpha, out, software_changes(baseline, current))


def compare_cells(
    base: dict[Cell, dict[str, list[float]]],
    cur: dict[Cell, dict[str, list[float]]],
    *,
    threshold: float = 0.10,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[list[MetricComparison], list[str]]:
    """Every (cell, metric) that both sides have with MIN_SAMPLES successful loads or more,
    judged; and one line for each that has fewer on a side (not judged)."""
    problems: list[str] = []
    rows = []
    for cell in base:
        if cell not in cur:
            continue
        for m in METRICS:
            a, b = np.asarray(base[cell][m]), np.asarray(cur[cell][m])
            if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
                problems.append(
                    f"cell {cell.path}: {m} has {len(a)} baseline and {len(b)} "
                    f"current successful loads; {MIN_SAMPLES} or more of each needed"
                )
                continue
            p = float(stats.mannwhitneyu(b, a, alternative="two-sided").pvalue)
            rows.append((cell, m, a, b, p, median_ratio_ci(a, b, seed)))
    # Holm's correction across the cells, for each metric: the family of tests that asks
    # "did any cell get slower in PLT?" (FCP and LCP are their own families; on these pages
    # they are near-identical, so correcting across them too would only cost power).
    adjusted = [0.0] * len(rows)
    for metric in METRICS:
        idx = [i for i, r in enumerate(rows) if r[1] == metric]
        for i, p_adj in zip(idx, holm([rows[i][4] for i in idx]), strict=True):
            adjusted[i] = p_adj
    out = []
    for (cell, m, a, b, p, ci), p_adj in zip(rows, adjusted, strict=True):
        ratio = float(np.median(b) / np.median(a))
        significant = p_adj < alpha
        if significant and ratio > 1 + threshold:
            verdict = Verdict.slower
        elif significant and ratio < 1 - threshold:
            verdict = Verdict.faster
        else:
            verdict = Verdict.same
        out.append(
            MetricComparison(
                cell,
                m,
                len(a),
                len(b),
                float(np.median(a)),
                float(np.median(b)),
                ratio,
                ci,
                p,
                p_adj,
                verdict,
            )
        )
    return out, problems


def _software(records: list[RunRecord]) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for r in records:
        if r.browser_version:
            seen.setdefault(BROWSER.text(r.cell[BROWSER]), set()).add(r.browser_version)
        for name, version in r.versions.items():
            if version and not name.startswith("clarke_"):
                seen.setdefault(name, set()).add(version)
    return seen


def software_changes(baseline: list[RunRecord], current: list[RunRecord]) -> tuple[str, ...]:
    """One line for every browser or role implementation whose version (a Nightly's build
    id among them) differs between the baseline and the current results."""
    base, cur = _software(baseline), _software(current)
    return tuple(
        f"{name}: baseline {', '.join(sorted(base.get(name, set())) or ['-'])}, "
        f"current {', '.join(sorted(cur.get(name, set())) or ['-'])}"
        for name in sorted(base.keys() | cur.keys())
        if base.get(name, set()) != cur.get(name, set())
    )


def read_results(d: Path) -> list[RunRecord]:
    _, journal = store.open_existing(d)
    return list(journal.records())


def markdown(c: Comparison) -> str:
    lines = [
        f"### Clarke: {c.campaign}: {'REGRESSION' if c.regressed else 'no regression'}",
        "",
        f"Slower means a median more than {c.threshold:.0%} above the baseline with a "
        f"Holm-adjusted Mann-Whitney p below {c.alpha}.",
        "",
        "| cell | metric | baseline median ms | current median ms | ratio | 95 % CI "
        "| p (Holm) | verdict |",
        "|---|---|---:|---:|---:|---|---:|---|",
    ]
    if c.software_changes:
        lines[2:2] = [
            "Measured with other software than the baseline:",
            "",
            *(f"- {line}" for line in c.software_changes),
            "",
        ]
    for m in c.metrics:
        ci = (
            "-"
            if any(math.isnan(x) for x in m.ratio_ci)
            else f"{m.ratio_ci[0]:.3f} to {m.ratio_ci[1]:.3f}"
        )
        mark = "**slower**" if m.verdict is Verdict.slower else m.verdict.value
        lines.append(
            f"| {m.cell.path} | {m.metric} | {m.median_baseline:,.1f} | "
            f"{m.median_current:,.1f} | {m.ratio:.3f} | {ci} | {m.p_holm:.4f} | {mark} |"
        )
    return "\n".join(lines) + "\n"
