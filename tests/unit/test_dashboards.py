"""Grafana dashboards, checked against Grafana's dashboard model without Grafana: the
schema version, unique panel ids, the provisioned datasource uid, raw InfluxQL targets,
and that the committed JSON is what dashboards/generate.py writes. (The queries run
against a real InfluxDB in tests/integration/test_dashboards_influx.py.)"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import yaml

DASH = Path("dashboards")


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate", DASH / "generate.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _dashboards() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((DASH / "json").glob("*.json"))}


def test_committed_json_is_generated() -> None:
    rendered = _generator().render()
    committed = {p.stem: p.read_text() for p in (DASH / "json").glob("*.json")}
    assert committed == rendered, "run: uv run python dashboards/generate.py"


def test_dashboard_model() -> None:
    uid = yaml.safe_load((DASH / "provisioning/datasources/influxdb.yaml").read_text())[
        "datasources"
    ][0]["uid"]
    boards = _dashboards()
    assert set(boards) == {"campaign-overview", "run-drilldown", "link-health", "nightly-trends"}
    uids = [b["uid"] for b in boards.values()]
    assert len(set(uids)) == len(uids)
    for name, board in boards.items():
        assert board["schemaVersion"] >= 36, name
        assert isinstance(board["title"], str) and board["title"]
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), name
        variables = {v["name"] for v in board["templating"]["list"]}
        for v in board["templating"]["list"]:
            if v["type"] == "query":
                assert v["datasource"]["uid"] == uid
        for p in board["panels"]:
            assert p["datasource"]["uid"] == uid, (name, p["title"])
            assert {"x", "y", "w", "h"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"][
                "w"
            ] <= 24
            assert p["targets"], (name, p["title"])
            for t in p["targets"]:
                assert t["rawQuery"] and t["datasource"]["uid"] == uid
                used = set(re.findall(r"\$(\w+)", t["query"])) - {"timeFilter", "__interval"}
                assert used <= variables, (name, p["title"], used - variables)


def test_provisioning_points_at_the_dashboards() -> None:
    prov = yaml.safe_load((DASH / "provisioning/dashboards/clarke.yaml").read_text())
    assert prov["providers"][0]["type"] == "file"
    assert prov["providers"][0]["options"]["path"]
