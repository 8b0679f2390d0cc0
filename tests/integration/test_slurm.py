"""`clarke submit slurm` on a real Slurm cluster of three nodes on this machine
(tests/slurm_cluster.py: Debian's slurmctld, slurmd and munged, each node in its own
network and UTS namespace): the smoke campaign in 3 shards, one per node, merged by the
merge job; a node that dies during its shard, whose task is requeued and resumes, with
every run recorded once; a shard that fails for a campaign reason, not retried, and the
merge cancelled; an unknown partition refused. No timing is asserted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from clarke.campaign.plan import plan_file
from clarke.place import netns
from clarke.results.journal import Journal
from clarke.results.record import Status
from clarke.testbed import lifecycle
from clarke.testbed.state import Store
from conftest import free_port, need
from slurm_cluster import Cluster, cluster, missing_daemons

pytestmark = [pytest.mark.root, pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "campaigns" / "smoke.yaml"
CLARKE = [sys.executable, "-m", "clarke"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    need(os.geteuid() == 0, "root (network namespaces for the cluster's nodes)")
    missing = missing_daemons()
    need(not missing, f"Slurm and munge are not installed ({', '.join(missing)}): ci/setup.sh")
    with cluster(tmp_path_factory.mktemp("slurm")) as c:
        yield c


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A testbed state dir of the test's own, which sbatch passes on to the jobs (it
    exports the submitting environment): other testbeds on this host are never read or
    removed, and a dead node's testbed is removed here."""
    monkeypatch.setenv("CLARKE_STATE_DIR", str(tmp_path / "testbeds"))
    # The jobs find this checkout's clarke on the PATH they inherit.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    yield
    lifecycle.down_all()


def _ours() -> list[str]:
    owner = Store().owner
    return [ns for ns in netns.namespaces() if netns.owner(ns) == owner]


def _submit(c: Cluster, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        c.login([*CLARKE, "submit", "slurm", *args]),
        env=c.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _journal_lines(d: Path) -> int:
    path = d / "journal.jsonl"
    return len(path.read_text().splitlines()) if path.is_file() else 0


def _shard_hosts(logs: Path, shards: int) -> dict[int, list[str]]:
    """The host each attempt of each shard ran on, from its log's first lines."""
    out = {}
    for i in range(1, shards + 1):
        text = (logs / f"shard-{i}.out").read_text()
        out[i] = re.findall(rf"shard {i}/{shards} of \S+ on (\S+?)[,\n]", text)
    return out


def test_smoke_campaign_in_three_shards_on_three_nodes(slurm: Cluster, tmp_path: Path) -> None:
    results = tmp_path / "results"
    started = time.monotonic()
    proc = _submit(
        slurm, str(SMOKE), "--shards", "3", "--results", str(results),
        "--campaign-id", "smoke-slurm", "--link-check", "quick", "--wait",
    )  # fmt: skip
    out, _ = proc.communicate(timeout=1200)
    took = time.monotonic() - started
    assert proc.returncode == 0, out[-6000:]
    print(f"\nthe smoke campaign in 3 shards through Slurm: {took:.0f} s\n{out}")
    jobs = re.search(r"shards: job (\d+) \(array tasks 1-3\)\nmerge:  job (\d+)", out)
    assert jobs, out
    submitted = json.loads((results / "smoke-slurm.slurm" / "submitted.json").read_text())
    assert (submitted["array_job"], submitted["merge_job"]) == tuple(map(int, jobs.groups()))
    assert "merge: COMPLETED" in out and "3 of 3 runs with a successful load" in out

    merged = results / "smoke-slurm"
    records = list(Journal.in_dir(merged).records())
    ok = Counter(r.run_id for r in records if r.status is Status.ok)
    assert sorted(ok) == sorted(r.run_id for r in plan_file(SMOKE).runs)
    assert set(ok.values()) == {1}
    assert {r.shard for r in records} == {"1/3", "2/3", "3/3"}
    assert (merged / "report.html").is_file()
    # Each shard on a node of its own, all at once, each on a testbed of its own: the
    # nodes share this kernel, so their testbed ids must differ.
    hosts = _shard_hosts(results / "smoke-slurm.slurm" / "logs", 3)
    assert sorted(h[0] for h in hosts.values()) == ["n1", "n2", "n3"], hosts
    testbeds = {r.shard: r.testbed for r in records}
    assert len(set(testbeds.values())) == 3, testbeds
    assert _ours() == [] and Store().ids() == []


def test_a_node_dies_during_its_shard_and_the_shard_resumes_elsewhere(
    slurm: Cluster, tmp_path: Path
) -> None:
    """Two runs per shard; the node running shard 1 dies (its slurmd and everything it
    started) once the shard has recorded its first run. Slurm sets the node DOWN,
    requeues the task on another node, and the task resumes the shard's directory."""
    campaign = tmp_path / "smokefault.yaml"
    spec = yaml.safe_load(SMOKE.read_text())
    campaign.write_text(yaml.safe_dump({**spec, "name": "smokefault", "repetitions": 2}))
    results = tmp_path / "results"
    shard1 = results / "smokefault-slurm-shard1of3"
    logs = results / "smokefault-slurm.slurm" / "logs"
    proc = _submit(
        slurm, str(campaign), "--shards", "3", "--results", str(results),
        "--campaign-id", "smokefault-slurm", "--link-check", "quick", "--wait",
    )  # fmt: skip
    dead = ""
    try:
        deadline = time.monotonic() + 900
        while _journal_lines(shard1) < 1:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.2)
        before = _journal_lines(shard1)
        dead = _shard_hosts(logs, 3)[1][0]
        killed = slurm.power_off(dead)
        print(
            f"\nnode {dead} died with shard 1/3 at {before} of 2 records ({len(killed)} processes)"
        )
        out, _ = proc.communicate(timeout=1500)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if dead:
            slurm.start_node(slurm.nodes[dead])  # the node comes back for the next tests
    after = _journal_lines(shard1)
    print(f"shard 1/3's journal: {before} records before the node died, {after} after\n{out}")
    assert proc.returncode == 0, out[-6000:]
    assert before == 1 and after >= 2
    hosts = _shard_hosts(logs, 3)[1]
    assert len(hosts) == 2 and hosts[0] == dead and hosts[1] != dead, hosts
    shard_log = (logs / "shard-1.out").read_text()
    assert "restart 1 (SLURM_RESTART_COUNT)" in shard_log and f"resuming {shard1}" in shard_log
    assert "restarts 1" in out

    # Every run has one successful load, and no attempt is recorded twice (the one
    # recorded before the node died is not measured again).
    records = list(Journal.in_dir(results / "smokefault-slurm").records())
    planned = sorted(r.run_id for r in plan_file(campaign).runs)
    assert sorted(r.run_id for r in records if r.status is Status.ok) == planned
    attempts = Counter((r.run_id, r.attempt) for r in records)
    assert set(attempts.values()) == {1}, attempts
    slurm.wait_idle()


