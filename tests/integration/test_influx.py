"""Results into a real InfluxDB 1.x: push, read back, push again without duplicates,
and a clear error when InfluxDB is down."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clarke.results import store
from clarke.results.influx import InfluxSink
from clarke.results.journal import Journal
from clarke.results.meta import Meta
from clarke.results.record import Status
from conftest import free_port
from helpers import record

pytestmark = pytest.mark.influx


def _results_dir(tmp_path: Path, n: int, campaign_id: str) -> Path:
    d = store.create(
        tmp_path, campaign_id, Path("campaigns/smoke.yaml"), {"runs": []}, Meta(campaign="t")
    )
    with Journal.in_dir(d) as j:
        for i in range(n):
            j.append(
                record(i, campaign_id=campaign_id, status=Status.failed if i == 3 else Status.ok)
            )
    return d


def _count(sink: InfluxSink, campaign_id: str) -> dict[str, int]:
    res = sink.query(
        f'SELECT count("attempt") FROM page_load WHERE campaign_id = {campaign_id!r} '
        "GROUP BY status"
    )
    series = res["results"][0].get("series", [])
    return {s["tags"]["status"]: s["values"][0][1] for s in series}


def _rows(sink: InfluxSink, query: str) -> list[dict[str, Any]]:
    """The rows of a query's one series, each by column name."""
    series = sink.query(query)["results"][0]["series"][0]
    return [dict(zip(series["columns"], values, strict=True)) for values in series["values"]]


def test_push_query_and_push_again(influxd: str, tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    cid = "t-push"
    d = _results_dir(tmp_path, 7, cid)
    url = f"{influxd}/clarke_test"
    code, out, err = run_cli("results", "push", str(d), "--influx", url)
    assert code == 0, err
    assert "7 records and 3 summary points written" in out
    with InfluxSink.from_url(url) as sink:
        assert _count(sink, cid) == {"ok": 6, "failed": 1}
        (row,) = _rows(
            sink,
            f"SELECT plt_ms, fcp_ms, lcp_ms, http, cc, page, impl_link, reason FROM page_load "
            f"WHERE campaign_id = '{cid}' AND status = 'ok' ORDER BY time LIMIT 1",
        )
        assert row["time"] == "2026-11-22T12:00:00Z"
        assert (row["plt_ms"], row["fcp_ms"], row["lcp_ms"]) == (100.0, 50.5, 80.25)
        assert (row["http"], row["cc"], row["page"], row["impl_link"]) == (
            "2",
            "bbr",
            "uniform-100k",
            "satlink",
        )
        failed = _rows(
            sink, f"SELECT reason FROM page_load WHERE campaign_id = '{cid}' AND status = 'failed'"
        )
        assert [f["reason"] for f in failed] == ["fell back to h2: 3 of 9 resources"]

    code, _, err = run_cli("results", "push", str(d), "--influx", url)
    assert code == 0, err
    with InfluxSink.from_url(url) as sink:
        assert _count(sink, cid) == {"ok": 6, "failed": 1}
        summary = _rows(
            sink,
            f"SELECT n, mean, ci_low, ci_high, ok, failed FROM cell_summary "
            f"WHERE campaign_id = '{cid}' AND metric = 'plt_ms'",
        )
        assert len(summary) == 1  # pushed twice, stored once
        row = summary[0]
        assert (row["n"], row["ok"], row["failed"]) == (6, 6, 1)
        assert row["ci_low"] < row["mean"] < row["ci_high"]


def test_influx_down_is_a_clear_error(tmp_path: Path, run_cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("clarke.results.influx.ATTEMPTS", 2)
    d = _results_dir(tmp_path, 2, "t-down")
    code, _, err = run_cli("results", "push", str(d), "--influx", f"http://127.0.0.1:{free_port()}")
    assert code == 1
    assert err.startswith("Results sink: InfluxDB at http://127.0.0.1:") and "ConnectError" in err


def test_bad_url_is_input_error(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    d = _results_dir(tmp_path, 1, "t-url")
    code, _, err = run_cli("results", "push", str(d), "--influx", "influx.local:8086")
    assert code == 2 and "expected http://host:port[/database]" in err
