"""The report's Connections section, from two recorded campaigns: one whose loads carry
per-connection rows (its medians, recomputed here from the journal) and one recorded
before them (only the server's connection count); and its figures of the connection
studies, from recorded loads."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from clarke.campaign.dimensions import CONNECTIONS, HTTP
from clarke.report.connections import in_use_over_the_load
from clarke.report.html import CONNECTION_METRICS, build
from clarke.results.journal import Journal
from clarke.results.record import Status

WITH_ROWS = Path("tests/data/recorded-connections")
WITH_LOAD_FIGURES = Path("tests/data/recorded-connection-usage")  # [K]'s, on lte-like
WITH_SETUP_WAIT = Path("tests/data/recorded-setup-wait")  # [C]'s, with and without loss
BEFORE_ROWS = Path("tests/data/recorded-lan")


def _section(page: str) -> str:
    return page.split("<h2>Connections</h2>", 1)[1].split("<h2>", 1)[0]


def test_the_connections_table_holds_each_cells_medians() -> None:
    section = _section(build(WITH_ROWS))
    rows = re.findall(r"<tr><td>(.*?)</tr>", section)
    ok = [r for r in Journal.in_dir(WITH_ROWS).records() if r.status is Status.ok]
    assert len(rows) == len({(r.cell[HTTP], r.cell[CONNECTIONS]) for r in ok}) == 3
    for http in ("1.1", "2", "3"):
        loads = [r for r in ok if r.cell[HTTP] == http]
        row = next(r for r in rows if r.startswith(f"lan</td><td>{http}</td>"))
        cells = re.findall(r'<td class="n">([^<]*)</td>', row)
        want = [str(loads[0].cell[CONNECTIONS]), str(len(loads))] + [
            f"{statistics.median(r.metrics[m] for r in loads):,.{digits}f}"
            if m in loads[0].metrics
            else "-"  # recorded before the load's [K] figures
            for m, _, digits in CONNECTION_METRICS
        ]
        assert cells == want, (http, cells, want)


def test_the_connections_table_holds_the_loads_connection_usage_medians() -> None:
    """recorded-connection-usage: 1 and 6 HTTP/1.1 connections and HTTP/2, each load with
    [K]'s idle time, net transfer time and effective concurrency."""
    rows = re.findall(r"<tr><td>(.*?)</tr>", _section(build(WITH_LOAD_FIGURES)))
    ok = [r for r in Journal.in_dir(WITH_LOAD_FIGURES).records() if r.status is Status.ok]
    cells = {(r.cell[HTTP], r.cell[CONNECTIONS]) for r in ok}
    assert len(rows) == len(cells) == 3
    for http, connections in cells:
        loads = [r for r in ok if (r.cell[HTTP], r.cell[CONNECTIONS]) == (http, connections)]
        row = next(
            r
            for r in rows
            if re.search(rf"<td>{re.escape(http)}</td>.*<td class=\"n\">{connections}</td>", r)
        )
        columns = re.findall(r'<td class="n">([^<]*)</td>', row)[-len(CONNECTION_METRICS) :]
        got = {m: v for (m, _, _), v in zip(CONNECTION_METRICS, columns, strict=True)}
        for m, _, digits in CONNECTION_METRICS:
            if m in ("load_idle_ms", "net_transfer_ms", "effective_concurrency"):
                want = f"{statistics.median(r.metrics[m] for r in loads):,.{digits}f}"
                assert got[m] == want, (http, connections, m, got[m], want)
        assert got["setup_wait_ms"] == "-"  # recorded before [C]'s set-up wait
        # One connection in flight at a time over HTTP/1.1 with one connection, and on
        # HTTP/2's one connection; several at once with six.
        concurrency = float(got["effective_concurrency"])
        assert concurrency == 1.0 if http == "2" or connections == 1 else concurrency > 1.5


def test_results_recorded_before_the_rows_show_only_what_they_have() -> None:
    """recorded-lan has the server's connection count, not the browser-joined rows."""
    rows = re.findall(r"<tr><td>(.*?)</tr>", _section(build(BEFORE_ROWS)))
    assert rows
    for row in rows:
        cells = re.findall(r'<td class="n">([^<]*)</td>', row)
        assert cells[2] != "-" and cells[3:] == ["-"] * (len(CONNECTION_METRICS) - 1), row


SITES = Path("tests/data/recorded-sites")  # recorded site loads: up to 10 connections at once