def test_a_shard_failing_for_a_campaign_reason_is_not_retried(
    slurm: Cluster, tmp_path: Path
) -> None:
    """A browser that is not there (the campaign names it) fails every shard with
    exit 3 on its node: no task is requeued, the merge job is cancelled, and --wait
    exits 1 naming the shards' logs."""
    campaign = tmp_path / "nobrowser.yaml"
    spec = yaml.safe_load(SMOKE.read_text())
    # A name looked up on each node's PATH (a path is refused at submission).
    browser = {**spec["browser"], "binary": "no-such-firefox"}
    campaign.write_text(yaml.safe_dump({**spec, "name": "nobrowser", "browser": browser}))
    results = tmp_path / "results"
    proc = _submit(
        slurm, str(campaign), "--shards", "2", "--results", str(results),
        "--campaign-id", "nobrowser-slurm", "--link-check", "quick", "--wait",
    )  # fmt: skip
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1, out
    assert re.search(r"shard 1/2: FAILED on n\d exit 3:0", out), out
    assert re.search(r"shard 2/2: FAILED on n\d exit 3:0", out), out
    assert "merge: CANCELLED" in out and "restarts" not in out
    assert "was not merged" in out and "logs/shard-1.out" in out
    assert not (results / "nobrowser-slurm").exists()
    log = (results / "nobrowser-slurm.slurm" / "logs" / "shard-1.out").read_text()
    assert "no-such-firefox" in log and "restart" not in log
    slurm.wait_idle()


def test_a_controller_that_does_not_answer_is_a_missing_part(tmp_path: Path) -> None:
    """Slurm's client installed, its controller not there (a free loopback port)."""
    need(not missing_daemons(), "Slurm's client (scontrol) is not installed: ci/setup.sh")
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        f"ClusterName=nowhere\nSlurmctldHost=ctl(127.0.0.1)\nSlurmctldPort={free_port()}\n"
        f"AuthInfo=socket={tmp_path}/no-munge.socket\n"
        "NodeName=n1 CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=n1 Default=YES State=UP\n"
    )
    proc = subprocess.run(
        [*CLARKE, "submit", "slurm", str(SMOKE), "--shards", "3", "--results",
         str(tmp_path / "results")],
        env={**os.environ, "SLURM_CONF": str(conf)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Slurm's controller did not answer (scontrol)" in proc.stderr
    assert "Unable to contact slurm controller" in proc.stderr
    assert not (tmp_path / "results").exists()


def test_an_unknown_partition_is_refused_with_the_known_ones(
    slurm: Cluster, tmp_path: Path
) -> None:
    proc = slurm.run(
        [*CLARKE, "submit", "slurm", str(SMOKE), "--shards", "3", "--partition", "gpu",
         "--results", str(tmp_path / "results")]
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--partition gpu: no such partition; Slurm has: measure" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "results").exists()
