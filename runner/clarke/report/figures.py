"""The GEO study's figure types, drawn with matplotlib from per-cell statistics."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from clarke.campaign import dimensions
from clarke.campaign.dimension import Dimension
from clarke.campaign.dimensions import (
    CC,
    CONNECTIONS,
    HTTP,
    LINK_PARAMETERS,
    MODEL,
    SIZE,
    Cell,
)
from clarke.link_points import PROFILE_OWN
from clarke.results.metric_families import DEFAULT_FAMILY, DESCRIPTION, FAMILIES, LABEL
from clarke.results.summary import CellSummary, MetricStats
from clarke.vocab import PEP_NONE, CongestionControl, HttpVersion

BBR = CongestionControl.bbr

HTTP_LABEL = {v.value: v.label for v in HttpVersion}
SIZE_UNIT_K = {"k": 1, "m": 1000, "g": 1_000_000}
DISCIPLINE = "discipline"  # the one swept link parameter that is not a number


@dataclass(frozen=True)
class Figure:
    key: str
    title: str
    caption: str
    svg: str


def _size_key(size: str) -> tuple[float, str]:
    """Sizes named by their amount (30k, 1m) in the order of that amount, any other name
    (a model's one `page`) after them."""
    amount = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg])", size)
    return (float(amount[1]) * SIZE_UNIT_K[amount[2]], size) if amount else (math.inf, size)


def _natural(label: str) -> list[object]:
    """A series label's sort key that orders its numbers by value: 2 conn. before 10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", label)]


def connections_swept(cells: Iterable[Cell]) -> bool:
    """Whether the connection count is a variable of these cells ([C], [K]): one HTTP
    version loaded with several counts, not only each version with its own."""
    pairs = {(c[HTTP], c[CONNECTIONS]) for c in cells}
    return len(pairs) > len({http for http, _ in pairs})


def legend_in_panel(cell: Cell, cells: list[Cell]) -> str:
    """`cell`'s series label among `cells` without its link parameters, for a panel of
    one link point, whose title names them."""
    for d in LINK_PARAMETERS:
        cell = cell.replace(d, PROFILE_OWN)
    return dimensions.legend(cell, cells)


def _svg(fig: plt.Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _err(s: MetricStats) -> float:
    return 0.0 if math.isnan(s.ci_high) else (s.ci_high - s.mean) / 1000


def _errbars(stats: list[MetricStats]) -> list[list[float]]:
    """CI half-widths in s, the lower one cut at zero: a time is never negative."""
    return [[min(_err(s), s.mean / 1000) for s in stats], [_err(s) for s in stats]]


Select = Callable[[CellSummary], bool]


def _legend_below(ax: plt.Axes, below_labels: bool = False) -> None:
    """The panel's legend under it, clear of its bars, lines, tick labels and x label
    (inside, the legend sat on top of the bars of the FCP and LCP panels)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    ax.legend(
        fontsize=8,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2 if below_labels else -0.1),
        ncol=min(2, len(labels)),
        frameon=False,
    )


def _profiles(cells: list[CellSummary]) -> list[str]:
    return list(dict.fromkeys(c.cell.link for c in cells))


def lines(
    cells: list[CellSummary],
    *,
    key: str,
    title: str,
    caption: str,
    metric: str,
    select: Select,
    series: Callable[[CellSummary], str],
) -> Figure | None:
    """One panel per link profile: metric (s) against page size, one line per series."""
    chosen = [c for c in cells if select(c) and metric in c.metrics]
    profiles = _profiles(chosen)
    if not profiles:
        return None
    fig, axes = plt.subplots(1, len(profiles), figsize=(5.2 * len(profiles), 3.8), squeeze=False)
    for ax, profile in zip(axes[0], profiles, strict=True):
        groups: dict[str, list[CellSummary]] = {}
        for c in chosen:
            if c.cell.link == profile:
                groups.setdefault(series(c), []).append(c)
        for label, cs in sorted(groups.items(), key=lambda kv: _natural(kv[0])):
            cs.sort(key=lambda c: _size_key(c.cell[SIZE]))
            xs = [c.cell[SIZE] for c in cs]
            ys = [c.metrics[metric].mean / 1000 for c in cs]
            ax.errorbar(
                xs,
                ys,
                yerr=_errbars([c.metrics[metric] for c in cs]),
                marker="o",
                capsize=3,
                label=label,
            )
        ax.set_title(f"{profile}")
        ax.set_xlabel("total page size")
        ax.set_ylabel(f"{LABEL.get(metric, metric)} (s), mean and 95 % CI")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        _legend_below(ax, below_labels=True)
    fig.suptitle(title)
    return Figure(key, title, caption, _svg(fig))


