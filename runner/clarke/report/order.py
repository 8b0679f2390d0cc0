"""The report's figure of the order a page's objects completed in against the order they
were asked for (docs/scheduling.md), from each load's `details.objects`
(clarke.results.objects). Drawn only when the records carry them."""

from __future__ import annotations

import statistics
from collections import defaultdict

import matplotlib.pyplot as plt

from clarke.campaign import dimensions
from clarke.campaign.dimensions import HTTP, Cell
from clarke.report.figures import Figure, _svg
from clarke.results.record import RunRecord, Status

MAX_PANELS = 12


def _page_objects(r: RunRecord) -> list[tuple[int, float]]:
    """The load's objects (request order, when received whole) in request order, the
    HTML left out (its path ends with / or .html; every object of a test page is an
    image)."""
    objects = [
        (o.request_order, o.response_end_ms)
        for o in r.details.objects
        if not str(o.path or "").endswith(("/", ".html"))
        and o.request_order is not None
        and o.response_end_ms is not None
    ]
    return sorted(objects, key=lambda o: o[0])


def completion_order(records: list[RunRecord]) -> Figure | None:
    """One panel per (link profile, page, HTTP version): per object, in the order asked
    for, the median time it was received whole; one line per cell (the scheduler, the
    browser, as the legend says)."""
    ok = [r for r in records if r.status is Status.ok and _page_objects(r)]
    if not ok:
        return None
    cells: dict[Cell, list[RunRecord]] = defaultdict(list)
    for r in ok:
        cells[r.cell].append(r)
    every = list(cells)
    panels: dict[tuple[str, str, str], list[Cell]] = defaultdict(list)
    for cell, rs in cells.items():
        panels[(cell.link, rs[0].page, cell[HTTP].label)].append(cell)
    keys = sorted(panels)[:MAX_PANELS]
    columns = min(3, len(keys))
    rows = -(-len(keys) // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(4.6 * columns, 3.6 * rows), squeeze=False, sharey=False
    )
    for ax, key in zip(axes.flat, keys, strict=False):
        for cell in sorted(panels[key]):
            loads = [_page_objects(r) for r in cells[cell]]
            n = min(len(objs) for objs in loads)
            medians = [statistics.median(objs[k][1] / 1000 for objs in loads) for k in range(n)]
            label = dimensions.legend(cell, every) or cell.path
            ax.plot(range(1, n + 1), medians, marker="o", label=f"{label} ({len(loads)})")
        profile, page, http = key
        ax.set_title(f"{profile}: {page}, {http}", fontsize=9)
        ax.set_xlabel("object, in the order requested")
        ax.set_ylabel("received whole (s), median")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(keys) :]:
        ax.set_visible(False)
    title = "Completion order against request order"
    return Figure(
        "completion-order",
        title,
        "Each object's responseEnd, median over the loads (their number in brackets), in "
        "the order the server received the requests: a line that only rises is a page "
        "completed in request order (docs/scheduling.md).",
        _svg(fig),
    )