def test_the_connections_over_a_load_peak_at_its_recorded_concurrency() -> None:
    """The step curve of every recorded load with timed rows rises to the load's own
    max_concurrent_connections (computed when it was recorded, by another function), and
    never falls below zero or ends with a connection still counted."""
    checked = 0
    for d in (WITH_ROWS, WITH_LOAD_FIGURES, SITES, Path("tests/data/recorded-dimensions")):
        for r in Journal.in_dir(d).records():
            if r.status is not Status.ok or "max_concurrent_connections" not in r.metrics:
                continue
            times, counts = in_use_over_the_load(r)
            assert times == sorted(times) and min(counts) >= 0 and counts[-1] == 0, r.run_id
            assert max(counts) == r.metrics["max_concurrent_connections"], r.run_id
            checked += 1
    assert checked >= 30


def test_the_figures_count_every_timed_connection_and_need_timed_rows() -> None:
    page = build(SITES)
    for key in ("connections-idle-cdf", "connections-over-the-load"):
        assert f'id="fig-{key}"' in page, key
    ok = [r for r in Journal.in_dir(SITES).records() if r.status is Status.ok]
    labels = [int(n) for n in re.findall(r"\((\d+) conn\.\)", page)]
    timed = sum(c.first_request_ms is not None for r in ok for c in r.details.per_connection)
    assert sum(labels) == timed > 100, (labels, timed)
    assert 'id="fig-load-idle-cdf"' not in page  # recorded before the loads' figures
    # Loads without the browser-joined rows: none of the figures.
    before = build(BEFORE_ROWS)
    assert "fig-connections-idle-cdf" not in before
    assert "fig-connections-over-the-load" not in before


def test_the_load_idle_cdf_counts_every_load_with_the_figure() -> None:
    page = build(WITH_LOAD_FIGURES)
    assert 'id="fig-load-idle-cdf"' in page
    labels = [int(n) for n in re.findall(r"\((\d+) loads\)", _figure(page, "load-idle-cdf"))]
    ok = [r for r in Journal.in_dir(WITH_LOAD_FIGURES).records() if r.status is Status.ok]
    assert sum(labels) == len(ok) == 9 and all("load_idle_ms" in r.metrics for r in ok)


def _figure(page: str, key: str) -> str:
    return page.split(f'id="fig-{key}"', 1)[1].split("</figure>", 1)[0]


def test_the_set_up_wait_column_and_figure_come_from_each_loads_figure() -> None:
    """recorded-setup-wait ([C]'s shape: 1 and 5 HTTP/1.1 connections, with and without
    10 % loss towards the client): each load waited on set-up for part of its idle time
    only; the table's column is each cell's median; the figure counts every load once;
    results recorded before the figure have neither."""
    page = build(WITH_SETUP_WAIT)
    ok = [r for r in Journal.in_dir(WITH_SETUP_WAIT).records() if r.status is Status.ok]
    assert len(ok) == 12
    for r in ok:
        assert 0 < r.metrics["setup_wait_ms"] <= r.metrics["load_idle_ms"], r.run_id
    names = [m for m, _, _ in CONNECTION_METRICS]
    section = _section(page)
    at_loss = re.findall(r"<th>([^<]*)</th>", section).index("forward loss")
    for row in re.findall(r"<tr><td>(.*?)</tr>", section):
        columns = re.findall(r'<td class="n">([^<]*)</td>', row)
        connections = int(columns[0])
        loss = re.sub(r"^<td>", "", row.split("</td>")[at_loss])
        loads = [
            r
            for r in ok
            if (r.cell[CONNECTIONS], r.cell.texts()["forward_loss"]) == (connections, loss)
        ]
        assert len(loads) == 3, (row, loss, connections)
        want = statistics.median(r.metrics["setup_wait_ms"] for r in loads)
        assert columns[-len(names) :][names.index("setup_wait_ms")] == f"{want:,.0f}", row
    labels = [int(n) for n in re.findall(r"\((\d+) loads\)", _figure(page, "setup-wait-cdf"))]
    assert sum(labels) == len(ok), labels
    assert 'id="fig-setup-wait-cdf"' not in build(WITH_LOAD_FIGURES)


def test_the_plt_ccdf_draws_every_load_where_connections_are_the_variable() -> None:
    """[C]'s CCDF of response times: one line per cell, every successful load once,
    labelled by the version and the connection count, the swept loss left to the panel's
    title (repeated in each of [C]'s 45 labels it squeezed the panels to nothing); not
    where the connection count only follows the HTTP version (recorded-connections: 1
    for HTTP/1.1, 6 for /2 and /3)."""
    figure = _figure(build(WITH_SETUP_WAIT), "plt-ccdf")
    labels = [int(n) for n in re.findall(r"\((\d+) loads\)", figure)]
    assert sum(labels) == 12 and len(labels) == 4, labels
    assert "HTTP/1.1, 5 conn. per server (3 loads)" in figure
    assert "wired-10m-50ms+forward_loss=0.1, equal5-1m" in figure
    assert "forward loss" not in figure
    assert 'id="fig-plt-ccdf"' not in build(WITH_ROWS)