def bars(
    cells: list[CellSummary],
    *,
    key: str,
    title: str,
    caption: str,
    metrics: tuple[str, ...],
    select: Select,
    series: Callable[[CellSummary], str],
) -> Figure | None:
    """One panel per (profile, metric): grouped bars per page size, one bar per series."""
    chosen = [c for c in cells if select(c)]
    panels = [
        (p, m)
        for p in _profiles(chosen)
        for m in metrics
        if any(c.cell.link == p and m in c.metrics for c in chosen)
    ]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), squeeze=False)
    for ax, (profile, metric) in zip(axes[0], panels, strict=True):
        cs = [c for c in chosen if c.cell.link == profile and metric in c.metrics]
        sizes = sorted({c.cell[SIZE] for c in cs}, key=_size_key)
        labels = sorted({series(c) for c in cs})
        width = 0.8 / max(1, len(labels))
        for i, label in enumerate(labels):
            by_size = {c.cell[SIZE]: c.metrics[metric] for c in cs if series(c) == label}
            xs = [j + i * width for j, s in enumerate(sizes) if s in by_size]
            ys = [by_size[s].mean / 1000 for s in sizes if s in by_size]
            errs = _errbars([by_size[s] for s in sizes if s in by_size])
            ax.bar(xs, ys, width, yerr=errs, capsize=2, label=label)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(sizes))], sizes)
        ax.set_title(f"{profile}: {LABEL.get(metric, metric)}")
        ax.set_ylabel("s, mean and 95 % CI")
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", alpha=0.3)
        _legend_below(ax)
    fig.suptitle(title)
    return Figure(key, title, caption, _svg(fig))


def per_profile(
    cells: list[CellSummary],
    *,
    key: str,
    title: str,
    caption: str,
    metric: str,
    series: Callable[[CellSummary], str],
) -> Figure | None:
    """One panel, one axis: metric (s) per link profile (a queue, a link), one bar per
    series, so that queues, cross traffic and PEPs compare at a glance."""
    chosen = [c for c in cells if metric in c.metrics]
    profiles = _profiles(chosen)
    if not profiles:
        return None
    labels = sorted({series(c) for c in chosen})
    width = 0.8 / max(1, len(labels))
    fig, ax = plt.subplots(figsize=(max(5.2, 1.6 * len(profiles) * max(1, len(labels) / 2)), 4))
    for i, label in enumerate(labels):
        by_profile = {c.cell.link: c.metrics[metric] for c in chosen if series(c) == label}
        xs = [j + i * width for j, p in enumerate(profiles) if p in by_profile]
        stats = [by_profile[p] for p in profiles if p in by_profile]
        ax.bar(xs, [s.mean / 1000 for s in stats], width, yerr=_errbars(stats), capsize=2,
               label=label)  # fmt: skip
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(profiles))], profiles)
    ax.set_ylabel(f"{LABEL.get(metric, metric)} (s), mean and 95 % CI")
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    _legend_below(ax)
    ax.set_title(title)
    return Figure(key, title, caption, _svg(fig))


def _swept_value(c: CellSummary, d: Dimension[str]) -> float | None:
    text = c.cell[d]
    return None if text == PROFILE_OWN or d.name == DISCIPLINE else float(text)


