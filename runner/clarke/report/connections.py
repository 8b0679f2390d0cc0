"""The report's figures of how a load used its connections (the connection studies [K]
and [C]): each connection's idle time and each load's ([K]'s), and each load's share
waiting on connection set-up ([C]'s), as CDFs per cell, and the connections carrying the
page over one load of each cell. They read a record's
per-connection rows and the load's figures derived from them (results/connections.py);
drawn only where records carry them with timings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import matplotlib.pyplot as plt

from clarke.campaign.dimensions import CC, CONNECTIONS
from clarke.report.figures import Figure, _legend_below, _svg, connections_swept, legend_in_panel
from clarke.results.connections import overlap_steps
from clarke.results.details import ConnectionRow
from clarke.results.record import RunRecord, Status

Panel = tuple[str, str]  # profile, page
PANELS_PER_ROW = 3


def _timed(r: RunRecord) -> list[ConnectionRow]:
    """The load's connections whose requests the browser timed."""
    return [
        c
        for c in r.details.per_connection
        if c.first_request_ms is not None and c.last_response_end_ms is not None
    ]


def _panels(records: list[RunRecord]) -> dict[Panel, dict[str, list[RunRecord]]]:
    """The successful loads with timed connections, by link point and page, then by
    series: the cell's legend among all these loads' cells but for the link parameters
    the panel's title names, with its connections per server and congestion control
    where those vary."""
    ok = [r for r in records if r.status is Status.ok and _timed(r)]
    every = [r.cell for r in ok]
    connections_vary = len({c[CONNECTIONS] for c in every}) > 1
    cc_varies = len({c[CC] for c in every}) > 1

    def series(r: RunRecord) -> str:
        # A panel is one link point, which its title names.
        label = legend_in_panel(r.cell, every)
        if connections_vary:
            label += f", {r.cell[CONNECTIONS]} conn. per server"
        return label + (f", {r.cell[CC]}" if cc_varies else "")

    panels: dict[Panel, dict[str, list[RunRecord]]] = {}
    for r in ok:
        panels.setdefault((r.cell.link, r.page), {}).setdefault(series(r), []).append(r)
    return panels


def in_use_over_the_load(r: RunRecord) -> tuple[list[float], list[int]]:
    """The connections carrying the load over time (from the first request each carried
    to the end of its last response), as steps: (times in ms from navigation start, how
    many from each time on); its peak is the load's `max_concurrent_connections`."""
    spans = [(c.first_request_ms or 0.0, c.last_response_end_ms or 0.0) for c in _timed(r)]
    return overlap_steps(spans)


def _median_load(rs: list[RunRecord]) -> RunRecord:
    """The load whose PLT is the cell's median (the lower of the two middle ones)."""
    ordered = sorted(rs, key=lambda r: r.metrics.get("plt_ms", 0.0))
    return ordered[(len(ordered) - 1) // 2]


@dataclass(frozen=True)
class _Kind:
    """One of these figures: what it is called and says, its axes, and how a series is
    drawn from its cell's loads."""

    key: str
    title: str
    caption: str
    axes: tuple[str, str]
    draw: Callable[[plt.Axes, str, list[RunRecord]], None]
    needs: str | None = None  # a metric the loads drawn must carry
    log_y: bool = False  # a tail drawn on a logarithmic axis (a CCDF)


def _figure(records: list[RunRecord], kind: _Kind) -> Figure | None:
    """`kind` drawn from the loads with timed connections (and its metric): a panel per
    profile and page, a series per cell; None where no load has them."""
    panels = _panels([r for r in records if kind.needs is None or kind.needs in r.metrics])
    if not panels:
        return None
    # A study of many link points and pages ([C]: 9 x 5) wraps its panels into rows
    # rather than drawing one figure dozens of panels wide.
    columns = min(PANELS_PER_ROW, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns, 5 * rows), squeeze=False,
                             layout="constrained")  # fmt: skip
    cells = [ax for row in axes for ax in row]
    for ax, ((profile, page), by_series) in zip(cells, sorted(panels.items()), strict=False):
        for label, rs in sorted(by_series.items()):
            kind.draw(ax, label, rs)
        ax.set_title(f"{profile}, {page}", fontsize=9)
        ax.set_xlabel(kind.axes[0])
        ax.set_ylabel(kind.axes[1])
        if kind.log_y:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        _legend_below(ax, below_labels=True)
    for ax in cells[len(panels) :]:
        ax.set_visible(False)
    return Figure(kind.key, kind.title, kind.caption, _svg(fig))


def _idle_cdf(ax: plt.Axes, label: str, rs: list[RunRecord]) -> None:
    idle = [c.idle_ms or 0.0 for r in rs for c in _timed(r)]
    ax.ecdf(idle, label=f"{label} ({len(idle)} conn.)")


