"""The report's figures keep their legends off the data: in the FCP/LCP bars (and every
other study figure) the legend sits under the panel, clear of its bars, error bars,
tick labels and x label."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import pytest

from clarke.campaign.dimensions import Cell
from clarke.report import figures
from clarke.results.summary import CellSummary, MetricStats


def _cells() -> list[CellSummary]:
    out = []
    for http in ("1.1", "2", "3"):
        for model in ("uniform", "triangular"):
            for size, base in (("500k", 3000.0), ("1m", 4200.0)):
                cell = Cell.parse({"profile": "geo", "http": http, "cc": "bbr", "model": model,
                                   "size": size, "connections": 6})  # fmt: skip
                values = [base * (1 + 0.02 * k) for k in range(5)]
                stats = {m: MetricStats.of(values) for m in ("plt_ms", "fcp_ms", "lcp_ms")}
                out.append(CellSummary(cell, 5, 0, stats))
    return out


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every figure the report draws, kept open and drawn instead of written as SVG."""
    kept: list[Any] = []

    def keep(fig: Any) -> str:
        fig.canvas.draw()
        kept.append(fig)
        return "<svg/>"

    monkeypatch.setattr(figures, "_svg", keep)
    yield kept
    for fig in kept:
        plt.close(fig)


def test_no_legend_sits_on_the_data(drawn: list[Any]) -> None:
    made = figures.study_figures(_cells())
    assert "fcp-lcp-structure" in [f.key for f in made]
    checked = 0
    for fig in drawn:
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            box = legend.get_window_extent(renderer)
            others = [*ax.patches, *ax.lines, *ax.get_xticklabels(), ax.xaxis.label]
            for artist in others:
                if artist.get_visible() and (artist.get_label() or artist in ax.patches):
                    other = artist.get_window_extent(renderer)
                    if other.width and other.height:
                        assert not box.overlaps(other), f"{ax.get_title()}: legend on {artist}"
            checked += 1
    assert checked >= 4  # FCP, LCP, the PLT bars, the lines
