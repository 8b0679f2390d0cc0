"""Every dashboard panel's InfluxQL, with its template variables substituted, runs
against a real InfluxDB filled from a recorded campaign (tests/data/recorded-lan) and
returns rows. The nightly panels read the same records pushed as a `nightly` campaign
and as a baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clarke.results import store
from clarke.results.influx import InfluxSink, campaign_points, cell_summary_points
from clarke.results.journal import Journal
from clarke.results.record import Status
from grafana_expand import dashboard_query

pytestmark = pytest.mark.influx
RECORDED = Path("tests/data/recorded-lan")


@pytest.fixture(scope="module")
def filled(influxd: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"{influxd}/dashboards"
    meta, journal = store.open_existing(RECORDED)
    records = list(journal.records())
    nightly = [
        r.model_copy(update={"campaign": "nightly", "campaign_id": "nightly-1"}) for r in records
    ]
    with InfluxSink.from_url(url) as sink:
        sink.ensure_database()
        sink.write(records)
        sink.write_points(campaign_points(meta, records))
        sink.write_points(cell_summary_points(nightly, records[0].timestamp_ns))
        sink.write_points(
            cell_summary_points(nightly, records[0].timestamp_ns + 1, kind="baseline")
        )
    return url


def test_every_panel_returns_rows(filled: str) -> None:
    """Each variable takes what Grafana would offer: a query variable its first value
    (the campaign, a run) or All, a custom variable each of its options; the time range
    covers the recorded campaign (the dashboards' own "now-…" would miss old records).
    Prints the rows per panel."""
    records = list(Journal.in_dir(RECORDED).records())
    times = [r.timestamp_ns // 1_000_000 for r in records]
    window = (min(times) - 3_600_000, max(times) + 3_600_000)
    failed = sum(r.status is Status.failed for r in records)
    checked = 0
    report = []
    with InfluxSink.from_url(filled) as sink:
        for path in sorted(Path("dashboards/json").glob("*.json")):
            board = json.loads(path.read_text())
            values: dict[str, str] = {}
            choices: dict[str, list[str]] = {}
            for var in board["templating"]["list"]:  # in order: later ones use earlier
                if var["type"] == "query":
                    q = dashboard_query(var["query"], values, board, window)
                    res = sink.query(q)["results"][0]
                    assert res.get("series"), (path.name, var["name"], res)
                    found = [row[1] for s in res["series"] for row in s["values"]]
                    values[var["name"]] = "$__all" if var.get("includeAll") else found[0]
                    if var.get("includeAll"):
                        choices[var["name"]] = ["$__all", found[0]]
                else:
                    options = [o.strip() for o in var["query"].split(",")]
                    values[var["name"]] = options[0]
                    choices[var["name"]] = options
            for panel in board["panels"]:
                for target in panel["targets"]:
                    rows_by_choice = []
                    for name, options in choices.items():
                        if "$" + name not in target["query"]:
                            continue
                        for option in options:
                            q = dashboard_query(
                                target["query"], {**values, name: option}, board, window
                            )
                            res = sink.query(q)["results"][0]
                            assert "error" not in res, (path.name, panel["title"], q, res)
                            rows = sum(len(s["values"]) for s in res.get("series", []))
                            rows_by_choice.append(rows)
                            if "'failed'" in q:
                                assert rows == failed, (path.name, panel["title"], q)
                            else:
                                assert rows > 0, (path.name, panel["title"], name, option, q)
                    if not rows_by_choice:
                        q = dashboard_query(target["query"], values, board, window)
                        res = sink.query(q)["results"][0]
                        assert "error" not in res, (path.name, panel["title"], q, res)
                        rows = sum(len(s["values"]) for s in res.get("series", []))
                        assert rows == failed if "'failed'" in q else rows > 0, (path.name, q)
                        rows_by_choice.append(rows)
                    report.append(f"{path.stem}: {panel['title']}: rows {rows_by_choice}")
                    checked += 1
    print("\n" + "\n".join(report))
    assert checked >= 10


def test_recorded_campaign_is_complete() -> None:
    records = list(Journal.in_dir(RECORDED).records())
    assert len({r.run_id for r in records}) == 44