SWEEP_PANELS_PER_ROW = 5


def sweeps(cells: list[CellSummary], metric: str = "plt_ms") -> list[Figure]:
    """For each link parameter the cells sweep over two values or more ([M], [C]: PLT
    against the RTT, the loss, the rate or the buffer): `metric` against the parameter,
    one panel per page and link point but for the parameter (the profile with the other
    swept parameters: [C]'s RTT against each loss rate), one line per series (HTTP
    version, connections ...) with its 95 % confidence band."""
    every = [c.cell for c in cells]
    out = []
    for d in LINK_PARAMETERS:
        chosen = [c for c in cells if metric in c.metrics and _swept_value(c, d) is not None]
        if len({c.cell[d] for c in chosen}) < 2:
            continue
        panels: dict[tuple[str, str], list[CellSummary]] = {}
        for c in chosen:
            panels.setdefault((c.cell.replace(d, PROFILE_OWN).link, c.cell.page), []).append(c)
        # Link points by the values of the other swept parameters (0.01 before 0.1), pages
        # by model and size (equal2 before equal10, 30k before 100k), not by their names.
        order = {
            key: (
                [_value_key(c, other) for other in LINK_PARAMETERS if other is not d],
                _natural(c.cell[MODEL]),
                _size_key(c.cell[SIZE]),
            )
            for key, (c, *_) in panels.items()
        }
        columns = min(SWEEP_PANELS_PER_ROW, len(panels))
        rows = -(-len(panels) // columns)
        fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 4.6 * rows),
                                 squeeze=False, layout="constrained")  # fmt: skip
        slots = [ax for row in axes for ax in row]
        connections_vary = len({c.cell[CONNECTIONS] for c in chosen}) > 1
        for ax, key in zip(slots, sorted(panels, key=order.__getitem__), strict=False):
            groups: dict[str, list[CellSummary]] = {}
            for c in panels[key]:
                label = legend_in_panel(c.cell, every)
                if connections_vary:
                    label += f", {c.cell[CONNECTIONS]} conn."
                groups.setdefault(label, []).append(c)
            for label, cs in sorted(groups.items(), key=lambda kv: _natural(kv[0])):
                _sweep_line(ax, label, sorted(cs, key=lambda c: _swept_value(c, d) or 0.0),
                            d, metric)  # fmt: skip
            ax.set_title(", ".join(key), fontsize=9)
            ax.set_xlabel(f"{d.name} (swept over the profile)")
            ax.set_ylabel(f"{LABEL.get(metric, metric)} (s), mean and 95 % CI")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            _legend_below(ax, below_labels=True)
        for ax in slots[len(panels) :]:
            ax.set_visible(False)
        title = f"{LABEL.get(metric, metric)} against {d.name}"
        fig.suptitle(title)
        caption = (f"The link parameter {d.name} swept over the profile (docs/campaigns.md); "
                   "bands: 95 % confidence intervals of the mean.")  # fmt: skip
        out.append(Figure(f"sweep-{d.name}", title, caption, _svg(fig)))
    return out


def _value_key(c: CellSummary, d: Dimension[str]) -> float:
    """d's value as a sort key, the profile's own before any swept value."""
    value = _swept_value(c, d)
    return -math.inf if value is None else value


def _sweep_line(
    ax: plt.Axes, label: str, cs: list[CellSummary], d: Dimension[str], metric: str
) -> None:
    """One series of a sweep: its cells' mean `metric` (s) against d's value, with the
    95 % confidence band."""
    xs = [_swept_value(c, d) or 0.0 for c in cs]
    stats = [c.metrics[metric] for c in cs]
    ys = [s.mean / 1000 for s in stats]
    low, high = _errbars(stats)
    (line,) = ax.plot(xs, ys, marker="o", label=label)
    ax.fill_between(xs, [y - e for y, e in zip(ys, low, strict=True)],
                    [y + e for y, e in zip(ys, high, strict=True)],
                    color=line.get_color(), alpha=0.2)  # fmt: skip


