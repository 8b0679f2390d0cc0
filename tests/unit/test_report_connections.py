"""The report's Connections section, from two recorded campaigns: one whose loads carry
per-connection rows (its medians, recomputed here from the journal) and one recorded
before them (only the server's connection count)."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from clarke.campaign.dimensions import CONNECTIONS, HTTP
from clarke.report.html import CONNECTION_METRICS, build
from clarke.results.journal import Journal
from clarke.results.record import Status

WITH_ROWS = Path("tests/data/recorded-connections")
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
            f"{statistics.median(r.metrics[m] for r in loads):,.0f}"
            for m, _, _ in CONNECTION_METRICS
        ]
        assert cells == want, (http, cells, want)


def test_results_recorded_before_the_rows_show_only_what_they_have() -> None:
    """recorded-lan has the server's connection count, not the browser-joined rows."""
    rows = re.findall(r"<tr><td>(.*?)</tr>", _section(build(BEFORE_ROWS)))
    assert rows
    for row in rows:
        cells = re.findall(r'<td class="n">([^<]*)</td>', row)
        assert cells[2] != "-" and cells[3:] == ["-", "-", "-"], row
