"""Every dashboard panel's InfluxQL, with its template variables substituted, runs
against a real InfluxDB filled from recorded campaigns and returns rows:
tests/data/recorded-lan (44 loads, recorded before loads had per-connection rows),
tests/data/recorded-connections (6 loads over HTTP/1.1, /2 and /3, each with its
per-connection rows and concurrency metrics), tests/data/recorded-schedule (6 loads on
the schedule-check profile's square wave of delay) and tests/data/recorded-sites (12
loads of a generated page and a generated site, with and without the terminal's DNS
cache). The drill-down's connection panels return exactly the recorded rows of the
selected runs, and none for the older campaigns; the sites panel one row per site cell,
and none for the campaigns without sites; the link health dashboard's link-over-time
panels return the schedule's points and one point per verified load for
recorded-schedule, and nothing for the unscheduled ones. The nightly panels read
recorded-lan pushed as a `nightly` campaign and as a baseline."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from clarke.campaign.dimensions import BROWSER, CC, DNS_CACHE, HTTP, PROFILE, SITE, SITE_NONE
from clarke.results import store
from clarke.results.influx import InfluxSink, campaign_points, cell_summary_points
from clarke.results.journal import Journal
from clarke.results.record import RunRecord, Status
from grafana_expand import dashboard_query
from helpers import (
    RECORDED_CONNECTIONS,
    RECORDED_LAN,
    RECORDED_SCHEDULE,
    RECORDED_SITES,
    reads_connections,
)

pytestmark = pytest.mark.influx
RECORDED = RECORDED_LAN
CONNECTIONS = RECORDED_CONNECTIONS
SCHEDULE = RECORDED_SCHEDULE


def _records(directory: Path) -> list[RunRecord]:
    return list(Journal.in_dir(directory).records())


@pytest.fixture(scope="module")
def filled(influxd: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"{influxd}/dashboards"
    with InfluxSink.from_url(url) as sink:
        sink.ensure_database()
        for directory in (RECORDED, CONNECTIONS, SCHEDULE, RECORDED_SITES):
            meta, journal = store.open_existing(directory)
            records = list(journal.records())
            sink.write(records)
            sink.write_points(campaign_points(meta, records))
        records = _records(RECORDED)
        nightly = [
            r.model_copy(update={"campaign": "nightly", "campaign_id": "nightly-1"})
            for r in records
        ]
        sink.write_points(cell_summary_points(nightly, records[0].timestamp_ns))
        sink.write_points(
            cell_summary_points(nightly, records[0].timestamp_ns + 1, kind="baseline")
        )
    return url


def expected_rows(query: str, records: list[RunRecord], run: str | None) -> int | None:
    """The rows a panel's query must return from `records` (the selected campaign's),
    where the records say exactly how many: the failed loads, the per-connection rows and
    the loads with concurrency metrics of the selected run (None or "$__all": every run).
    None: any number but zero."""
    chosen = [r for r in records if run in (None, "$__all", r.run_id)]
    if '"site" !~' in query:  # one row per site cell with successful loads
        site_cells = {
            r.cell for r in records if r.status is Status.ok and r.cell[SITE] != SITE_NONE
        }
        dims = (SITE, DNS_CACHE, PROFILE, HTTP, CC, BROWSER)
        return len({tuple(c[d] for d in dims) for c in site_cells})
    if "'failed'" in query:
        return sum(r.status is Status.failed for r in records)
    if 'FROM "connection"' in query:
        return sum(len(r.details.per_connection) for r in chosen)
    if '"max_concurrent_connections"' in query:
        return sum("max_concurrent_connections" in r.metrics for r in chosen)
    if 'FROM "link_schedule"' in query:
        anchored = any(
            r.details.timeline is not None and r.details.timeline.has("navigation_unix_ms")
            for r in records
        )
        return None if anchored else 0
    crossed = re.search(r'"(link_(delay|rate)_forward_mean_\w+)"', query)
    if crossed:
        return sum(r.status is Status.ok and crossed.group(1) in r.metrics for r in records)
    return None


def _rows(sink: InfluxSink, q: str, where: tuple[str, ...]) -> int:
    res: dict[str, Any] = sink.query(q)["results"][0]  # type: ignore[index]
    assert "error" not in res, (*where, q, res)
    return sum(len(s["values"]) for s in res.get("series", []))


def _panels_on(
    sink: InfluxSink, campaign: Path, window: tuple[int, int]
) -> tuple[list[str], list[int]]:
    """Every panel of every dashboard with `campaign` selected. Each variable takes what
    Grafana would offer: the campaign variable that campaign's id (among its values),
    another query variable its first value or All, a custom variable each of its
    options. Returns a line per panel (the rows for each choice) and the rows of each
    query that reads per-connection data."""
    records = _records(campaign)
    campaign_id = records[0].campaign_id
    report = []
    connection_rows: list[int] = []
    for path in sorted(Path("dashboards/json").glob("*.json")):
        board = json.loads(path.read_text())
        values: dict[str, str] = {}
        choices: dict[str, list[str]] = {}
        for var in board["templating"]["list"]:  # in order: later ones use earlier
            if var["type"] == "query":
                q = dashboard_query(var["query"], values, board, window)
                res = sink.query(q)["results"][0]  # type: ignore[index]
                assert res.get("series"), (path.name, var["name"], res)
                found = [row[1] for s in res["series"] for row in s["values"]]
                if var["name"] == "campaign":
                    assert campaign_id in found, (path.name, found)
                    values["campaign"] = campaign_id
                    continue
                values[var["name"]] = "$__all" if var.get("includeAll") else found[0]
                if var.get("includeAll"):
                    choices[var["name"]] = ["$__all", found[0]]
            else:
                options = [o.strip() for o in var["query"].split(",")]
                values[var["name"]] = options[0]
                choices[var["name"]] = options
        for panel in board["panels"]:
            for target in panel["targets"]:
                picks = [
                    {**values, name: option}
                    for name, options in choices.items()
                    if "$" + name in target["query"]
                    for option in options
                ] or [values]
                rows_by_choice = []
                for picked in picks:
                    q = dashboard_query(target["query"], picked, board, window)
                    where = (campaign.name, path.name, panel["title"], str(picked))
                    rows = _rows(sink, q, where)
                    expected = expected_rows(q, records, picked.get("run"))
                    if expected is None:
                        assert rows > 0, where
                    else:
                        assert rows == expected, (*where, rows, expected)
                    rows_by_choice.append(rows)
                    if reads_connections(q):
                        connection_rows.append(rows)
                report.append(f"{campaign.name}: {path.stem}: {panel['title']}: {rows_by_choice}")
    return report, connection_rows


def test_every_panel_returns_rows(filled: str) -> None:
    """Each panel with each recorded campaign selected; the time range covers both
    campaigns (the dashboards' own "now-…" would miss old records). The connection panels
    must return rows for recorded-connections. Prints the rows per panel and choice."""
    recorded = (RECORDED, CONNECTIONS, SCHEDULE, RECORDED_SITES)
    times = [r.timestamp_ns // 1_000_000 for d in recorded for r in _records(d)]
    window = (min(times) - 3_600_000, max(times) + 3_600_000)
    with InfluxSink.from_url(filled) as sink:
        old, old_connection_rows = _panels_on(sink, RECORDED, window)
        new, connection_rows = _panels_on(sink, CONNECTIONS, window)
        scheduled, _ = _panels_on(sink, SCHEDULE, window)
        sites, _ = _panels_on(sink, RECORDED_SITES, window)
    print("\n" + "\n".join(old + new + scheduled + sites))
    assert len(old) == len(new) == len(scheduled) == len(sites) >= 15
    # The sites panel: a row per site cell (4: HTTP/2 and /3, with and without the
    # terminal's cache) for the campaign with sites, none for the others.
    [site_panel] = [line for line in sites if "Recorded sites" in line]
    assert site_panel.endswith("[4, 4]"), site_panel
    # Two panels, each with the schedule and the loads as its two queries.
    over_time = [line for line in scheduled if "over time, with the loads" in line]
    assert len(over_time) == 4 and all(not line.endswith("[0]") for line in over_time)
    # Two drill-down panels (per connection, per load), each for All runs and one run,
    # and for All browsers and one.
    assert len(connection_rows) == 8 and all(rows > 0 for rows in connection_rows)
    assert old_connection_rows == [0] * 8


def test_recorded_campaign_is_complete() -> None:
    records = _records(RECORDED)
    assert len({r.run_id for r in records}) == 44


def test_connections_recording_has_rows_for_every_http_version() -> None:
    """recorded-connections: every load verified, and each has per-connection rows of its
    own protocol that carried all of the page's requests, with browser timings, and the
    load's concurrency metrics."""
    records = _records(CONNECTIONS)
    assert {r.cell[HTTP] for r in records} == {"1.1", "2", "3"} and len(records) == 6
    protocol = {"1.1": "h1", "2": "h2", "3": "h3"}
    for r in records:
        rows = r.details.per_connection
        assert r.status is Status.ok and rows, r.run_id
        assert {row.protocol for row in rows} == {protocol[r.cell[HTTP]]}, r.run_id
        assert all(row.requests_timed == row.requests for row in rows), r.run_id
        assert {"max_concurrent_connections", "max_concurrent_requests"} <= set(r.metrics)
