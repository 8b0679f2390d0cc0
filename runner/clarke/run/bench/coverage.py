"""Do the intervals of sequential repetitions cover the median they claim to? Figures
from recorded loads.

A population is a recorded cell's successful loads (every cell with at least
`min_loads`), plus one pooled population: every cell's loads over its own median, put
together (so that cells of two or three loads still say what spread a campaign has).
Its median (numpy's: the middle, or the midpoint of the two middle values) is the truth
a trial's interval should contain. One trial draws `maximum` loads from the population
with replacement and takes them one by one as a campaign cell would, asking the stopping
rule (clarke.sequential) after each; it records the load count at the stop, why it
stopped and whether the interval at the stop contains the median.

Beside it, the same trial with the naive rule this module's method guards against: the
fixed-sample 95 % interval for the median (the sign test's order statistics at each n),
looked at after every load and stopped on as soon as it is as narrow as asked.

Caveat printed with the figures: resampling a recorded cell treats its loads as the
whole truth (a discrete distribution with ties, which the method handles: ties only
make a miss rarer); the noise is that of the recorded machine, link and page."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clarke.errors import InputError
from clarke.results import store
from clarke.results.record import Status
from clarke.sequential import StoppingRule, ranks_at_level


@dataclass(frozen=True)
class Population:
    name: str
    values: np.ndarray

    @property
    def median(self) -> float:
        return float(np.median(self.values))


def populations(dirs: list[Path], metric: str = "plt_ms", min_loads: int = 10) -> list[Population]:
    """Each recorded cell with at least `min_loads` successful loads, and the pooled one
    (every cell of two loads or more, each over its median)."""
    cells: dict[str, list[float]] = {}
    for d in dirs:
        _, journal = store.open_existing(d)
        for r in journal.records():
            if r.status is Status.ok and r.metrics.get(metric) is not None:
                # A cell per directory: two campaigns' loads of one cell are not one cell.
                name = r.cell.path if len(dirs) == 1 else f"{d.name}: {r.cell.path}"
                cells.setdefault(name, []).append(float(r.metrics[metric]))
    out = [Population(k, np.asarray(v)) for k, v in cells.items() if len(v) >= min_loads]
    relative = [np.asarray(v) / np.median(v) for v in cells.values() if len(v) >= 2]
    if relative:
        pooled = np.concatenate(relative)
        name = f"pooled: {len(relative)} cells, each over its median"
        out.append(Population(name, pooled))
    if not out:
        raise InputError(f"{', '.join(map(str, dirs))}: no cell has two successful loads")
    return out


@dataclass(frozen=True)
class CoveragePoint:
    population: str
    size: int  # loads in the population
    half_width: float
    trials: int
    covered: float  # share of trials whose interval at the stop holds the median
    mean_loads: float
    precise: float  # share of trials stopped because the interval was narrow enough
    naive_covered: float  # the fixed-sample interval looked at after every load

    @property
    def standard_error(self) -> float:
        return math.sqrt(max(self.covered * (1 - self.covered), 1e-12) / self.trials)


def _naive_stop(
    rule: StoppingRule, draw: np.ndarray, ranks: tuple[int, ...]
) -> tuple[float, float]:
    """The fixed-sample interval at the first n where it is narrow enough (or at max)."""
    low = high = math.nan
    for n in range(1, len(draw) + 1):
        if ranks[n] == 0:
            continue
        ordered = np.sort(draw[:n])
        low, high = float(ordered[ranks[n] - 1]), float(ordered[n - ranks[n]])
        median = float(np.median(ordered))
        narrow = max(median - low, high - median) <= rule.half_width * median
        if n >= rule.minimum and narrow:
            break
    return low, high


def simulate(population: Population, rule: StoppingRule, trials: int, seed: int) -> CoveragePoint:
    rng = np.random.default_rng(seed)
    truth = population.median
    fixed_ranks = ranks_at_level(1 - rule.confidence, rule.maximum)
    covered = naive = precise = 0
    loads = 0
    for _ in range(trials):
        draw = rng.choice(population.values, size=rule.maximum, replace=True)
        loaded: list[float] = draw.tolist()
        for n in range(1, rule.maximum + 1):
            decision = rule.decide(loaded[:n], n)
            if decision.stopped:
                break
        i = decision.interval
        covered += i.bounded and i.low <= truth <= i.high
        precise += decision.stop.value == "precise"
        loads += i.n
        low, high = _naive_stop(rule, draw, fixed_ranks)
        naive += low <= truth <= high
    return CoveragePoint(
        population.name,
        len(population.values),
        rule.half_width,
        trials,
        covered / trials,
        loads / trials,
        precise / trials,
        naive / trials,
    )


def figures(
    dirs: list[Path], rules: list[StoppingRule], trials: int, min_loads: int = 10, seed: int = 0
) -> dict[str, Any]:
    pops = populations(dirs, rules[0].metric, min_loads)
    points = [
        simulate(p, rule, trials, seed + k)
        for k, (p, rule) in enumerate((p, r) for p in pops for r in rules)
    ]
    r0 = rules[0]
    return {
        "recorded": [str(d) for d in dirs],
        "metric": r0.metric,
        "confidence": r0.confidence,
        "min": r0.minimum,
        "max": r0.maximum,
        "trials": trials,
        "earliest": r0.earliest,
        "points": [p.__dict__ | {"standard_error": p.standard_error} for p in points],
        "caveat": (
            "resampled with replacement from recorded loads: each population's median is "
            "the truth; the noise is that of the recorded machine, link and page"
        ),
    }


def render(f: dict[str, Any]) -> str:
    lines = [
        f"Coverage of sequential repetitions' intervals for the median ({f['metric']}, "
        f"{f['confidence']:.0%}, min {f['min']}, max {f['max']}, first interval at "
        f"{f['earliest']} loads; {f['trials']} trials per row)",
        f"from {', '.join(f['recorded'])}",
        "",
        f"{'population':<60} {'loads':>5} {'±':>5} {'covered':>8} {'(se)':>6} "
        f"{'loads/cell':>10} {'precise':>8} {'naive':>7}",
    ]
    for p in f["points"]:
        lines.append(
            f"{p['population'][:60]:<60} {p['size']:>5} {100 * p['half_width']:>4g}% "
            f"{p['covered']:>8.1%} {p['standard_error']:>6.1%} {p['mean_loads']:>10.1f} "
            f"{p['precise']:>8.0%} {p['naive_covered']:>7.1%}"
        )
    lines += [
        "",
        "covered: the interval at the stop holds the population's median; precise: share "
        "stopped because the interval was narrow enough (the rest ran to max); naive: the "
        "fixed-sample interval looked at after every load, stopped on when as narrow.",
        f"caveat: {f['caveat']}.",
    ]
    return "\n".join(lines)
