"""What can `clarke compare` detect when the family is the recorded campaign itself?

`power.simulate` draws the C - 1 unchanged cells of a night from whichever recorded cells
there are (2, for tests/data/recorded-repeats), so every cell of the family has the noise
of those few. When the recorded campaign is the nightly's own (every one of its cells with
2n or more loads), the family can be the real one: one trial (a simulated night) splits
every recorded cell's loads at random into a disjoint baseline and current of n loads, and
- the null night: nothing slowed; a false alarm is any cell flagged `slower` (the only
  verdict that fails the nightly) by compare's rule, a two-sided Mann-Whitney p-value
  Holm-adjusted over all the cells below alpha and a median ratio above 1 + threshold;
- for a slowdown s and each cell k in turn: cell k's current PLTs multiplied by s, the
  others unchanged; detected when cell k is flagged `slower`. `alone` applies the same
  rule to cell k by itself (a family of one: no Holm correction).

Detection rates are averaged over the trials and the cells (each cell slowed equally
often); `worst_cell` is the lowest rate of any one cell, the one the nightly is least
likely to catch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from clarke.run.bench.power import Trials, check_loads, not_reached, smallest_p


@dataclass(frozen=True)
class FamilyPoint:
    n: int
    cells: int  # the family: every recorded cell
    slowdown: float
    alone: float  # slowed cell flagged when compared by itself (family of one)
    detected: float  # slowed cell flagged among all the cells (Holm over all)
    worst_cell: float  # the lowest per-cell `detected`


def holm_rows(p: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values of every row of `p` (trials x cells), in the
    input order: `clarke.run.compare.cells.holm` on each row, vectorized."""
    m = p.shape[1]
    order = np.argsort(p, axis=1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=1)
    adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ranked), axis=1)
    out = np.empty_like(p)
    np.put_along_axis(out, order, adjusted, axis=1)
    return out


def _split_all(
    rng: np.random.Generator, cells: list[np.ndarray], n: int, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """`count` nights: for every cell, a random baseline and a disjoint current of n
    of its own loads; arrays of shape (cells, count, n)."""
    base = np.empty((len(cells), count, n))
    cur = np.empty((len(cells), count, n))
    for k, loads in enumerate(cells):
        for t in range(count):
            perm = rng.permutation(loads)
            base[k, t], cur[k, t] = perm[:n], perm[n : 2 * n]
    return base, cur


def _mwu(cur: np.ndarray, base: np.ndarray) -> np.ndarray:
    return np.asarray(stats.mannwhitneyu(cur, base, alternative="two-sided", axis=-1).pvalue)


def simulate_family(
    cells: dict[str, np.ndarray], ns: list[int], slowdowns: list[float], how: Trials
) -> tuple[list[FamilyPoint], dict[int, float]]:
    """The detection curve of every n, and the null night's false-alarm rate of every n."""
    samples = list(cells.values())
    check_loads(samples, ns)
    family, limit = len(samples), 1 + how.threshold
    points: list[FamilyPoint] = []
    false_alarm: dict[int, float] = {}
    for n in ns:
        rng = np.random.default_rng([how.seed, n, family, 1])
        base, cur = _split_all(rng, samples, n, how.count)
        ratio = (np.median(cur, axis=-1) / np.median(base, axis=-1)).T  # trials x cells
        null_p = _mwu(cur, base).T
        null_flags = (holm_rows(null_p) < how.alpha) & (ratio > limit)
        false_alarm[n] = float(null_flags.any(axis=1).mean())
        for s in slowdowns:
            slowed_p = _mwu(cur * s, base).T
            slowed_ratio = ratio * s
            per_cell = np.empty(family)
            for k in range(family):
                p = null_p.copy()
                p[:, k] = slowed_p[:, k]
                per_cell[k] = np.mean(
                    (holm_rows(p)[:, k] < how.alpha) & (slowed_ratio[:, k] > limit)
                )
            alone = np.mean((slowed_p < how.alpha) & (slowed_ratio > limit))
            points.append(
                FamilyPoint(
                    n, family, s, float(alone), float(per_cell.mean()), float(per_cell.min())
                )
            )
    return points, false_alarm


def _first(points: list[FamilyPoint], n: int, power: float, field: str) -> float | None:
    for p in sorted((p for p in points if p.n == n), key=lambda p: p.slowdown):
        if getattr(p, field) >= power:
            return p.slowdown
    return None


def family_figures(
    cells: dict[str, np.ndarray],
    ns: list[int],
    slowdowns: list[float],
    at: list[float],
    how: Trials,
    power: float,
) -> dict[str, Any]:
    """The figures of `simulate_family` over `slowdowns` and the fixed slowdowns `at`."""
    grid = sorted(set(slowdowns) | set(at))
    points, false_alarm = simulate_family(cells, ns, grid, how)
    fields = ("alone", "detected", "worst_cell")
    return {
        "family": len(cells),
        "smallest_p": {n: smallest_p(n) for n in ns},
        "min_detectable": {n: {f: _first(points, n, power, f) for f in fields} for n in ns},
        "detection_at": {
            n: {s: next(p.__dict__ for p in points if p.n == n and p.slowdown == s) for s in at}
            for n in ns
        },
        "false_alarm": false_alarm,
        "points": [p.__dict__ for p in points],
    }


def _pct(v: float | None) -> str:
    return "none" if v is None else "+" + format(v - 1, ".1%")


def render_family(f: dict[str, Any], power: float) -> list[str]:
    c = f["family"]
    lines = [
        f"family: the {c} recorded cells, each with its own loads; one slowed at a time",
        "",
        f"minimum PLT slowdown detected in >= {power:.0%} of trials:",
        "  n per cell  smallest p   alone (C=1)  "
        f"any cell, C={c} (mean)  worst cell   false alarms per night (C={c})",
    ]
    for n, row in f["min_detectable"].items():
        lines.append(
            f"  {n:>10}  {f['smallest_p'][n]:>10.2e}   {_pct(row['alone']):<11}  "
            f"{_pct(row['detected']):<21}  {_pct(row['worst_cell']):<11}  "
            f"{f['false_alarm'][n]:.1%}"
        )
    lines.append(not_reached(f))
    at: dict[float, Any] = next(iter(f["detection_at"].values()), {})
    if at:
        lines += ["", "detection rate at fixed slowdowns (alone / any cell mean / worst cell):"]
        for n, row in f["detection_at"].items():
            cols = "   ".join(
                f"{_pct(s)}: {p['alone']:.0%} / {p['detected']:.0%} / {p['worst_cell']:.0%}"
                for s, p in row.items()
            )
            lines.append(f"  n={n:<3} {cols}")
    return lines
