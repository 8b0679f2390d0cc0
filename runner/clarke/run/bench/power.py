"""What can `clarke compare` detect with n loads per cell? Figures from recorded loads.

Simulation on a recorded campaign with many repetitions of a few cells (by default
tests/data/recorded-repeats: 2 cells x 20 real loads). One trial of (n, family size C,
slowdown s):
- pick a recorded cell, split its loads at random into a baseline of n and a disjoint
  current of n, and multiply the current PLTs by s (the injected slowdown);
- draw C - 1 further null comparisons the same way, without a slowdown, from random
  recorded cells: the other cells of a nightly, which Holm's correction has to pay for;
- decide the slowed cell as `clarke compare` does: a two-sided Mann-Whitney U p-value,
  Holm-adjusted over the C cells, below alpha, and a median ratio above 1 + threshold.

The detection rate is the share of trials that flag the slowed cell; the minimum
detectable slowdown is the smallest s whose rate reaches `power` (80 % by default). The
null cells also give the false-alarm rate of a whole nightly (any null cell flagged).

Caveat printed with the figures: the noise is that of the recorded loads (their
machine, link and page); a slowdown is modelled as a scale factor on every load."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from clarke.errors import InputError
from clarke.results import store
from clarke.results.record import Status
from clarke.run.compare.cells import holm


@dataclass(frozen=True)
class PowerPoint:
    n: int
    cells: int
    slowdown: float
    detected: float  # share of trials that flag the slowed cell
    false_alarm: float  # share of trials where any null cell is flagged


def recorded_cells(results_dir: Path, metric: str = "plt_ms") -> dict[str, np.ndarray]:
    _, journal = store.open_existing(results_dir)
    out: dict[str, list[float]] = {}
    for r in journal.records():
        if r.status is Status.ok and metric in r.metrics:
            out.setdefault(r.cell.path, []).append(r.metrics[metric])
    return {k: np.asarray(v) for k, v in out.items()}


def split_pairs(
    rng: np.random.Generator, cells: list[np.ndarray], n: int, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """`count` random (baseline, current) pairs of n disjoint loads of one random cell."""
    base = np.empty((count, n))
    cur = np.empty((count, n))
    picks = rng.integers(0, len(cells), size=count)
    for i, c in enumerate(picks):
        perm = rng.permutation(cells[c])
        base[i], cur[i] = perm[:n], perm[n : 2 * n]
    return base, cur


@dataclass(frozen=True)
class Trials:
    """How the nightly check is simulated: `count` trials per point, a cell flagged
    when its Holm-adjusted p < `alpha` and its median ratio beyond 1 + `threshold`."""

    count: int = 400
    threshold: float = 0.10
    alpha: float = 0.05
    seed: int = 0


def check_loads(samples: list[np.ndarray], ns: list[int]) -> None:
    """InputError unless every recorded cell has 2n loads for every n asked (a night's
    baseline and current halves are disjoint)."""
    smallest = min(len(s) for s in samples)
    for n in ns:
        if 2 * n > smallest:
            raise InputError(
                f"n={n} needs {2 * n} loads per recorded cell (baseline and current "
                f"disjoint); the smallest cell has {smallest}"
            )


def simulate(
    cells: dict[str, np.ndarray],
    ns: list[int],
    families: list[int],
    slowdowns: list[float],
    how: Trials = Trials(),
) -> list[PowerPoint]:
    trials, threshold, alpha, seed = how.count, how.threshold, how.alpha, how.seed
    samples = list(cells.values())
    check_loads(samples, ns)
    out: list[PowerPoint] = []
    for n in ns:
        for family in families:
            rng = np.random.default_rng([seed, n, family])
            # Null comparisons are shared by every slowdown of this (n, C): the same
            # family, only the slowed cell changes, so the curve is monotone in s.
            nb, nc = split_pairs(rng, samples, n, trials * (family - 1))
            null_p = stats.mannwhitneyu(nc, nb, alternative="two-sided", axis=1).pvalue
            null_p = null_p.reshape(trials, family - 1)
            null_ratio = (np.median(nc, axis=1) / np.median(nb, axis=1)).reshape(trials, family - 1)
            base, cur = split_pairs(rng, samples, n, trials)
            for s in slowdowns:
                p = stats.mannwhitneyu(cur * s, base, alternative="two-sided", axis=1).pvalue
                ratio = np.median(cur * s, axis=1) / np.median(base, axis=1)
                hits = alarms = 0
                for t in range(trials):
                    adj = holm([float(p[t]), *map(float, null_p[t])])
                    hits += adj[0] < alpha and ratio[t] > 1 + threshold
                    alarms += any(
                        a < alpha and abs(r - 1) > threshold
                        for a, r in zip(adj[1:], null_ratio[t], strict=True)
                    )
                out.append(PowerPoint(n, family, s, hits / trials, alarms / trials))
    return out


def min_detectable(points: list[PowerPoint], n: int, cells: int, power: float) -> float | None:
    for p in sorted((p for p in points if p.n == n and p.cells == cells), key=lambda p: p.slowdown):
        if p.detected >= power:
            return p.slowdown
    return None


def smallest_p(n: int) -> float:
    """The smallest two-sided exact Mann-Whitney p-value with n loads on each side."""
    return 2 / math.comb(2 * n, n)


def slowdown_grid(max_slowdown: float, step: float) -> list[float]:
    return [round(1 + i * step, 4) for i in range(round((max_slowdown - 1) / step) + 1)]


def describe(
    results_dir: Path, cells: dict[str, np.ndarray], how: Trials, power: float
) -> dict[str, Any]:
    """What the figures were computed from and with."""
    return {
        "recorded": str(results_dir),
        "cells": {
            k: {
                "loads": len(v),
                "median_ms": float(np.median(v)),
                "cv": float(v.std(ddof=1) / v.mean()),
            }
            for k, v in cells.items()
        },
        "trials": how.count,
        "power": power,
        "threshold": how.threshold,
        "alpha": how.alpha,
    }


def not_reached(f: dict[str, Any]) -> str:
    return f"(none: not reached up to +{max(p['slowdown'] for p in f['points']) - 1:.0%})"


def load_cells(results_dir: Path, only: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """The recorded cells' PLTs; with `only`, those cells alone (each must be there)."""
    cells = recorded_cells(results_dir)
    if not cells:
        raise InputError(f"{results_dir}: no successful loads with plt_ms")
    if missing := [c for c in only if c not in cells]:
        raise InputError(
            f"--cell {missing[0]}: no successful loads of that cell in {results_dir} (its "
            f"cells: {', '.join(sorted(cells))})"
        )
    return {k: v for k, v in cells.items() if k in only} if only else cells


