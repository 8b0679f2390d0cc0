"""Does a real slowdown get caught as often as the simulated one? A check of the model.

`power.simulate` models a regression by multiplying every current load of a cell by a
factor. A real regression is whatever the server, the link or the browser does: a
server that holds each response adds a constant, a lost handshake hits some loads only.
This module measures detection with a real slowdown recorded beside its baseline: a
*slowed* cell (for example the same page with every response held by origin,
`server_delays_ms`) and its *base* cell, loaded interleaved in one campaign so that both
share the machine's state and no drift comes between them.

One trial (a simulated night) for n loads and a family of C cells:
- real: a baseline of n random loads of the base cell and a current of n random loads of
  the slowed cell; the C - 1 unchanged cells of the night drawn as in `power.simulate`
  (random unslowed recorded cells, split into disjoint baseline and current);
- model: the same, except that the current is n further loads of the base cell,
  disjoint from its baseline, multiplied by the slowdown measured between the two cells
  (the ratio of their medians over all their loads).
A cell is flagged as `clarke compare` flags it (`power.simulate`). If the model is fair,
both rates agree within their sampling error (400 trials: about +-4 points at 50 %)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from clarke.errors import InputError
from clarke.run.bench.power import Trials, check_loads, split_pairs
from clarke.run.bench.power_family import holm_rows


@dataclass(frozen=True)
class RealPoint:
    slowed: str  # the slowed cell
    base: str  # the cell it is the slowed form of
    n: int
    cells: int  # C: the Holm family
    measured: float  # median of the slowed cell over median of the base cell
    real: float  # share of trials flagging the slowed cell's real loads
    model: float  # share flagging the base cell's loads times `measured`


def _pick(rng: np.random.Generator, loads: np.ndarray, n: int, count: int) -> np.ndarray:
    return np.stack([rng.permutation(loads)[:n] for _ in range(count)])


def _flagged(p: np.ndarray, ratio: np.ndarray, null_p: np.ndarray, how: Trials) -> float:
    """Share of trials whose first cell is flagged `slower` among itself and its nulls."""
    adjusted = holm_rows(np.column_stack([p, null_p]))[:, 0]
    return float(np.mean((adjusted < how.alpha) & (ratio > 1 + how.threshold)))


def real_slowdowns(
    cells: dict[str, np.ndarray],
    pairs: dict[str, str],
    ns: list[int],
    families: list[int],
    how: Trials,
) -> list[RealPoint]:
    """Detection of each slowed cell of `pairs` (slowed -> base) against its base cell,
    real and modelled, for every n and family size; the unchanged cells of a night are
    drawn from the recorded cells that are not slowed."""
    for slowed, base in pairs.items():
        for name in (slowed, base):
            if name not in cells:
                raise InputError(
                    f"--slowed {slowed}={base}: no successful loads of cell {name!r} in the "
                    f"recording (its cells: {', '.join(sorted(cells))})"
                )
    unslowed = [loads for name, loads in cells.items() if name not in pairs]
    if not unslowed:
        raise InputError("--slowed: every recorded cell is slowed; the family needs unslowed ones")
    check_loads(unslowed, ns)
    for slowed in pairs:
        if len(cells[slowed]) < max(ns):
            raise InputError(
                f"n={max(ns)} needs {max(ns)} loads of the slowed cell {slowed!r}; it has "
                f"{len(cells[slowed])}"
            )
    out: list[RealPoint] = []
    for k, (slowed, base) in enumerate(sorted(pairs.items())):
        measured = float(np.median(cells[slowed]) / np.median(cells[base]))
        for n in ns:
            for family in families:
                rng = np.random.default_rng([how.seed, k, n, family])
                nb, nc = split_pairs(rng, unslowed, n, how.count * (family - 1))
                null_p = stats.mannwhitneyu(nc, nb, alternative="two-sided", axis=1).pvalue
                null_p = null_p.reshape(how.count, family - 1)
                real = (
                    _pick(rng, cells[slowed], n, how.count),
                    _pick(rng, cells[base], n, how.count),
                )
                model = _modelled(rng, cells[base], n, how.count, measured)
                rates = []
                for current, baseline in (real, model):
                    p = stats.mannwhitneyu(current, baseline, alternative="two-sided", axis=1)
                    ratio = np.median(current, axis=1) / np.median(baseline, axis=1)
                    rates.append(_flagged(p.pvalue, ratio, null_p, how))
                out.append(RealPoint(slowed, base, n, family, measured, rates[0], rates[1]))
    return out


def _modelled(
    rng: np.random.Generator, loads: np.ndarray, n: int, count: int, factor: float
) -> tuple[np.ndarray, np.ndarray]:
    """(current, baseline): disjoint draws of n loads, the current multiplied by factor."""
    base, cur = split_pairs(rng, [loads], n, count)
    return cur * factor, base


def real_figures(
    cells: dict[str, np.ndarray],
    pairs: dict[str, str],
    ns: list[int],
    families: list[int],
    how: Trials,
) -> dict[str, Any]:
    """The points of `real_slowdowns`, for `render_real` beside `power.describe`."""
    points = real_slowdowns(cells, pairs, ns, families, how)
    return {"points": [p.__dict__ for p in points]}


def render_real(f: dict[str, Any]) -> list[str]:
    lines = [
        "real slowdowns: the slowed cell's own loads against its base cell's (real), and the",
        "base cell's loads multiplied by the measured slowdown (model); share of nights caught",
        "",
        "  slowed cell <- base cell (spread: coefficient of variation of PLT)",
    ]
    cv = {name: described["cv"] for name, described in f["cells"].items()}
    for slowed, base, measured in dict.fromkeys(
        (p["slowed"], p["base"], p["measured"]) for p in f["points"]
    ):
        lines.append(
            f"  {slowed} ({cv[slowed]:.1%}) <- {base} ({cv[base]:.1%}): "
            f"measured {measured - 1:+.1%}"
        )
    width = max(len("slowed cell"), *(len(p["slowed"]) for p in f["points"]))
    lines += ["", f"  {'slowed cell':<{width}}    n     C   real   model"]
    for p in f["points"]:
        lines.append(
            f"  {p['slowed']:<{width}}  {p['n']:>3} {p['cells']:>5} {p['real']:>6.0%} "
            f"{p['model']:>7.0%}"
        )
    return lines
