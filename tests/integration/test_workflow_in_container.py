"""ci/run-workflow-locally for real: the nightly workflow's plan job run in a Debian 12
runner container (its checkout and setup-uv emulated, its `run:` step run as GitHub runs
it), with the outputs the shards build from, among them the Firefox Nightly date; and
the same job refusing bad input with the workflow's own message and exit code."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import need

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _docker_ready() -> bool:
    if shutil.which("docker") is None:
        return False
    ok = subprocess.run(["docker", "image", "inspect", "debian:bookworm-slim"], capture_output=True)
    return ok.returncode == 0


def _plan(run_dir: Path, *inputs: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    argv = ["ci/run-workflow-locally", "nightly", "plan", "--run-dir", str(run_dir)]
    for value in inputs:
        argv += ["--input", value]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    state = (
        json.loads((run_dir / "state.json").read_text())
        if (run_dir / "state.json").exists()
        else {}
    )
    return proc, state


def test_the_plan_job_runs_in_a_runner_container(tmp_path: Path) -> None:
    need(os.geteuid() == 0, "root (the runner container is privileged)")
    need(_docker_ready(), "Docker and the debian:bookworm-slim image (ci/docker-setup.sh)")
    need(bool(os.environ.get("UV")), "run through `uv run pytest` (setup-uv is this uv, mounted)")
    before = time.time()
    proc, state = _plan(tmp_path / "ok", "campaign=smoke", "shards=3")
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, log
    plan = state["jobs"]["plan"]
    assert plan["result"] == "success", log
    out = plan["outputs"]
    assert re.fullmatch(r"smoke-\d{8}T\d{6}Z", out["campaign_id"]), out
    assert json.loads(out["shards"]) == [1, 2, 3]
    # The run's UTC date (the test may straddle midnight: either end is the run's day).
    days = {time.strftime("%Y-%m-%d", time.gmtime(t)) for t in (before, time.time())}
    assert out["nightly_date"] in days, out
    assert out["campaign_id"].startswith(f"smoke-{out['nightly_date'].replace('-', '')}T")
    steps = {s["name"]: s for s in state["records"][0]["steps"]}
    assert steps["actions/checkout@v5"]["handling"] == "emulated"
    assert steps["Validate the inputs and the campaign"]["handling"] == "ran"
    assert "3 runs: 3 cells" in proc.stdout
    summary = (tmp_path / "ok" / "summary.md").read_text()
    assert "| Validate the inputs and the campaign | ran | success |" in summary
    # The job's container is gone (and its Docker storage with it).
    names = [
        "docker",
        "ps",
        "-a",
        "--format",
        "{{.Names}}",
        "--filter",
        f"name=clarke-gha-{state['run_id']}",
    ]
    assert subprocess.run(names, capture_output=True, text=True, check=True).stdout == ""


def test_the_plan_job_refuses_bad_input(tmp_path: Path) -> None:
    need(os.geteuid() == 0, "root (the runner container is privileged)")
    need(_docker_ready(), "Docker and the debian:bookworm-slim image (ci/docker-setup.sh)")
    need(bool(os.environ.get("UV")), "run through `uv run pytest` (setup-uv is this uv, mounted)")
    proc, state = _plan(tmp_path / "bad", "shards=99")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert state["jobs"]["plan"]["result"] == "failure"
    assert "::error::shards '99': expected a number from 1 to 16" in proc.stdout
    steps = state["records"][0]["steps"]
    assert steps[-1]["result"] == "failure" and steps[-1]["handling"] == "ran"
