"""The studies' object-completion metrics beside the W3C ones: their definitions on
resource timings built for the purpose, and the report drawn with either family from a
recorded campaign (tests/data/recorded-lan, real loads whose journal predates the
object metrics, so they are derived from the stored resource timings)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from clarke.browser.load import metrics_of
from clarke.results.metric_families import metrics_of_record, object_metrics

RECORDED = Path("tests/data/recorded-lan")


def _entry(name: str, end: float, size: int) -> dict[str, object]:
    return {"name": f"https://www.clarke.test/p/{name}", "responseEnd": end,
            "decodedBodySize": size, "encodedBodySize": size}  # fmt: skip


def test_first_largest_and_last_object() -> None:
    resources = [
        _entry("o1.jpg", 900.0, 50_000),  # the largest, ends second-last
        _entry("o2.jpg", 300.0, 10_000),  # ends first
        _entry("o3.jpg", 1200.0, 20_000),  # ends last
        _entry("o4.jpg", 600.0, 50_000),  # as large as o1, ends earlier
    ]
    assert object_metrics(resources) == {
        "first_object_ms": 300.0,
        "largest_object_ms": 900.0,  # the last of the equally largest objects
        "last_object_ms": 1200.0,
    }


def test_entries_without_an_end_or_a_size() -> None:
    no_end = {"name": "x", "responseEnd": 0, "decodedBodySize": 99_999}
    no_size = {"name": "y", "responseEnd": 500.0}
    assert object_metrics([no_end]) == {}
    assert object_metrics([no_size, _entry("o1.jpg", 400.0, 10)]) == {
        "first_object_ms": 400.0,
        "largest_object_ms": 400.0,
        "last_object_ms": 500.0,
    }
    assert object_metrics([no_size]) == {"first_object_ms": 500.0, "last_object_ms": 500.0}


def test_a_load_reports_them_and_a_recorded_load_gets_them_from_its_timings() -> None:
    for line in RECORDED.joinpath("journal.jsonl").read_text().splitlines():
        record = json.loads(line)
        resources = record["details"]["resources"]
        raw = {"navigation": {"loadEventStart": record["metrics"]["plt_ms"]},
               "resources": resources}  # fmt: skip
        fresh = metrics_of(raw)
        derived = metrics_of_record(record["metrics"], record["details"]["resources"])
        for key in ("first_object_ms", "largest_object_ms", "last_object_ms"):
            assert fresh[key] == derived[key], (record["run_id"], key)
        ends = sorted(r["responseEnd"] for r in resources)
        assert derived["first_object_ms"] == ends[0] and derived["last_object_ms"] == ends[-1]
        if record["model"] in ("single", "uniform"):  # every object the largest
            assert derived["largest_object_ms"] == derived["last_object_ms"], record["run_id"]
        assert derived["last_object_ms"] <= record["metrics"]["plt_ms"], record["run_id"]


def _cell_median(family_metric: str, run_prefix: str) -> float:
    values = []
    for line in RECORDED.joinpath("journal.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["run_id"].startswith(run_prefix) and record["status"] == "ok":
            values.append(
                metrics_of_record(record["metrics"], record["details"]["resources"])[family_metric]
            )
    return statistics.median(values)


def test_the_report_with_either_family(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    pages = {}
    for family in ("w3c", "objects"):
        out = tmp_path / f"{family}.html"
        code, _, err = run_cli("report", str(RECORDED), "--metrics", family, "--out", str(out))
        assert code == 0, err
        pages[family] = out.read_text()
    assert "Metrics: <b>w3c</b>" in pages["w3c"] and "Metrics: <b>objects</b>" in pages["objects"]
    assert "FCP and LCP: uniform against triangular" in pages["w3c"]
    assert "first object and largest object: uniform against triangular" in pages["objects"]
    assert "first object mean ms" in pages["objects"] and "FCP mean" not in pages["objects"]
    # The per-cell table's median for one cell, against the journal's own timings.
    row = re.search(r"<tr><td>lan</td><td>2</td><td>bbr</td><td>triangular</td>"
                    r"<td>500k</td><td>none</td><td>none</td>(.*?)</tr>",
                    pages["objects"])  # fmt: skip
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
    # after cross traffic and PEP (none, none): connections, ok, failed, then mean, median,
    # CI for PLT, first object, largest object
    assert cells[0] == "6"
    first_median = float(cells[7].replace(",", ""))
    assert first_median == round(_cell_median("first_object_ms", "lan-h2-bbr-triangular-500k"))
    code, _, err = run_cli("report", str(RECORDED), "--metrics", "paint")
    assert code == 2 and "paint" in err and "w3c" in err and "objects" in err
