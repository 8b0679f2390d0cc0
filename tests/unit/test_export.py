"""Export to CSV and Parquet: every record a row, every metric a column."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow.parquet as pq

from clarke.results import store
from clarke.results.journal import Journal
from clarke.results.meta import Meta
from clarke.results.record import Status
from helpers import record


def _dir(tmp_path: Path) -> Path:
    d = store.create(tmp_path, "t-x", Path("campaigns/smoke.yaml"), {}, Meta())
    with Journal.in_dir(d) as j:
        for i in range(4):
            j.append(record(i, status=Status.failed if i == 2 else Status.ok))
    return d


def test_csv(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    d = _dir(tmp_path)
    code, out, err = run_cli("results", "export", str(d), "--format", "csv")
    assert code == 0, err
    with (d / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    assert rows[0]["plt_ms"] == "100.0" and rows[0]["impl_link"] == "satlink"
    assert rows[2]["status"] == "failed" and rows[2]["plt_ms"] == ""
    assert rows[2]["reason"].startswith("fell back")


def test_parquet(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    d = _dir(tmp_path)
    out = tmp_path / "r.parquet"
    code, _, err = run_cli("results", "export", str(d), "--format", "parquet", "--out", str(out))
    assert code == 0, err
    t = pq.read_table(out).to_pylist()
    assert [r["plt_ms"] for r in t] == [100.0, 101.0, None, 103.0]
    assert t[1]["http"] == "2" and t[1]["repetition"] == 2
