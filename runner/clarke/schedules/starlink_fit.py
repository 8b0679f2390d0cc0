"""The fits behind `clarke link schedule starlink` (docs/schedules.md): each turns
published figures into a parameter of the model, deterministically.

The model of one direction's one-way delay in a slot is geometry (slant ranges / c)
plus a fixed ground part plus the slot's excess, plus per-packet jitter; an echo's RTT is
the sum over both directions:

    RTT = min_rtt + (geometry - its minimum) + excess(slot) + J,   J = J_fwd + J_ret

- Jitter: each direction's J is exponential with mean m, so J is Gamma(2, m) and two
  successive RTTs of one slot differ by a sum of two Laplace(m) variables, whose mean
  size is 3m/2: m = (mean |RTT(i) - RTT(i-1)|) / 1.5.
- The excess of a slot is a normal (mu, sigma) truncated at 0, so that no slot is
  faster than the published minimum; mu and sigma are fitted by least squares so that
  the RTT's quartiles (excess and jitter together, as ping samples them) are the
  published ones. The RTT's distribution is computed on a 0.05 ms grid (no sampling).
- Background loss: echoes are lost by the reconfiguration events (a share of the time,
  each direction at the event's loss rate) and by a loss that is always there; the
  latter, per direction, is what makes the time-averaged echo loss the published
  total.
- Rates per slot are lognormal: the median is the published median, sigma puts the
  published high figure at the 99th percentile."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from scipy.optimize import minimize
from scipy.signal import fftconvolve

GRID_MS = 0.05
GRID_END_MS = 500.0  # RTTs above the minimum the grid covers
SUCCESSIVE_PER_MEAN = 1.5  # E|L1 + L2| / b for two Laplace(b): 3/2
Z99 = NormalDist().inv_cdf(0.99)


def jitter_mean_ms(successive_diff_ms: float) -> float:
    """The per-direction exponential mean whose RTTs differ by `successive_diff_ms` on
    average between successive echoes of one slot."""
    return successive_diff_ms / SUCCESSIVE_PER_MEAN


def _truncnorm_pdf(x: np.ndarray, mu: float, sigma: float) -> np.ndarray:
    z = (x - mu) / sigma
    mass = 1 - NormalDist().cdf(-mu / sigma)
    pdf = np.exp(-0.5 * z * z) / (sigma * math.sqrt(2 * math.pi) * mass)
    return np.where(x >= 0, pdf, 0.0)


def truncnorm_moments(mu: float, sigma: float) -> tuple[float, float]:
    """Mean and standard deviation of a normal (mu, sigma) truncated below at 0."""
    a = -mu / sigma
    n = NormalDist()
    lam = n.pdf(a) / (1 - n.cdf(a))
    mean = mu + sigma * lam
    var = sigma**2 * (1 + a * lam - lam**2)
    return mean, math.sqrt(var)


def truncnorm_quantile(u: float, mu: float, sigma: float) -> float:
    """The excess at cumulative probability u in [0, 1) (inverse transform)."""
    n = NormalDist()
    low = n.cdf(-mu / sigma)
    p = min(low + u * (1 - low), 1 - 1e-12)
    return max(0.0, mu + sigma * n.inv_cdf(p))


def rtt_cdf(
    grid: np.ndarray, mu: float, sigma: float, jitter_ms: float, offsets: list[float]
) -> np.ndarray:
    """P(RTT - min_rtt <= grid) for the model above, the slots' geometry offsets
    (geometry - its minimum, ms) equally likely."""
    excess = _truncnorm_pdf(grid, mu, sigma) * GRID_MS
    j = grid / jitter_ms
    jitter_cdf = 1 - np.exp(-j) * (1 + j)  # Gamma(2, m)
    both = fftconvolve(excess, jitter_cdf)[: len(grid)]
    cdf = np.zeros_like(grid)
    for off in offsets or [0.0]:
        shift = round(off / GRID_MS)
        cdf[shift:] += both[: len(grid) - shift]
    return np.asarray(cdf / max(1, len(offsets or [0.0])))


def quantiles(grid: np.ndarray, cdf: np.ndarray, probs: tuple[float, ...]) -> list[float]:
    return [float(np.interp(p, cdf, grid)) for p in probs]


def fit_floor(
    quartiles_ms: tuple[float, float, float],
    min_rtt_ms: float,
    jitter_ms: float,
    offsets: list[float],
) -> tuple[float, float]:
    """(mu, sigma) of the slots' excess, rounded to 0.01 ms, whose RTT quartiles are
    closest (least squares) to the published ones."""
    grid = np.arange(0, GRID_END_MS, GRID_MS)
    target = np.array(quartiles_ms) - min_rtt_ms

    def error(p: np.ndarray) -> float:
        mu, sigma = float(p[0]), float(p[1])
        if sigma <= 0.1:
            return 1e9
        got = quantiles(grid, rtt_cdf(grid, mu, sigma, jitter_ms, offsets), (0.25, 0.5, 0.75))
        return float(((np.array(got) - target) ** 2).sum())

    start = np.array([target[1], max(1.0, (target[2] - target[0]) / 1.35)])
    best = minimize(error, start, method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-6})
    return round(float(best.x[0]), 2), round(float(best.x[1]), 2)


def fitted_quartiles(
    mu: float, sigma: float, min_rtt_ms: float, jitter_ms: float, offsets: list[float]
) -> list[float]:
    grid = np.arange(0, GRID_END_MS, GRID_MS)
    got = quantiles(grid, rtt_cdf(grid, mu, sigma, jitter_ms, offsets), (0.25, 0.5, 0.75))
    return [min_rtt_ms + q for q in got]


def echo_loss(p_forward: float, p_return: float) -> float:
    """An echo is lost when either of its two packets is."""
    return 1 - (1 - p_forward) * (1 - p_return)


def background_loss(total: float, event_share: float, event_loss: float) -> float:
    """The per-direction loss outside the events that makes the time-averaged echo loss
    `total`, the events taking `event_share` of the time at `event_loss` per direction;
    ValueError when the events alone lose more than `total`."""
    by_events = event_share * echo_loss(event_loss, event_loss)
    rest = (total - by_events) / (1 - event_share)
    if rest < 0:
        raise ValueError(
            f"the events alone lose {100 * by_events:.3f} % of echoes, more than {100 * total:g} %"
        )
    return 1 - math.sqrt(1 - rest)


def rate_sigma(median: float, p99: float) -> float:
    """The lognormal sigma that puts `p99` at the 99th percentile."""
    return math.log(p99 / median) / Z99


def lognormal_quantile(u: float, median: float, sigma: float) -> float:
    return median * math.exp(sigma * NormalDist().inv_cdf(min(max(u, 1e-12), 1 - 1e-12)))
