"""Every dashboard panel's InfluxQL, with its template variables substituted, runs
against a real InfluxDB filled from a recorded campaign (tests/data/recorded-lan) and
returns rows. The nightly panels read the same records pushed as a `nightly` campaign
and as a baseline."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clarke.results import store
from clarke.results.influx import InfluxSink, campaign_points, cell_summary_points
from clarke.results.journal import Journal
from clarke.results.record import Status

pytestmark = pytest.mark.influx
RECORDED = Path("tests/data/recorded-lan")


def _substitute(query: str, values: dict[str, str]) -> str:
    query = query.replace("$timeFilter", "time > 0")
    return re.sub(r"\$(\w+)", lambda m: values[m.group(1)], query)


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
    meta, _ = store.open_existing(RECORDED)
    values = {
        "campaign": meta["campaign_id"],
        "metric": "plt_ms",
        "run": ".*",
        "profile": ".*",
        "http": ".*",
        "cc": ".*",
        "page": ".*",
    }
    checked = 0
    failed = sum(r.status is Status.failed for r in Journal.in_dir(RECORDED).records())
    with InfluxSink.from_url(filled) as sink:
        for path in sorted(Path("dashboards/json").glob("*.json")):
            board = json.loads(path.read_text())
            for var in board["templating"]["list"]:
                if var["type"] == "query":
                    res = sink.query(_substitute(var["query"], values))["results"][0]
                    assert res.get("series"), (path.name, var["name"], res)
            for panel in board["panels"]:
                for target in panel["targets"]:
                    q = _substitute(target["query"], values)
                    res = sink.query(q)["results"][0]
                    assert "error" not in res, (path.name, panel["title"], res)
                    rows = sum(len(s["values"]) for s in res.get("series", []))
                    if "'failed'" in q:  # as many rows as the campaign has failed attempts
                        assert rows == failed, (path.name, panel["title"], q)
                    else:
                        assert rows > 0, (path.name, panel["title"], q)
                    checked += 1
    assert checked >= 10


def test_recorded_campaign_is_complete() -> None:
    records = list(Journal.in_dir(RECORDED).records())
    assert len({r.run_id for r in records}) == 44
