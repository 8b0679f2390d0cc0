"""Flat tables of a campaign's records, for spreadsheets and data frames: one row per
page-load attempt, every matrix dimension and metric a column; or one row per cell, the
summary's full table (the terminal shows a narrower one). CSV through the standard
library, Parquet through pyarrow."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from clarke.campaign import dimensions
from clarke.json_value import JsonObject
from clarke.results.record import KNOWN_METRICS, RunRecord
from clarke.results.summary import METRICS, CellSummary

# The record's own columns, around its cell's: one column per dimension of the matrix
# (clarke.campaign.dimensions), under its record field's name.
LEADING = ("campaign", "campaign_id", "run_id", "run_index", "attempt")
TRAILING = (
    "page",
    "repetition",
    "engine",
    "isolation",
    "priority_signals",
    "browser_version",
    "git_rev",
    "shard",
    "testbed",
    "started_at",
    "finished_at",
    "status",
    "reason",
)


def rows(records: list[RunRecord]) -> tuple[list[str], list[JsonObject]]:
    metric_names = list(KNOWN_METRICS) + sorted(
        {m for r in records for m in r.metrics} - set(KNOWN_METRICS)
    )
    roles = sorted({role for r in records for role in r.implementations})
    cell_columns = [d.name for d in dimensions.seal()]
    columns = [*LEADING, *cell_columns, *TRAILING, "scenarios"]
    columns += [*(f"impl_{r}" for r in roles), *metric_names]
    out = []
    for r in records:
        row: JsonObject = {c: getattr(r, c) for c in (*LEADING, *TRAILING)}
        row |= r.cell.record()
        row["status"] = r.status.value
        row["started_at"] = r.started_at.isoformat()
        row["finished_at"] = r.finished_at.isoformat()
        row["scenarios"] = ",".join(r.scenarios)
        for role in roles:
            row[f"impl_{role}"] = r.implementations.get(role, "")
        for m in metric_names:
            row[m] = r.metrics.get(m)
        out.append(row)
    return columns, out


def cell_rows(cells: list[CellSummary]) -> tuple[list[str], list[JsonObject]]:
    """One row per cell: every dimension, the page, its successful and failed runs; per
    metric n, mean, median, the 95 % CI of the mean and whether it rests on too few
    loads (`<metric>_few`); with sequential repetitions how the cell stopped and its
    interval for the median (`stop_*`)."""
    sequential = any(c.stop is not None for c in cells)
    columns = [d.name for d in dimensions.seal()] + ["page", "ok", "failed"]
    if sequential:
        columns += ["stop", "stop_loads", "stop_runs", "stop_median", "stop_low", "stop_high"]
        columns += ["stop_half_width", "stop_confidence"]
    for m in METRICS:
        columns += [f"{m}_{k}" for k in ("n", "mean", "median", "ci_low", "ci_high", "few")]
    out = []
    for c in cells:
        row: JsonObject = {**c.cell.record(), "page": c.cell.page}
        row |= {"ok": c.ok, "failed": c.failed}
        if c.stop is not None:
            i = c.stop.interval
            row |= {
                "stop": c.stop.stop.value,
                "stop_loads": i.n,
                "stop_runs": c.stop.tried,
                "stop_median": i.median,
                "stop_low": i.low if i.bounded else None,
                "stop_high": i.high if i.bounded else None,
                "stop_half_width": i.relative_half_width if i.bounded else None,
                "stop_confidence": i.confidence,
            }
        for m in METRICS:
            s = c.metrics.get(m)
            if s is not None:
                row |= {f"{m}_n": s.n, f"{m}_mean": s.mean, f"{m}_median": s.median}
                row |= {f"{m}_few": s.few}
                if s.n >= 2:
                    row |= {f"{m}_ci_low": s.ci_low, f"{m}_ci_high": s.ci_high}
        out.append({k: row.get(k) for k in columns})
    return columns, out


def write_csv(records: list[RunRecord], path: Path) -> None:
    _write_csv(*rows(records), path)


def write_cells_csv(cells: list[CellSummary], path: Path) -> None:
    _write_csv(*cell_rows(cells), path)


def _write_csv(columns: list[str], data: list[JsonObject], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for row in data:
            w.writerow({k: "" if v is None else v for k, v in row.items()})


def write_parquet(records: list[RunRecord], path: Path) -> None:
    _write_parquet(*rows(records), {"records": len(records)}, path)


def write_cells_parquet(cells: list[CellSummary], path: Path) -> None:
    _write_parquet(*cell_rows(cells), {"cells": len(cells)}, path)


def _write_parquet(
    columns: list[str], data: list[JsonObject], about: JsonObject, path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(data, schema=None).select(columns)
    meta = {b"clarke": json.dumps(about).encode()}
    pq.write_table(table.replace_schema_metadata(meta), path)
