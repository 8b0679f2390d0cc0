"""The CI workflow's contract, read from .github/workflows/ci.yml and the scripts it runs:
`make test` in a Debian 12 container with the privileges the tests need, the host's
kernel prepared on the runner first, pinned toolchains, and Python only in virtual
environments (never the system Python). tests/integration/test_workflow_in_container.py runs
workflow jobs for real; a full local run of this job is `ci/run-workflow-locally ci`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

CI = Path(".github/workflows/ci.yml")
CONTAINER = Path("ci/debian-container").read_text()
SETUP = Path("ci/setup.sh").read_text()


def _job() -> dict[str, Any]:
    wf = yaml.safe_load(CI.read_text())
    assert wf["permissions"] == {"contents": "read"}
    return wf["jobs"]["test"]


def _step(job: dict[str, Any], needle: str) -> tuple[int, dict[str, Any]]:
    return next(
        (i, s) for i, s in enumerate(job["steps"]) if needle in (s.get("run") or s.get("uses", ""))
    )


def test_make_test_runs_in_a_debian_12_container_as_ci() -> None:
    job = _job()
    assert job["runs-on"] == "ubuntu-24.04" and "container" not in job
    assert job["env"]["CI"] == "true"
    assert job["steps"][-1]["run"] == "ci/debian-container make test"
    assert "IMAGE=${CLARKE_DEBIAN_IMAGE:-debian:bookworm-slim}" in CONTAINER
    assert "(($#)) || set -- make test" in CONTAINER


def test_the_container_has_what_the_tests_need() -> None:
    # privileged (namespaces, TUN, sysctls, its own dockerd), the host's cgroup namespace,
    # the daemon's storage on a volume (overlayfs on overlayfs fails), CI passed in.
    assert "privileges=(--privileged)" in CONTAINER
    run = CONTAINER[CONTAINER.index('docker run --rm --init --name "$name"') :]
    for option in ('"${privileges[@]}"', "--cgroupns=host", "-v /var/lib/docker", "-e CI "):
        assert option in run, option
    # Where --privileged cannot be had, the substitute says so.
    assert "cannot grant --privileged" in CONTAINER


def test_the_host_kernel_is_prepared_on_the_runner_before_the_container() -> None:
    job = _job()
    kernel, _ = _step(job, "ci/host-kernel.sh")
    tests, _ = _step(job, "ci/debian-container")
    assert kernel < tests
    assert job["steps"][kernel]["run"] == "sudo ci/host-kernel.sh"
    script = Path("ci/host-kernel.sh").read_text()
    assert "tcp_allowed_congestion_control" in script and "/dev/net/tun" in script


def test_toolchains_are_pinned_to_exact_versions() -> None:
    job = _job()
    pins = {
        "actions-rust-lang/setup-rust-toolchain": "toolchain",
        "actions/setup-go": "go-version",
        "actions/setup-node": "node-version",
    }
    for action, key in pins.items():
        _, step = _step(job, action)
        assert re.fullmatch(r"\d+\.\d+\.\d+", str(step["with"][key])), (action, step["with"])
    _, rust = _step(job, "setup-rust-toolchain")
    assert {c.strip() for c in rust["with"]["components"].split(",")} == {"rustfmt", "clippy"}
    _, node = _step(job, "setup-node")
    assert int(node["with"]["node-version"].split(".")[0]) >= 20  # Browsertime


def test_every_action_is_pinned_to_a_version() -> None:
    for step in _job()["steps"]:
        if "uses" in step:
            _, _, ref = step["uses"].partition("@")
            assert ref.startswith("v") and ref[1:2].isdigit(), step["uses"]


def test_no_system_python() -> None:
    # uv goes into a virtual environment of its own; nothing is pip-installed elsewhere.
    assert 'python3 -m venv "$tool_venv"' in SETUP
    assert '"$tool_venv/bin/python" -m pip install' in SETUP
    pip_runs = re.findall(r"^\s*(\S+)\s+(?:-m\s+)?pip3?\s+install", SETUP, re.MULTILINE)
    assert pip_runs == ['"$tool_venv/bin/python"'], pip_runs
    # The tests' environment is a venv uv makes, outside the mounted checkout.
    assert "UV_PROJECT_ENVIRONMENT=/opt/clarke-venv" in CONTAINER


@pytest.mark.parametrize("workflow", sorted(Path(".github/workflows").glob("*.yml")), ids=str)
def test_every_run_step_is_valid_bash(workflow: Path) -> None:
    """`bash -n` on every `run:` step, its `${{ }}` expressions replaced by a word as
    GitHub substitutes them first (an apostrophe inside `${VAR:-…}` once broke the
    nightly's shard job before anything ran; found by ci/run-workflow-locally)."""
    jobs = yaml.safe_load(workflow.read_text())["jobs"]
    for job_name, job in jobs.items():
        for step in job.get("steps", []):
            if "run" not in step:
                continue
            script = re.sub(r"\$\{\{.*?\}\}", "x", step["run"], flags=re.S)
            check = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
            assert check.returncode == 0, (job_name, step.get("name"), check.stderr)
