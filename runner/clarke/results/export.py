"""Flat tables of a campaign's records, for spreadsheets and data frames: one row per
page-load attempt, every matrix dimension and metric a column. CSV through the standard
library, Parquet through pyarrow."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from clarke.campaign import dimensions
from clarke.results.record import KNOWN_METRICS, RunRecord

# The record's own columns, around its cell's: one column per dimension of the matrix
# (clarke.campaign.dimensions), under its record field's name.
LEADING = ("campaign", "campaign_id", "run_id", "run_index", "attempt")
TRAILING = (
    "page",
    "repetition",
    "engine",
    "browser_version",
    "git_rev",
    "shard",
    "testbed",
    "started_at",
    "finished_at",
    "status",
    "reason",
)


def rows(records: list[RunRecord]) -> tuple[list[str], list[dict[str, Any]]]:
    metric_names = list(KNOWN_METRICS) + sorted(
        {m for r in records for m in r.metrics} - set(KNOWN_METRICS)
    )
    roles = sorted({role for r in records for role in r.implementations})
    cell_columns = [d.name for d in dimensions.seal()]
    columns = [*LEADING, *cell_columns, *TRAILING, "scenarios"]
    columns += [*(f"impl_{r}" for r in roles), *metric_names]
    out = []
    for r in records:
        row: dict[str, Any] = {c: getattr(r, c) for c in (*LEADING, *TRAILING)}
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


def write_csv(records: list[RunRecord], path: Path) -> None:
    columns, data = rows(records)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for row in data:
            w.writerow({k: "" if v is None else v for k, v in row.items()})


def write_parquet(records: list[RunRecord], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns, data = rows(records)
    table = pa.Table.from_pylist(data, schema=None).select(columns)
    meta = {b"clarke": json.dumps({"records": len(records)}).encode()}
    pq.write_table(table.replace_schema_metadata(meta), path)
