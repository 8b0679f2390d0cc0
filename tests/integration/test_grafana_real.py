"""Grafana itself, where its image can be had (no registry here has it: this test skips
here and in CI, saying so): the stack's InfluxDB, secrets and Grafana (`--profile
grafana` with the offline InfluxDB), a recorded campaign written into InfluxDB as the
runner writes it, Grafana's /api/health, the provisioned datasource, and every panel's
query through Grafana's own /api/ds/query with rows in each answer: for each of two
recorded campaigns, but no per-connection rows for recorded-lan, which predates them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from clarke.results import store
from clarke.results.influx import InfluxSink, campaign_points
from clarke.results.meta import Meta
from grafana_expand import dashboard_query
from helpers import RECORDED_CONNECTIONS, RECORDED_LAN, reads_connections

pytestmark = [
    pytest.mark.root,
    pytest.mark.docker,
    pytest.mark.slow,
    # One compose project (`clarke`), its ports and subnets: one stack at a time.
    pytest.mark.xdist_group("compose"),
]

ROOT = Path(__file__).resolve().parents[2]
FILES = ["-f", "docker-compose.yml", "-f", "docker-compose.offline.yml", "--profile", "grafana"]
GRAFANA = "http://127.0.0.1:3000"
INFLUX = "http://127.0.0.1:8086"


def _grafana_image() -> str:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return str(compose["services"]["grafana"]["image"])


def _compose(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "compose", *FILES, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def _secret(service: str, name: str) -> str:
    out = _compose("exec", "-T", service, "cat", f"/run/clarke-secrets/{name}", timeout=60)
    assert out.returncode == 0 and out.stdout.strip(), out.stderr
    return out.stdout.strip()


@pytest.fixture(scope="module")
def grafana() -> Iterator[tuple[str, str]]:
    image = _grafana_image()
    present = shutil.which("docker") is not None and (
        subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0
    )
    if not present:
        # pytest.skip, not need(): no registry reachable here or from CI has Grafana.
        pytest.skip(f"no {image} image here (`docker pull {image}` where a registry has it)")
    assert os.geteuid() == 0
    try:
        up = _compose("up", "-d", "--build", "influxdb", "grafana", timeout=1800)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{GRAFANA}/api/health", timeout=5, trust_env=False).is_success:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, _compose("logs", "grafana").stdout[-3000:]
            time.sleep(2)
        yield (
            _secret("grafana", "grafana-admin-password"),
            _secret("influxdb", "influx-writer-password"),
        )
    finally:
        _compose("down", "-v", "--remove-orphans")


def test_every_panel_answers_through_grafana(grafana: tuple[str, str]) -> None:
    admin_password, writer_password = grafana
    metas: list[Meta] = []
    times: list[int] = []
    with InfluxSink.from_url(f"http://clarke:{writer_password}@127.0.0.1:8086/clarke") as sink:
        for recorded in (RECORDED_LAN, RECORDED_CONNECTIONS):
            meta, journal = store.open_existing(ROOT / recorded)
            records = list(journal.records())
            sink.write(records)
            sink.write_points(campaign_points(meta, records))
            metas.append(meta)
            times += [r.timestamp_ns // 1_000_000 for r in records]
    window = (min(times) - 3_600_000, max(times) + 3_600_000)
    auth = ("admin", admin_password)
    ds = httpx.get(
        f"{GRAFANA}/api/datasources/uid/clarke-influxdb", auth=auth, trust_env=False
    ).json()
    assert ds["url"] == "http://198.19.131.7:8086" and ds["jsonData"]["dbName"] == "clarke"
    rows_per_panel: dict[str, int] = {}
    # The nightly dashboard reads the nightly's summaries, which a single campaign has not.
    boards = ("campaign-overview", "link-health", "run-drilldown")
    for meta in metas:
        for path in (ROOT / f"dashboards/json/{name}.json" for name in boards):
            board = json.loads(path.read_text())
            values = {"campaign": meta.campaign_id, "metric": "plt_ms", "run": "$__all"}
            for panel in board["panels"]:
                for target in panel["targets"]:
                    q = dashboard_query(target["query"], values, board, window)
                    body: dict[str, Any] = {
                        "from": str(window[0]),
                        "to": str(window[1]),
                        "queries": [
                            {
                                "refId": "A",
                                "datasource": {"uid": "clarke-influxdb", "type": "influxdb"},
                                "query": q,
                                "rawQuery": True,
                                "resultFormat": target.get("resultFormat", "time_series"),
                            }
                        ],
                    }
                    resp = httpx.post(
                        f"{GRAFANA}/api/ds/query", json=body, auth=auth, trust_env=False, timeout=30
                    )
                    assert resp.is_success, (path.name, panel["title"], resp.text[:2000])
                    frames = resp.json()["results"]["A"].get("frames", [])
                    rows = sum(len((f["data"]["values"] or [[]])[0]) for f in frames)
                    rows_per_panel[f"{meta.campaign_id}: {path.stem}: {panel['title']}"] = rows
                    if "'failed'" in q:
                        continue
                    if reads_connections(q) and meta.campaign_id == RECORDED_LAN.name:
                        assert rows == 0, (path.name, panel["title"], q)
                    else:
                        assert rows > 0, (path.name, panel["title"], q)
    print("\n" + "\n".join(f"{k}: {v} rows" for k, v in rows_per_panel.items()))
