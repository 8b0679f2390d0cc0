"""The report's figure of recorded sites (the campaign's `sites` and `dns_cache`
dimensions, docs/sites.md): a site has no page size to plot against, so its cells get
their own panels, one row per link profile: PLT and the family's two paint-like
metrics (mean and 95 % CI, as the other figures), one group of bars per site, one bar
per series (HTTP version, DNS cache, and whatever else varies); and the time the load's
lookups took (each origin's first lookup, summed: `dns_ms_sum`), median over the loads,
which is where a DNS cache at the terminal shows."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

import matplotlib.pyplot as plt

from clarke.campaign.dimensions import SITE, SITE_NONE, Cell, shown, site_label
from clarke.report.figures import Figure, _errbars, _svg
from clarke.results.metric_families import DEFAULT_FAMILY, FAMILIES, LABEL
from clarke.results.record import RunRecord, Status
from clarke.results.summary import CellSummary

LOOKUPS = "dns_ms_sum"


def _series(cell: Cell, cells: list[Cell]) -> str:
    """The cell's bar label: every legend part but the site's (the site is the group)."""
    parts = [
        d.legend(v)
        for d, v in cell.items()
        if d is not SITE and d.legend is not None and shown(d, d.legend_shown, cells)
    ]
    return "".join(parts).strip(" ,") or "all loads"


def _lookups(records: list[RunRecord]) -> dict[Cell, float]:
    """Per site cell, the median of its successful loads' summed lookup times (ms)."""
    by_cell: dict[Cell, list[float]] = defaultdict(list)
    for r in records:
        value = r.metrics.get(LOOKUPS)
        if r.status is Status.ok and r.cell[SITE] != SITE_NONE and isinstance(value, int | float):
            by_cell[r.cell].append(float(value))
    return {cell: statistics.median(vs) for cell, vs in by_cell.items()}


def _mean_s(metric: str, c: CellSummary) -> float:
    return c.metrics[metric].mean / 1000


def _errors(metric: str, cells: list[CellSummary]) -> list[list[float]]:
    return _errbars([c.metrics[metric] for c in cells])


def _grouped(
    ax: Any,
    cells: list[CellSummary],
    every: list[Cell],
    value: Callable[[CellSummary], float],
    errors: Callable[[list[CellSummary]], list[list[float]]] | None = None,
) -> None:
    """Bars grouped by site, one per series; `value(c)` in s, `errors(list)` their bars.
    Every panel places and colours a series alike, also where it has no bar."""
    sites = sorted({c.cell[SITE] for c in cells})
    labels = sorted({_series(cell, every) for cell in every})
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        by_site = {c.cell[SITE]: c for c in cells if _series(c.cell, every) == label}
        present = [s for s in sites if s in by_site]
        xs = [sites.index(s) + i * width for s in present]
        ys = [value(by_site[s]) for s in present]
        yerr = errors([by_site[s] for s in present]) if errors else None
        ax.bar(xs, ys, width, yerr=yerr, capsize=2, label=label, color=f"C{i % 10}")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(sites))], [site_label(s) for s in sites])
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)


def site_figure(
    cells: list[CellSummary], records: list[RunRecord], family: str = DEFAULT_FAMILY
) -> Figure | None:
    """The figure of the site cells; None when the campaign loaded no site."""
    chosen = [c for c in cells if c.cell[SITE] != SITE_NONE]
    if not chosen:
        return None
    every = [c.cell for c in chosen]
    lookups = _lookups(records)
    metrics = [m for m in FAMILIES[family] if any(m in c.metrics for c in chosen)]
    profiles = list(dict.fromkeys(c.cell.link for c in chosen))
    columns = len(metrics) + 1
    fig, axes = plt.subplots(
        len(profiles), columns, figsize=(4.4 * columns, 3.9 * len(profiles)), squeeze=False
    )
    for row, profile in zip(axes, profiles, strict=True):
        here = [c for c in chosen if c.cell.link == profile]
        for ax, metric in zip(row, metrics, strict=False):
            with_metric = [c for c in here if metric in c.metrics]
            _grouped(
                ax,
                with_metric,
                every,
                partial(_mean_s, metric),
                partial(_errors, metric),
            )
            ax.set_title(f"{profile}: {LABEL.get(metric, metric)}")
            ax.set_ylabel("s, mean and 95 % CI")
        ax = row[-1]
        looked = [c for c in here if c.cell in lookups]
        _grouped(ax, looked, every, lambda c: lookups[c.cell] / 1000)
        ax.set_title(f"{profile}: DNS lookups in the load")
        ax.set_ylabel("s, sum over origins, median")
    # One legend for every panel (the series are the same in each), under them all.
    handles, labels = max(
        (a.get_legend_handles_labels() for a in axes.flat), key=lambda hl: len(hl[1])
    )
    fig.tight_layout(rect=(0, 0.1 / len(profiles), 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), frameon=False)
    return Figure(
        "sites",
        "Recorded sites: load times and the time spent looking names up",
        "Per site (docs/sites.md): PLT and the paint metrics (mean and 95 % CI over the "
        "successful loads), and each origin's first lookup as the browser timed it, summed "
        "over the origins, median: with every lookup across the link against a DNS cache "
        "at the terminal.",
        _svg(fig),
    )
