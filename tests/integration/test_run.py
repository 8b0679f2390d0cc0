"""Whole campaigns on the netns testbed for real (issue: end to end): into a real
InfluxDB, killed with SIGKILL and resumed, through an InfluxDB outage, and in shards."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
import yaml

from capture_check import check_capture
from clarke.campaign.dimensions import CONNECTIONS
from clarke.campaign.plan import plan_file
from clarke.results.influx import InfluxSink
from clarke.results.journal import Journal
from clarke.results.record import Status
from clarke.run.loop.loop import finished
from conftest import ON_OWN_TESTBEDS, SMALL_LAN_CAMPAIGN, _influx_config, free_port, need

pytestmark = [*ON_OWN_TESTBEDS, pytest.mark.influx]

CAMPAIGN = {"name": "e2e", **SMALL_LAN_CAMPAIGN}


def _campaign(tmp_path: Path, **changes: object) -> Path:
    f = tmp_path / "e2e.yaml"
    f.write_text(yaml.safe_dump({**CAMPAIGN, **changes}))
    return f


def _quick_run_argv(campaign: Path, results: Path, *more: str) -> list[str]:
    """`clarke run` of `campaign` into `results` with quick link checks."""
    return [sys.executable, "-m", "clarke", "run", str(campaign), "--results", str(results),
            "--link-check", "quick", *more]  # fmt: skip


def _clarke(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clarke", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _only_dir(base: Path) -> Path:
    dirs = [d for d in base.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _final(d: Path) -> dict[str, str]:
    """run id -> final status; fails if a run has two successful records."""
    records = list(Journal.in_dir(d).records())
    ok = Counter(r.run_id for r in records if r.status is Status.ok)
    assert all(n == 1 for n in ok.values()), ok
    return {r.run_id: r.status.value for r in records if r.status is Status.ok} | {
        r.run_id: "failed" for r in records if r.run_id not in ok
    }


def _count(url: str, cid: str) -> int:
    with InfluxSink.from_url(url) as sink:
        res = sink.query(f"SELECT count(\"attempt\") FROM page_load WHERE campaign_id = '{cid}'")
    series = res["results"][0].get("series")
    return series[0]["values"][0][1] if series else 0


def test_smoke_campaign_into_influxdb_with_captures(influxd: str, tmp_path: Path) -> None:
    """The smoke campaign (lan, HTTP/1.1, /2 and /3) into InfluxDB, every load captured
    (capture_check.check_capture reads each one back)."""
    need(shutil.which("tshark") is not None, "tshark (Debian: tshark) to read the captures")
    url = f"{influxd}/e2e_smoke"
    proc = _clarke(
        "run",
        "campaigns/smoke.yaml",
        "--influx",
        url,
        "--results",
        str(tmp_path / "results"),
        "--link-check",
        "quick",
        "--campaign-id",
        "smoke-e2e",
        "--capture",
        "all",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    d = _only_dir(tmp_path / "results")
    plan_ids = {r.run_id for r in plan_file(Path("campaigns/smoke.yaml")).runs}
    assert set(_final(d)) == plan_ids
    records = list(Journal.in_dir(d).records())
    assert _count(url, "smoke-e2e") == len(records)
    meta = json.loads((d / "meta.json").read_text())
    assert [c["phase"] for c in meta["link"]] == ["before", "after"]
    assert all(c["rtt_mean_ms"] > 0 for c in meta["link"])
    # Each change made once: the profile by `up`, bbr once (origin starts on cubic).
    assert meta["apply_counts"] == {"profile:lan": 1, "cc:bbr": 1}, meta["applies"]
    assert {r.profile_sha256 for r in records} == {meta["link"][0]["profile_sha256"]}
    assert "per cell" in proc.stdout and str(d) in proc.stdout
    with InfluxSink.from_url(url) as sink:
        summary = sink.query(
            "SELECT count(\"mean\") FROM cell_summary WHERE campaign_id = 'smoke-e2e'"
        )
        per_connection = sink.query(
            "SELECT sum(\"requests\") FROM connection WHERE campaign_id = 'smoke-e2e' "
            "GROUP BY run_id, attempt"
        )
        settings = {
            measurement: sink.query(
                f'SELECT count("{field}") FROM {measurement} WHERE campaign_id = '
                "'smoke-e2e' GROUP BY engine, isolation, priority_signals"
            )
            for measurement, field in (("page_load", "plt_ms"), ("connection", "requests"))
        }
    assert summary["results"][0]["series"][0]["values"][0][1] >= 1
    # Every load's points carry the browser's settings it ran with (the campaign's); a
    # load that failed before its isolation was verified has no isolation to tag.
    ran_with = {"engine": "selenium", "isolation": "profile", "priority_signals": "default"}
    for measurement, said in settings.items():
        tagged = [s["tags"] for s in said["results"][0]["series"]]
        assert ran_with in tagged, (measurement, tagged)
        assert all(t[k] in ("", v) for t in tagged for k, v in ran_with.items()), tagged
    # Every load's connections, with the requests they carried: the page's, no more.
    carried = {
        (s["tags"]["run_id"], int(s["tags"]["attempt"])): s["values"][0][1]
        for s in per_connection["results"][0]["series"]
    }
    ok = {
        (r.run_id, r.attempt): r.metrics["server_requests"]
        for r in records
        if r.status is Status.ok
    }
    assert {k: v for k, v in carried.items() if k in ok} == ok, carried
    for r in records:
        check_capture(d, r)


def test_kill9_then_resume_repeats_nothing_and_misses_nothing(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path)
    results = tmp_path / "results"
    runner = subprocess.Popen(
        _quick_run_argv(campaign, results),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            dirs = list(results.glob("e2e-*")) if results.exists() else []
            if dirs and len(list(Journal.in_dir(dirs[0]).records())) >= 2:
                break
            assert runner.poll() is None, "the runner ended before it could be killed"
            time.sleep(0.5)
        else:
            pytest.fail("no 2 records within 600 s")
    finally:
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
    d = _only_dir(results)
    done, _, _ = finished(Journal.in_dir(d), retries=1)  # the campaign's retries
    proc = _clarke("run", str(campaign), "--resume", str(d), "--link-check", "quick")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    finals = _final(d)
    assert set(finals) == {r.run_id for r in plan_file(campaign).runs}
    assert done and f"{len(done)} skipped as already done" in proc.stdout, proc.stdout[-2000:]


def test_influx_outage_loses_nothing(tmp_path: Path) -> None:
    """InfluxDB stops in the middle of the campaign; the journal keeps everything and a
    push afterwards fills InfluxDB without duplicates."""
    root = tmp_path / "influx"
    root.mkdir()
    port = free_port()
    conf = _influx_config(root, port, free_port())

    def start() -> subprocess.Popen[bytes]:
        p = subprocess.Popen(
            ["influxd", "-config", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(150):
            try:
                if (
                    httpx.get(
                        f"http://127.0.0.1:{port}/ping", timeout=1, trust_env=False
                    ).status_code
                    == 204
                ):
                    return p
            except httpx.TransportError:
                time.sleep(0.2)
        p.kill()
        pytest.fail("influxd did not start")

    influx = start()
    url = f"http://127.0.0.1:{port}/outage"
    results = tmp_path / "results"
    runner = subprocess.Popen(
        _quick_run_argv(_campaign(tmp_path), results, "--influx", url, "--campaign-id", "outage"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        while not (
            results.exists()
            and list(results.glob("outage*"))
            and len(list(Journal.in_dir(next(results.glob("outage*"))).records())) >= 1
        ):
            assert runner.poll() is None
            time.sleep(0.5)
        influx.terminate()  # the outage
        influx.wait(timeout=30)
        out, _ = runner.communicate(timeout=900)
    finally:
        if runner.poll() is None:
            runner.kill()
        if influx.poll() is None:
            influx.kill()
    assert runner.returncode == 0, out[-3000:]
    assert "clarke results push" in out
    d = _only_dir(results)
    records = list(Journal.in_dir(d).records())
    assert {r.run_id for r in records} == {r.run_id for r in plan_file(_campaign(tmp_path)).runs}
    influx = start()
    try:
        assert _count(url, "outage") < len(records)  # the outage really lost writes
        proc = _clarke("results", "push", str(d), "--influx", url)
        assert proc.returncode == 0, proc.stderr
        assert _count(url, "outage") == len(records)
        _clarke("results", "push", str(d), "--influx", url)
        assert _count(url, "outage") == len(records)
    finally:
        influx.terminate()
        influx.wait(timeout=30)


def test_two_shards_make_the_plan(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path, repetitions=1)
    results = tmp_path / "results"
    for shard in ("1/2", "2/2"):
        proc = _clarke(
            "run",
            str(campaign),
            "--shard",
            shard,
            "--campaign-id",
            "e2e-sharded",
            "--results",
            str(results),
            "--link-check",
            "quick",
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    dirs = sorted(results.iterdir())
    assert [d.name for d in dirs] == ["e2e-sharded-shard1of2", "e2e-sharded-shard2of2"]
    ids = [r.run_id for d in dirs for r in Journal.in_dir(d).records() if r.status is Status.ok]
    assert sorted(ids) == sorted(r.run_id for r in plan_file(campaign).runs)
    assert {r.campaign_id for d in dirs for r in Journal.in_dir(d).records()} == {"e2e-sharded"}
    # The nightly's final job: one directory that compare and report take.
    merged = tmp_path / "merged"
    proc = _clarke("results", "merge", *map(str, dirs), "--out", str(merged), "--require-complete")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _final(merged) == {d: s for shard in dirs for d, s in _final(shard).items()}
    assert json.loads((merged / "plan.json").read_text())["runs"] == [
        r.to_dict() for r in plan_file(campaign).runs
    ]
    assert _clarke("report", str(merged)).returncode == 0


def test_every_profile_has_its_link_checked_before_and_after_its_runs(tmp_path: Path) -> None:
    """Two profiles, each checked before and after its runs, each check measured against
    its own profile and judged. Whether a host comes within each profile's tolerance is
    `clarke bench validate`'s figure; what this test asks is that each profile has its
    own checks."""
    matrix = {**CAMPAIGN["matrix"], "profiles": ["lan", "geo"], "http": [2]}  # type: ignore[dict-item]
    campaign = _campaign(tmp_path, matrix=matrix, repetitions=1)
    results = tmp_path / "results"
    proc = _clarke("run", str(campaign), "--results", str(results), "--link-check", "quick")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    meta = json.loads((_only_dir(results) / "meta.json").read_text())
    assert meta["apply_counts"] == {"profile:lan": 1, "profile:geo": 1, "cc:bbr": 1}
    checks = [(c["phase"], c["profile"]) for c in meta["link"]]
    assert checks == [("before", "lan"), ("after", "lan"), ("before", "geo"), ("after", "geo")]
    for c in meta["link"]:
        assert isinstance(c.get("passed"), bool) and c["rtt_mean_ms"] > 0, c
    # Each against its own profile: geo's 530 ms is no lan check.
    assert all(c["rtt_mean_ms"] > 400 for c in meta["link"] if c["profile"] == "geo")
    assert all(c["rtt_mean_ms"] < 100 for c in meta["link"] if c["profile"] == "lan")


def test_connections_per_server_as_a_campaign_dimension(tmp_path: Path) -> None:
    """HTTP/1.1 with 1 and with 4 connections per server: two cells, and each load kept
    to its own limit (the server's records), the second one using more than one."""
    matrix = {**CAMPAIGN["matrix"], "http": [1.1], "connections": [1, 4]}  # type: ignore[dict-item]
    campaign = _campaign(tmp_path, matrix=matrix, repetitions=1)
    results = tmp_path / "results"
    proc = _clarke("run", str(campaign), "--results", str(results), "--link-check", "quick")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = {r.run_id: r for r in Journal.in_dir(_only_dir(results)).records()}
    assert set(records) == {"lan-h1-bbr-uniform-100k-c1-r1", "lan-h1-bbr-uniform-100k-c4-r1"}
    assert all(r.status is Status.ok for r in records.values()), records
    one, four = (records[f"lan-h1-bbr-uniform-100k-c{n}-r1"] for n in (1, 4))
    assert (one.cell[CONNECTIONS], four.cell[CONNECTIONS]) == (1, 4)
    carrying = [len([c for c in r.details.server_connections if c.requests]) for r in (one, four)]
    print(f"connections that carried requests: c1 {carrying[0]}, c4 {carrying[1]}")
    assert carrying[0] == 1 and 1 < carrying[1] <= 4
    assert one.metrics["max_concurrent_connections"] == 1


@pytest.mark.timing
def test_loads_start_where_the_campaign_puts_them_in_the_link_schedule(tmp_path: Path) -> None:
    """leo-starlink (15 s slots), two repetitions spread over the slot (a quarter and
    three quarters in): each load navigates at its aimed slot phase, and its record
    carries the schedule, the link time and what the link's delay and rate were while it
    crossed. (Each load after the first waits for its phase in the next slot: 20 s.)"""
    matrix = {**CAMPAIGN["matrix"], "profiles": ["leo-starlink"], "http": [2]}  # type: ignore[dict-item]
    campaign = _campaign(tmp_path, matrix=matrix, repetitions=2, slot_phase={"mode": "spread"})
    results = tmp_path / "results"
    proc = _clarke("run", str(campaign), "--results", str(results), "--link-check", "quick")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = list(Journal.in_dir(_only_dir(results)).records())
    assert [r.status for r in records] == [Status.ok] * 2
    slot_s = 15.0
    for r in records:
        aimed, got = r.details.aimed_slot_phase_s or 0.0, r.metrics["slot_phase_s"]
        print(f"{r.run_id}: aimed {aimed:.3f} s, navigated at {got:.3f} s into the slot")
        assert aimed == slot_s * (r.repetition - 0.5) / 2
        assert abs(got - aimed) < slot_s / 20, (aimed, got)
        assert r.details.timeline is not None
        assert r.details.timeline.schedule_id == "leo-starlink-20230718"
        delay = [r.metrics[f"link_delay_forward_{s}_ms"] for s in ("min", "mean", "max")]
        assert 15.5 < delay[0] <= delay[1] <= delay[2] < 16.5, delay  # 12 ms + two hops
        assert r.metrics["link_rate_forward_mean_mbps"] == 100
        # The queueing delay the page's packets saw, and the queue's drops by cause.
        p50, p99 = (r.metrics[f"queue_delay_forward_{s}_ms"] for s in ("p50", "p99"))
        print(f"{r.run_id}: forward queue delay p50 {p50} ms, p99 {p99} ms")
        assert 0 <= p50 <= p99, (p50, p99)
        assert r.metrics["link_drops_forward_queue_full"] >= 0
        assert "link_drops_forward_codel" in r.metrics
    report = tmp_path / "report.html"
    assert _clarke("report", str(_only_dir(results)), "--out", str(report)).returncode == 0
    page = report.read_text()
    for figure in ("fig-plt-slot-phase", "fig-link-over-time-leo-starlink"):
        assert f'id="{figure}"' in page
