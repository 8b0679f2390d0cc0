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


# Grafana's escapeRegex (public/app/core/utils/kbn and the InfluxDB datasource): the
# characters it escapes in a variable's value inside a /regex/.
_REGEX_SPECIAL = re.compile(r"[\\^$*+?.()|[\]{}/]")


def _variable_value(var: dict[str, object], value: str) -> str:
    """A template variable as the InfluxDB datasource interpolates it: "All" is the
    variable's allValue as it is; a chosen value of a multi or include-all variable is
    regex-escaped; any other variable's value goes in unchanged."""
    if value == "$__all":
        return str(var["allValue"])
    if var.get("multi") or var.get("includeAll"):
        return _REGEX_SPECIAL.sub(lambda m: "\\" + m.group(), value)
    return value


def _grafana_query(query: str, values: dict[str, str], board: dict, window: tuple[int, int]) -> str:
    """The query Grafana's InfluxQL backend runs: $timeFilter as `time >= Fms and time
    <= Tms` over the dashboard's time range, $__interval / $interval / $__interval_ms
    from the range over Grafana's 1000 data points (at least 1 ms), then the dashboard's
    variables (the longest names first, as $name and ${name})."""
    start_ms, end_ms = window
    interval_ms = max(1, (end_ms - start_ms) // 1000)
    query = query.replace("$timeFilter", f"time >= {start_ms}ms and time <= {end_ms}ms")
    query = query.replace("$__interval_ms", str(interval_ms))
    for macro in ("$__interval", "$interval"):
        query = query.replace(macro, f"{interval_ms}ms")
    variables = {v["name"]: v for v in board["templating"]["list"]}
    for name in sorted(variables, key=len, reverse=True):
        if name in values:
            value = _variable_value(variables[name], values[name])
            query = query.replace("${" + name + "}", value).replace("$" + name, value)
    assert "$" not in query.replace("$/", ""), f"left unsubstituted: {query}"
    return query


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
                    q = _grafana_query(var["query"], values, board, window)
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
                            q = _grafana_query(
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
                        q = _grafana_query(target["query"], values, board, window)
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
