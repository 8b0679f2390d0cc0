"""The report's sweep figures (issue 51): the PLT against a link parameter swept over a
profile ([M], [C]), one panel per page and link point but for the swept parameter,
one line per series with its 95 % confidence band; none where nothing is swept."""

from __future__ import annotations

from clarke.campaign.dimensions import Cell, by_name, legend
from clarke.report.figures import study_figures, sweeps
from clarke.results.summary import CellSummary, MetricStats


def _cell(
    rtt: str, http: str, connections: int, plt_s: list[float], loss: str = "profile"
) -> CellSummary:
    key = Cell.parse(
        {"profile": "wired-10m-50ms", "rtt_ms": rtt, "loss": loss, "http": http, "cc": "cubic",
         "model": "equal5", "size": "1m", "connections": connections}
    )  # fmt: skip
    return CellSummary(key, len(plt_s), 0, {"plt_ms": MetricStats.of([v * 1000 for v in plt_s])})


def test_the_plt_against_a_swept_rtt_has_a_line_per_series() -> None:
    cells = [
        _cell(rtt, http, n, [base * f, base * f * 1.05])
        for rtt, base in (("20", 0.4), ("100", 0.9), ("400", 2.8))
        for http, n, f in (("1.1", 1, 1.6), ("1.1", 6, 1.1), ("2", 1, 1.0))
    ]
    figures = {f.key: f for f in study_figures(cells)}
    assert "sweep-rtt_ms" in figures and "sweep-loss" not in figures, list(figures)
    svg = figures["sweep-rtt_ms"].svg
    for label in ("HTTP/1.1, 1 conn.", "HTTP/1.1, 6 conn.", "HTTP/2, 1 conn.", "rtt_ms (swept"):
        assert label in svg, label
    assert svg.count("<svg") == 1


def test_a_second_swept_parameter_has_a_panel_per_value_and_its_own_figure() -> None:
    """[C]'s RTT against each loss rate: the other swept parameter makes the panels (in
    the order of its values), not the series, which the panel's title leaves to the
    protocol and connections (15 series a panel were unreadable in [C]'s sweep)."""
    cells = [
        _cell(rtt, "2", 1, [t, t * 1.1], loss=loss)
        for rtt in ("20", "200")
        for loss, t in (("0.1", 2.4), ("0", 1.0), ("0.015", 1.8))
    ]
    figures = {f.key: f for f in sweeps(cells)}
    assert set(figures) == {"sweep-rtt_ms", "sweep-loss"}
    rtt_svg, loss_svg = figures["sweep-rtt_ms"].svg, figures["sweep-loss"].svg
    panels = [rtt_svg.index(f"wired-10m-50ms+loss={v}, equal5-1m") for v in ("0", "0.015", "0.1")]
    assert panels == sorted(panels), panels
    assert "wired-10m-50ms+rtt_ms=20, equal5-1m" in loss_svg
    assert "wired-10m-50ms+rtt_ms=200, equal5-1m" in loss_svg
    assert "loss 0.015" not in rtt_svg and "RTT 200 ms" not in loss_svg
    assert rtt_svg.count("<!-- HTTP/2 -->") == 3


def test_nothing_swept_draws_no_sweep() -> None:
    assert (
        sweeps([_cell("profile", "2", 1, [1.0, 1.1]), _cell("profile", "3", 1, [0.8, 0.9])]) == []
    )


def _sized(
    size: str, http: str, connections: int, plt_s: list[float], loss: str = "0.1"
) -> CellSummary:
    key = Cell.parse(
        {"profile": "wired-10m-50ms", "forward_loss": loss, "http": http, "cc": "cubic",
         "model": "equal10", "size": size, "connections": connections}
    )  # fmt: skip
    return CellSummary(key, len(plt_s), 0, {"plt_ms": MetricStats.of([v * 1000 for v in plt_s])})


def test_the_plt_against_page_size_has_a_line_per_connection_count_in_size_order() -> None:
    """[C]'s figure: sizes named by amount are drawn in the order of that amount (30k
    before 100k and 300k), one line per connection count."""
    cells = [
        _sized(size, "1.1", n, [t * n**0.5, t * n**0.5 * 1.1])
        for size, t in (("1m", 5.0), ("300k", 2.0), ("30k", 0.4), ("100k", 0.9))
        for n in (1, 10, 2)
    ] + [_sized(size, "1.1", 1, [0.5, 0.6], loss="0") for size in ("1m", "30k")]
    figures = {f.key: f for f in study_figures(cells)}
    svg = figures["plt-size-connections"].svg
    # The panel names its link point; the series name no link parameter again.
    legend = [svg.index(f"<!-- HTTP/1.1, equal10, {n} conn. -->") for n in (1, 2, 10)]
    assert legend == sorted(legend), legend
    ticks = [svg.index(f"<!-- {s} -->") for s in ("30k", "100k", "300k", "1m")]
    assert ticks == sorted(ticks), ticks
    # PLT against the swept loss: a panel per page, in the order of their sizes.
    panels = [figures["sweep-forward_loss"].svg.index(f"equal10-{s}") for s in ("30k", "1m")]
    assert panels == sorted(panels), panels


def test_no_page_size_figure_where_connections_only_follow_the_http_version() -> None:
    cells = [
        _sized(size, http, n, [1.0, 1.1])
        for size in ("100k", "1m")
        for http, n in (("1.1", 6), ("2", 1))
    ]
    assert "plt-size-connections" not in {f.key for f in study_figures(cells)}


def test_a_series_label_starts_with_the_version_whatever_is_swept_beside_it() -> None:
    """A link parameter is declared before the HTTP version; its part (", forward loss
    0.1") still follows the version's, not run into it."""
    cells = [_sized("1m", "1.1", 1, [1.0]).cell, _sized("1m", "2", 1, [1.0]).cell]
    cells.append(cells[0].replace(by_name("forward_loss"), "0"))
    assert legend(cells[0], cells) == "HTTP/1.1, forward loss 0.1"
