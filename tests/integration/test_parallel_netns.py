"""`clarke run --parallel 2` for real: a tiny LAN campaign on two netns testbeds, stopped
with SIGTERM after its first load (every testbed torn down, the resume named), resumed,
and merged into one campaign directory (every run once, records naming two testbeds,
meta.json saying parallel 2, nothing left in the namespaces). No timing is asserted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

from clarke.campaign.plan import plan_file
from clarke.place import netns
from clarke.results import store
from clarke.results.journal import Journal
from clarke.results.record import Status
from clarke.testbed.state import Store
from conftest import ON_OWN_TESTBEDS, SMALL_LAN_CAMPAIGN

pytestmark = ON_OWN_TESTBEDS

CAMPAIGN = {"name": "par", **SMALL_LAN_CAMPAIGN}


def _ours() -> list[str]:
    """Namespaces this test's state dir owns (tagged with it)."""
    owner = Store().owner
    return [ns for ns in netns.namespaces() if netns.owner(ns) == owner]


def _cpus_per_testbed() -> dict[str, set[tuple[int, ...]]]:
    """testbed (clk<id>) -> the CPU sets its namespaces' processes may run on."""
    out: dict[str, set[tuple[int, ...]]] = {}
    for ns in _ours():
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        for pid in pids.stdout.split():
            try:
                cpus = tuple(sorted(os.sched_getaffinity(int(pid))))
            except (ProcessLookupError, PermissionError):
                continue  # ended meanwhile
            out.setdefault(ns.partition("-")[0], set()).add(cpus)
    return out


def _clarke_run(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "clarke", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_two_testbeds_stopped_resumed_and_merged(tmp_path: Path) -> None:
    campaign = tmp_path / "par.yaml"
    campaign.write_text(yaml.safe_dump(CAMPAIGN))
    results = tmp_path / "results"
    parts = results / "par-t.testbeds"
    common = ["--parallel", "2", "--link-check", "quick", "--results", str(results)]
    proc = _clarke_run(str(campaign), *common, "--campaign-id", "par-t")
    cpus: dict[str, set[tuple[int, ...]]] = {}
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            journals = list(parts.glob("*/journal.jsonl"))
            if any(j.stat().st_size for j in journals):
                cpus = _cpus_per_testbed()
                break
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out[-4000:]
    # Every process of a testbed on its testbed's CPU set; on 2 or more CPUs, one each.
    assert len(cpus) == 2 and all(len(sets) == 1 for sets in cpus.values()), cpus
    if len(os.sched_getaffinity(0)) >= 2:
        first, second = (next(iter(sets)) for sets in cpus.values())
        assert not set(first) & set(second), cpus
    assert f"--parallel 2 --resume {parts}" in out
    assert _ours() == [] and Store().ids() == []  # both testbeds torn down
    assert not (results / "par-t").exists()  # merged only when the campaign is whole

    resumed = _clarke_run(str(campaign), *common, "--resume", str(parts))
    out, _ = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, out[-4000:]
    assert _ours() == [] and Store().ids() == []

    merged = results / "par-t"
    records = list(Journal.in_dir(merged).records())
    final = {r.run_id: r for r in records if r.status is Status.ok}
    plan = plan_file(campaign)
    assert sorted(final) == sorted(r.run_id for r in plan.runs)
    ok_twice = Counter(r.run_id for r in records if r.status is Status.ok)
    assert max(ok_twice.values()) == 1  # every run once
    assert {r.shard for r in records} == {"1/2", "2/2"}
    testbeds = {r.testbed for r in records}
    assert len(testbeds) >= 2 and all(t.startswith("netns-") for t in testbeds)
    for cell in {r.cell for r in plan.runs}:  # every cell on both testbeds
        assert {r.shard for r in final.values() if r.cell == cell} == {"1/2", "2/2"}
    meta = json.loads((merged / store.META).read_text())
    assert meta["parallel"]["testbeds"] == 2 and meta["shard_by"] == "repetition"
    assert [lane["shard"] for lane in meta["parallel"]["lanes"]] == ["1/2", "2/2"]
    assert [i["interrupted"] for i in meta["parallel"]["invocations"]] == [True, False]
    assert meta["missing_runs"] == []
    check = meta["testbed_check"]
    assert check["reference"] == "1/2" and len(check["rows"]) == 2 * 3  # 2 cells, 3 metrics
    assert "on 2 testbeds in parallel" in out