def figures(
    cells: dict[str, np.ndarray],
    ns: list[int],
    families: list[int],
    how: Trials,
    power: float,
    grid: tuple[float, float] = (2.0, 0.02),
    at: tuple[float, ...] = (),
) -> dict[str, Any]:
    """`grid`: the largest slowdown tried and the step between slowdowns; `at`: slowdowns
    whose detection rates are reported as they are. Beside `describe`'s."""
    slowdowns = sorted(set(slowdown_grid(*grid)) | set(at))
    points = simulate(cells, ns, families, slowdowns, how)
    return {
        "smallest_p": {n: smallest_p(n) for n in ns},
        "detection_at": {
            n: {
                c: {
                    s: next(p.detected for p in points if (p.n, p.cells, p.slowdown) == (n, c, s))
                    for s in at
                }
                for c in families
            }
            for n in ns
        },
        "min_detectable": {
            n: {c: min_detectable(points, n, c, power) for c in families} for n in ns
        },
        "false_alarm": {
            n: {
                c: next(p.false_alarm for p in points if p.n == n and p.cells == c)
                for c in families
            }
            for n in ns
        },
        "points": [p.__dict__ for p in points],
    }


def render_header(f: dict[str, Any]) -> list[str]:
    return [
        f"recorded loads: {f['recorded']}",
        *(
            f"  {k}: {v['loads']} loads, median {v['median_ms']:.1f} ms, "
            f"coefficient of variation {v['cv']:.1%}"
            for k, v in f["cells"].items()
        ),
        f"{f['trials']} trials per point; slowed cell flagged when the Holm-adjusted "
        f"Mann-Whitney p < {f['alpha']} and the median ratio > {1 + f['threshold']:.2f}",
    ]


def render(f: dict[str, Any]) -> str:
    families = next(iter(f["min_detectable"].values())).keys()
    lines = [
        *render_header(f),
        "",
        f"minimum PLT slowdown detected in >= {f['power']:.0%} of trials "
        "(one slowed cell among C cells):",
        "  n per cell  smallest p  " + "".join(f"  C={c:<6}" for c in families),
    ]
    for n, row in f["min_detectable"].items():
        cols = "".join(
            f"  {('+' + format(v - 1, '.0%')) if v else 'none':<8}" for v in row.values()
        )
        lines.append(f"  {n:>10}  {f['smallest_p'][n]:>10.2e}  {cols}")
    lines += ["", "false alarms (any of the C - 1 unchanged cells flagged), per nightly:"]
    for n, row in f["false_alarm"].items():
        lines.append(f"  n={n:<3}" + "".join(f"  C={c}: {v:.1%}" for c, v in row.items()))
    lines.append(not_reached(f))
    for n, row in f["detection_at"].items():
        for c, rates in row.items():
            if rates:
                cols = "  ".join(f"+{s - 1:.0%}: {r:.0%}" for s, r in rates.items())
                lines.append(f"detection rate, n={n}, C={c}: {cols}")
    return "\n".join(lines)