def study_figures(cells: list[CellSummary], family: str = DEFAULT_FAMILY) -> list[Figure]:
    """The study's figures, the paint-like ones drawn with `family`'s metrics."""
    _, first, largest = FAMILIES[family]
    pair = f"{LABEL[first]} and {LABEL[largest]}"

    every = [c.cell for c in cells]

    def h(c: CellSummary) -> str:
        """The cell's series label: the HTTP version, and every other dimension whose
        legend part says something here (the cross traffic beside the load, the PEP,
        the browser when there are several: clarke.campaign.dimensions.legend)."""
        return dimensions.legend(c.cell, every)

    sizes_of: dict[str, set[str]] = {}
    for c in cells:
        sizes_of.setdefault(c.cell[MODEL], set()).add(c.cell[SIZE])
    swept_models = {m for m, sizes in sizes_of.items() if len(sizes) > 1}

    # Cross traffic or a PEP: every cell's PLT on one axis, per link (queue) and series.
    bottleneck = any(
        c.cell[dimensions.CROSS_TRAFFIC].active or c.cell[dimensions.PEP] != PEP_NONE for c in cells
    )
    candidates = [
        per_profile(
            cells,
            key="plt-bottleneck",
            metric="plt_ms",
            title="PLT per link and queue, with the cross traffic and the PEP",
            caption="Effect of the bottleneck: the link's queue, what else crosses it, and a "
            "performance-enhancing proxy (docs/queues.md, docs/peps.md).",
            series=lambda c: f"{h(c)}, {c.cell[CC]}",
        )
        if bottleneck
        else None,
        lines(
            cells,
            key="plt-size-structure",
            metric="plt_ms",
            title="PLT against total page size: single vs uniform, per HTTP version",
            caption="Effect of parallel streams (the study's first scenario), BBR.",
            select=lambda c: c.cell[MODEL] in ("single", "uniform") and c.cell[CC] is BBR,
            series=lambda c: f"{h(c)}, {c.cell[MODEL]}",
        ),
        None
        if not connections_swept(every)
        else lines(
            cells,
            key="plt-size-connections",
            metric="plt_ms",
            title="PLT against total page size, per connections per server",
            caption="Effect of parallel connections as the page grows ([C]'s response time "
            "against page size), for every page model loaded at two sizes or more.",
            select=lambda c: c.cell[MODEL] in swept_models,
            series=lambda c: (
                f"{legend_in_panel(c.cell, every)}, {c.cell[MODEL]}, {c.cell[CONNECTIONS]} conn."
            ),
        ),
        None
        if len({c.cell[CC] for c in cells}) < 2  # one congestion control: nothing to compare
        else bars(
            cells,
            key="cc",
            metrics=("plt_ms",),
            title="Cubic against BBR per HTTP version (uniform pages)",
            caption="Effect of congestion control (the study's second scenario).",
            select=lambda c: c.cell[MODEL] == "uniform",
            series=lambda c: f"{h(c)}, {c.cell[CC]}",
        ),
        bars(
            cells,
            key="fcp-lcp-structure",
            metrics=(first, largest),
            title=f"{pair}: uniform against triangular",
            caption=f"Effect of page structure (the study's third scenario), BBR; "
            f"{DESCRIPTION[family]}.",
            select=lambda c: c.cell[MODEL] in ("uniform", "triangular") and c.cell[CC] is BBR,
            series=lambda c: f"{h(c)}, {c.cell[MODEL]}",
        ),
        bars(
            cells,
            key="plt-structure",
            metrics=("plt_ms",),
            title="PLT: uniform against triangular",
            caption="Effect of page structure on the page load time, BBR.",
            select=lambda c: c.cell[MODEL] in ("uniform", "triangular") and c.cell[CC] is BBR,
            series=lambda c: f"{h(c)}, {c.cell[MODEL]}",
        ),
    ]
    return [f for f in candidates if f is not None] + sweeps(cells)
