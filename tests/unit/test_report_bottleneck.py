"""The report's bottleneck figure: drawn when a campaign has cross traffic or a PEP,
with every link (queue) on one axis and one bar per series."""

from __future__ import annotations

from clarke.campaign.dimensions import Cell
from clarke.report.figures import study_figures
from clarke.results.summary import CellSummary, MetricStats


def _cell(profile: str, http: str, cross: str, pep: str, plt_s: list[float]) -> CellSummary:
    key = Cell.parse(
        {"profile": profile, "http": http, "cc": "cubic", "model": "uniform", "size": "1m",
         "connections": 6, "cross_traffic": cross, "pep": pep}
    )  # fmt: skip
    return CellSummary(key, len(plt_s), 0, {"plt_ms": MetricStats.of([v * 1000 for v in plt_s])})


def test_queues_under_cross_traffic_share_one_axis() -> None:
    cells = [
        _cell("geo", "2", "none", "none", [5.5, 5.6]),
        _cell("geo-droptail-1bdp", "2", "bulk-cubic", "none", [15.2, 14.4]),
        _cell("geo-fq-codel", "2", "bulk-cubic", "none", [7.3, 7.1]),
    ]
    figures = {f.key: f for f in study_figures(cells)}
    svg = figures["plt-bottleneck"].svg
    for label in ("geo-droptail-1bdp", "geo-fq-codel", "HTTP/2 + bulk-cubic, cubic"):
        assert label in svg, label
    assert svg.count("<svg") == 1


def test_peps_are_series_beside_no_pep() -> None:
    cells = [
        _cell("geo", http, "none", pep, [5.0, 5.1])
        for http in ("1.1", "3")
        for pep in ("none", "splittcp")
    ]
    svg = {f.key: f for f in study_figures(cells)}["plt-bottleneck"].svg
    assert "PEP splittcp" in svg and "HTTP/3, cubic" in svg


def test_no_bottleneck_figure_without_cross_traffic_or_pep() -> None:
    cells = [_cell("geo", "2", "none", "none", [5.5, 5.6])]
    assert "plt-bottleneck" not in {f.key for f in study_figures(cells)}


def test_no_congestion_control_figure_with_one_congestion_control() -> None:
    cells = [_cell("geo", http, "none", "none", [5.0, 5.1]) for http in ("2", "3")]
    assert "cc" not in {f.key for f in study_figures(cells)}
