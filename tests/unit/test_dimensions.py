"""The run matrix's dimensions, declared once (clarke.campaign.dimensions): a toy
dimension declared in one place reaches the plan, the run id, the record, InfluxDB, the
summary and the report; a cell is read by dimension; what records keep parses back."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from clarke.campaign import dimensions
from clarke.campaign.cross import CrossTraffic
from clarke.campaign.dimension import Dimension
from clarke.campaign.dimensions import CROSS_TRAFFIC, HTTP, PROFILE, Cell
from clarke.campaign.plan import plan_file
from clarke.results.journal import Journal
from clarke.vocab import HttpVersion

TESTS = Path(__file__).resolve().parents[1]
RUNNER = TESTS.parent / "runner" / "clarke"


def test_a_toy_dimension_declared_once_reaches_everything(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(TESTS / "toy_dimension.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=TESTS.parent,
        env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    values = ["cold", "warm", "cold", "warm"]
    assert found["run_ids"] == [
        f"lan-h2-bbr-uniform-100k-w{v}-r{rep}" for rep in (1, 2) for v in ("cold", "warm")
    ]
    assert found["plan"] == found["applied"] == found["journal"] == found["records"] == values
    assert all(f",warmth={v} " in line for v, line in zip(values, found["influx"], strict=True))
    # The summary's cells column names the dimension that varies; the rest are said once.
    summary = found["summary"].splitlines()
    assert any("cell (warmth)" in line for line in summary)
    shared = next(line for line in summary if line.startswith("every cell:"))
    assert "pep none" in shared and "warmth" not in shared
    assert found["report_labels"] == ["HTTP/2, cold", "HTTP/2, warm"]


def test_a_dimension_declared_after_the_matrix_was_built_is_refused() -> None:
    late = Dimension(name="late", key="late", item=str, help="", column="late")
    with pytest.raises(RuntimeError, match="declared after the matrix was built"):
        dimensions.declare(late)


def test_a_cell_from_a_record_is_the_cell_of_its_run() -> None:
    d = Path("tests/data/recorded-dimensions")
    plan = {r.run_id: r.cell for r in plan_file(d / "campaign.yaml").runs}
    for r in Journal.in_dir(d).records():
        assert r.cell == plan[r.run_id] and hash(r.cell) == hash(plan[r.run_id])
        assert r.cell[HTTP] in (HttpVersion.h2, HttpVersion.h3)
        assert isinstance(r.cell[CROSS_TRAFFIC], CrossTraffic)


def test_a_cell_has_every_dimension() -> None:
    with pytest.raises(ValueError, match="missing"):
        Cell({"profile": "geo"})
    cell = Cell.parse({"profile": "geo", "http": 2, "cc": "bbr", "model": "m", "size": "1m",
                       "connections": 6})  # fmt: skip
    assert cell[PROFILE] == "geo" and cell.page == "m-1m"
    assert cell.texts()["cross_traffic"] == "none" and cell.record()["connections"] == 6


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "none"},
        {"name": "bulk-cubic", "flows": 3},
        {"name": "bulk-bbr", "direction": "both"},
        {"name": "udp-cbr", "flows": 2, "direction": "return", "rate_mbps": 2.5},
        {"name": "udp-cbr", "rate_mbps": 0.00001},
        {"name": "rrul"},
        {"name": "web", "flows": 2},
    ],
)
def test_cross_traffic_parses_back_from_the_label_records_keep(spec: dict[str, object]) -> None:
    entry = CrossTraffic.model_validate(spec)
    back = CROSS_TRAFFIC.parse(entry.label)
    assert back == entry and back.describe() == entry.describe()


def test_no_cell_is_read_by_position() -> None:
    """A cell is read by dimension (cell[HTTP]); an index or a slice is what the
    declarations replaced."""
    found = []
    tests = TESTS
    for path in [*RUNNER.rglob("*.py"), *tests.rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Subscript)
                and _names_a_cell(node.value)
                and isinstance(node.slice, ast.Constant | ast.Slice | ast.UnaryOp)
            ):
                found.append(f"{path}:{node.lineno}")
    assert not found


def _names_a_cell(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "cell") or (
        isinstance(node, ast.Name) and node.id == "cell"
    )


def test_the_docs_lists_of_dimensions_are_the_declarations() -> None:
    """docs/results.md's record table and docs/campaigns.md's list of record fields name
    every declared dimension, in declaration order, and nothing else."""
    import re

    docs = TESTS.parent / "docs"
    declared = [d.name for d in dimensions.seal()]
    row = next(
        line
        for line in (docs / "results.md").read_text().splitlines()
        if line.startswith("| `profile`,")
    )
    assert re.findall(r"`([a-z_]+)`", row.split(" | ")[0]) == declared, row
    text = " ".join((docs / "campaigns.md").read_text().split())
    listed = re.search(r"every dimension under its field name \(([^;]*);", text)
    assert listed is not None
    assert re.findall(r"`([a-z_]+)`", listed.group(1)) == declared, listed.group(1)
