"""Sequential repetitions: an interval for a cell's median that stays valid however the
decision to stop taking loads was made, and the stopping rule built on it.

A cell with sequential repetitions keeps getting loads until this interval is within
±h of its median, or until its last planned run (docs/campaigns.md). Looking after every
load and stopping when the interval looks narrow biases the usual fixed-sample
intervals (they are too narrow at the moment they are looked at: Armitage, McPherson &
Rowe 1969; Jennison & Turnbull 2000, table 9.1), so the interval here is a *repeated
confidence interval*: one interval for every load count n = 1..N (N the cell's planned
runs) that covers the median at every n at once with probability >= 1 - alpha. Then
the interval at any stopping time, whatever rule chose it, covers with probability
>= 1 - alpha (Jennison & Turnbull 2000, eq. 9.2).

The interval at n loads is a pair of order statistics [X_(l), X_(n+1-l)], as the
fixed-sample distribution-free interval for a median is (the sign test's). Its lower end
lies above the median m exactly when fewer than l of the n loads are <= m. That count is
a random walk S_n with Bernoulli(1/2) steps whatever the distribution of the loads (for
a continuous one; ties or a discrete distribution make a step up at least as likely,
which only makes a miss rarer), so the probability that the lower end misses at *some*
n <= N is a boundary-crossing probability of a fair random walk, computed exactly here
by the recursion of Armitage, McPherson & Rowe (1969) over the walk's distribution. The
ranks l_n use one nominal level at every n (Pocock 1977), the largest level for which
that probability is <= alpha/2; the upper end is its mirror image. No assumption about
the shape of the loads' distribution: heavy tails, outliers and several modes are
allowed, which is why the median and not the mean (a mean's confidence sequence needs a
known bound on the data or on its moments: Howard et al. 2021; Wang & Ramdas 2023).
This is the finite-horizon, exact counterpart of the quantile confidence sequences of
Howard & Ramdas (2022).

The price of the guarantee: no interval exists until 2^(1-n) <= the nominal level; at
95 % and N = 30 the first one is the range of 7 loads, and at n = 30 it is
[X_(8), X_(23)] (a fixed 30 would give [X_(10), X_(21)]).

    Armitage, McPherson & Rowe, Repeated significance tests on accumulating data,
        J. R. Statist. Soc. A 132(2), 1969.
    Pocock, Group sequential methods in the design and analysis of clinical trials,
        Biometrika 64(2), 1977.
    Jennison & Turnbull, Group Sequential Methods with Applications to Clinical Trials,
        Chapman & Hall/CRC, 2000, chapter 9 (repeated confidence intervals).
    Howard & Ramdas, Sequential estimation of quantiles with applications to
        A/B-testing and best-arm identification, Bernoulli 28(3), 2022.
    Howard, Ramdas, McAuliffe & Sekhon, Time-uniform, nonparametric, nonasymptotic
        confidence sequences, Ann. Statist. 49(2), 2021."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

# The most runs a sequential cell may plan (the exact computation takes 0.15 s at 300).
MAX_HORIZON = 300
# Float safety for the crossing probability (its rounding error is far below this).
_SLACK = 1e-12


def _binomial_cdf(n: int) -> list[float]:
    """P(Bin(n, 1/2) <= k) for k = 0..n, from exact integers."""
    total, out = 0, []
    for k in range(n + 1):
        total += math.comb(n, k)
        out.append(total / 2**n)
    return out


@functools.cache
def _cdfs(horizon: int) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(_binomial_cdf(n)) for n in range(horizon + 1))


def ranks_at_level(level: float, horizon: int) -> tuple[int, ...]:
    """The fixed-sample ranks at two-sided nominal `level`: l_n for n = 0..horizon, the
    largest l with P(Bin(n, 1/2) <= l - 1) <= level / 2 (0: no bounded interval)."""
    out = []
    for cdf in _cdfs(horizon):
        n = len(cdf) - 1
        rank = 0
        while rank < (n + 1) // 2 and cdf[rank] <= level / 2:
            rank += 1
        out.append(rank)
    return tuple(out)


def crossing_probability(ranks: Sequence[int]) -> float:
    """P(S_n <= ranks[n] - 1 for some n), S a fair ±0/1 random walk from S_0 = 0: the
    probability that the lower end of the intervals with these ranks lies above the
    median at some load count (Armitage, McPherson & Rowe's recursion)."""
    horizon = len(ranks) - 1
    # numpy here, not at the top: the campaign model, which every agent reads at its
    # start, imports this module.
    import numpy as np

    alive = np.zeros(horizon + 2)
    alive[0] = 1.0
    crossed = 0.0
    for n in range(1, horizon + 1):
        step = 0.5 * alive
        alive = step.copy()
        alive[1:] += step[:-1]
        below = ranks[n]
        if below > 0:
            crossed += float(alive[:below].sum())
            alive[:below] = 0.0
    return crossed


@functools.cache
def repeated_ranks(confidence: float, horizon: int) -> tuple[int, ...]:
    """l_n for n = 0..horizon: the ranks of repeated confidence intervals for the median
    at `confidence` over load counts 1..horizon (the module's docstring), from the
    largest nominal level whose one-sided crossing probability is <= alpha / 2."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence}: expected a number between 0 and 1")
    if not 1 <= horizon <= MAX_HORIZON:
        raise ValueError(f"horizon {horizon}: expected 1 to {MAX_HORIZON} loads")
    alpha = 1 - confidence
    # The ranks change only where the level passes 2 x a binomial tail probability:
    # search those levels (the largest one that keeps the crossing within alpha / 2).
    candidates = sorted(
        {2 * p for cdf in _cdfs(horizon) for p in cdf[: (len(cdf) + 1) // 2] if 2 * p <= alpha}
    )
    best: tuple[int, ...] = (0,) * (horizon + 1)
    lo, hi = 0, len(candidates) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        ranks = ranks_at_level(candidates[mid], horizon)
        if crossing_probability(ranks) <= alpha / 2 - _SLACK:
            best, lo = ranks, mid + 1
        else:
            hi = mid - 1
    return best


def first_bounded(confidence: float, horizon: int) -> int | None:
    """The fewest loads with a bounded interval, or None when no count up to `horizon`
    has one."""
    ranks = repeated_ranks(confidence, horizon)
    return next((n for n, rank in enumerate(ranks) if rank > 0), None)


@dataclass(frozen=True)
class MedianInterval:
    """The repeated confidence interval for the median at n loads: `low` and `high` are
    NaN while n is too small for one (`bounded` False)."""

    n: int
    median: float
    low: float
    high: float
    confidence: float

    @property
    def bounded(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def relative_half_width(self) -> float:
        """How far the interval reaches from the median, as a share of it: the larger of
        its two sides (inf while unbounded)."""
        if not self.bounded or self.median <= 0:
            return math.inf
        return max(self.median - self.low, self.high - self.median) / self.median


def median_interval(values: Sequence[float], confidence: float, horizon: int) -> MedianInterval:
    """The repeated confidence interval for the median of `values`, the first n of at
    most `horizon` loads."""
    n = len(values)
    if n > horizon:
        raise ValueError(f"{n} values for a horizon of {horizon} loads")
    if n == 0:
        return MedianInterval(0, math.nan, math.nan, math.nan, confidence)
    import numpy as np  # as above

    ordered = np.sort(np.asarray(values, dtype=float))
    median = float(np.median(ordered))
    rank = repeated_ranks(confidence, horizon)[n]
    if rank == 0:
        return MedianInterval(n, median, math.nan, math.nan, confidence)
    return MedianInterval(n, median, float(ordered[rank - 1]), float(ordered[n - rank]), confidence)


class Stop(StrEnum):
    """Why a cell of sequential repetitions stopped, or that it has not."""

    precise = "precise"  # its interval is within the asked half-width of its median
    exhausted = "max"  # every planned run of the cell was tried
    open = "open"  # neither: loads to come (or the campaign was stopped)


@dataclass(frozen=True)
class Decision:
    stop: Stop
    interval: MedianInterval
    tried: int  # runs of the cell tried to their end (successful or not)

    @property
    def stopped(self) -> bool:
        return self.stop is not Stop.open


@dataclass(frozen=True)
class StoppingRule:
    """Take loads of a cell until the repeated confidence interval for the median of
    `metric` reaches no further than `half_width` (a share of the median) from it, with
    at least `minimum` successful loads; stop at `maximum` runs in any case."""

    metric: str  # a record's metric, e.g. plt_ms
    half_width: float
    minimum: int
    maximum: int
    confidence: float = 0.95

    def interval(self, values: Sequence[float]) -> MedianInterval:
        return median_interval(values, self.confidence, self.maximum)

    def decide(self, values: Sequence[float], tried: int, planned: int | None = None) -> Decision:
        """`values`: the cell's successful loads' metric so far, in order; `tried`: its
        runs that are finished (a success, or every allowed attempt failed); `planned`:
        its runs here (a shard's share; default `maximum`)."""
        interval = self.interval(values)
        if len(values) >= self.minimum and interval.relative_half_width <= self.half_width:
            return Decision(Stop.precise, interval, tried)
        if tried >= (self.maximum if planned is None else planned):
            return Decision(Stop.exhausted, interval, tried)
        return Decision(Stop.open, interval, tried)

    @property
    def earliest(self) -> int | None:
        """The fewest successful loads at which the rule can stop a cell early."""
        first = first_bounded(self.confidence, self.maximum)
        return None if first is None else max(first, self.minimum)