def _load_idle_cdf(ax: plt.Axes, label: str, rs: list[RunRecord]) -> None:
    ax.ecdf([r.metrics[LOAD_IDLE] for r in rs], label=f"{label} ({len(rs)} loads)")


def _setup_wait_cdf(ax: plt.Axes, label: str, rs: list[RunRecord]) -> None:
    shares = [r.metrics[SETUP_WAIT] / r.metrics["plt_ms"] for r in rs]
    ax.ecdf(shares, label=f"{label} ({len(rs)} loads)")


def _plt_ccdf(ax: plt.Axes, label: str, rs: list[RunRecord]) -> None:
    ax.ecdf([r.metrics["plt_ms"] / 1000 for r in rs], complementary=True,
            label=f"{label} ({len(rs)} loads)")  # fmt: skip


def _in_use(ax: plt.Axes, label: str, rs: list[RunRecord]) -> None:
    times, counts = in_use_over_the_load(_median_load(rs))
    ax.step([t / 1000 for t in times], counts, where="post", label=label)


IDLE_CDF = _Kind(
    "connections-idle-cdf",
    "Idle time of each connection",
    "Per cell, the CDF of its connections' idle time over every successful load: the "
    "time between a connection's first request and the end of its last response with "
    "no request outstanding on it (docs/metrics.md, 'Connections'). Not [K]'s idle "
    "time, which is the load's (the next figure).",
    ("idle time (ms)", "fraction of connections"),
    _idle_cdf,
)
LOAD_IDLE = "load_idle_ms"
LOAD_IDLE_CDF = _Kind(
    "load-idle-cdf",
    "Idle time of each load",
    "Per cell, the CDF of its successful loads' idle time, the connection-usage study's "
    "[K]: the time from navigation start to PLT with no request of the page outstanding "
    "on any connection, handshakes included (load_idle_ms; PLT minus it is the net "
    "transfer time, net_transfer_ms; docs/metrics.md, 'Connections').",
    ("idle time of the load (ms)", "fraction of loads"),
    _load_idle_cdf,
    needs=LOAD_IDLE,
)
SETUP_WAIT = "setup_wait_ms"
SETUP_WAIT_CDF = _Kind(
    "setup-wait-cdf",
    "Share of each load spent waiting on connection set-up",
    "Per cell, the CDF of its successful loads' share of PLT in which a connection was "
    "being set up (TCP's and TLS's handshakes) and no request of the page was "
    "outstanding: the parallel-connections study's [C] share of connection set-up in "
    "the response time (setup_wait_ms / PLT; docs/metrics.md, 'Connections').",
    ("share of PLT waiting on set-up", "fraction of loads"),
    _setup_wait_cdf,
    needs=SETUP_WAIT,
)
PLT_CCDF = _Kind(
    "plt-ccdf",
    "Page load time's tail per connection count",
    "Per cell, the CCDF of its successful loads' PLT on a logarithmic axis: the share "
    "of loads slower than each time, where a handshake's retransmission timeout (1 s "
    "today) shows as a step ([C]'s CCDF of response times). Drawn where one HTTP "
    "version is loaded with several connection counts.",
    ("PLT (s)", "fraction of loads slower"),
    _plt_ccdf,
    needs="plt_ms",
    log_y=True,
)
IN_USE = _Kind(
    "connections-over-the-load",
    "Connections carrying the page over the load",
    "Per cell, its median-PLT load: how many connections were between their first "
    "request and the end of their last response, from navigation start on (the "
    "connection studies' concurrency, [C] and [K]; its peak is the load's "
    "max_concurrent_connections).",
    ("time from navigation start (s)", "connections in use"),
    _in_use,
)


def idle_time_cdf(records: list[RunRecord]) -> Figure | None:
    """Per cell, the CDF of its connections' idle time over all its successful loads."""
    return _figure(records, IDLE_CDF)


def load_idle_time_cdf(records: list[RunRecord]) -> Figure | None:
    """Per cell, the CDF of its successful loads' idle time ([K]'s)."""
    return _figure(records, LOAD_IDLE_CDF)


def setup_wait_cdf(records: list[RunRecord]) -> Figure | None:
    """Per cell, the CDF of its successful loads' share of PLT waiting on set-up ([C]'s)."""
    return _figure(records, SETUP_WAIT_CDF)


def plt_ccdf(records: list[RunRecord]) -> Figure | None:
    """Per cell, the CCDF of its successful loads' PLT ([C]'s), where one HTTP version
    is loaded with several connection counts."""
    return _figure(records, PLT_CCDF) if connections_swept(r.cell for r in records) else None


def connections_over_the_load(records: list[RunRecord]) -> Figure | None:
    """Per cell, the connections carrying its median load over that load."""
    return _figure(records, IN_USE)
