"""The nightly workflow's contract, read from .github/workflows/nightly.yml with PyYAML
(actionlint checks its syntax and shell; ci/run-workflow-locally runs its jobs in Debian
12 containers, tests/integration/test_workflow_in_container.py its plan job): least permissions
per job, timeouts, the shard fan-out and the compose contract, the Firefox Nightly date,
Python only in uv's virtual environments, and that the campaign it runs by default
exists and validates."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from clarke.campaign.plan import plan_file

WORKFLOW = Path(".github/workflows/nightly.yml")


def _wf() -> dict[Any, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def _run_text(job: dict[str, Any]) -> str:
    return "\n".join(s.get("run", "") for s in job["steps"])


def test_triggers_inputs_and_concurrency() -> None:
    wf = _wf()
    on = wf[True]  # YAML 1.1 reads the key `on` as true
    assert on["schedule"][0]["cron"]
    inputs = on["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"campaign", "shards", "threshold", "update_baseline"}
    assert wf["concurrency"]["cancel-in-progress"] is False


def test_least_permissions_and_timeouts() -> None:
    wf = _wf()
    assert wf["permissions"] == {}
    for name, job in wf["jobs"].items():
        assert 0 < job["timeout-minutes"] <= 90, name
        writes = {k for k, v in job["permissions"].items() if v == "write"}
        assert writes == ({"contents"} if name == "update-baseline" else set()), name
    assert wf["jobs"]["merge"]["permissions"] == {"contents": "read", "actions": "read"}


def test_every_action_is_pinned_to_a_version() -> None:
    for job in _wf()["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                _, _, ref = step["uses"].partition("@")
                assert ref.startswith("v") and ref[1:2].isdigit(), step["uses"]


def test_shards_follow_the_compose_contract() -> None:
    jobs = _wf()["jobs"]
    shard = jobs["shard"]
    assert shard["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    assert shard["strategy"]["fail-fast"] is False
    assert shard["env"]["SHARD"].startswith("${{ matrix.shard }}/")
    assert shard["env"]["CAMPAIGN_ID"] == "${{ needs.plan.outputs.campaign_id }}"
    # docker-compose.yml's variables: the OpenSAND image's repository, the revision.
    assert shard["env"]["OPENSAND_REPO_URL"] == "${{ vars.OPENSAND_REPO_URL }}"
    assert shard["env"]["CLARKE_GIT_REV"] == "${{ github.sha }}"
    compose = Path("docker-compose.yml").read_text()
    for var in ("CAMPAIGN", "SHARD", "CAMPAIGN_ID", "RESULTS_DIR", "FIREFOX_NIGHTLY_DATE"):
        assert "${" + var + ":-" in compose, var
    # A build argument without a value: compose passes the environment's (empty when the
    # repository variable is unset, and opensand/install.sh then takes its default).
    assert "\n        OPENSAND_REPO_URL:\n" in compose
    text = _run_text(shard)
    assert "sudo ci/host-kernel.sh" in text  # cubic and bbr allowed, /dev/net/tun
    assert "up -d --build" in text and "docker wait" in text and "down -v" in text
    down = next(s for s in shard["steps"] if "down -v" in s.get("run", ""))
    assert down["if"] == "always()"
    assert "type=gha" in text


def test_merge_compares_and_reports_every_outcome() -> None:
    merge = _wf()["jobs"]["merge"]
    assert merge["needs"] == ["plan", "shard"] and "always()" in merge["if"]
    text = _run_text(merge)
    for cmd in ("clarke results merge", "clarke report", "clarke compare", "gh run download"):
        assert cmd in text, cmd
    assert "$GITHUB_STEP_SUMMARY" in text
    assert 'clarke compare "$BASELINE" "merged/$CAMPAIGN_ID" --threshold "$THRESHOLD"' in text
    verdict = merge["steps"][-1]["run"]
    assert "1)" in verdict and "2)" in verdict and "exit 1" in verdict and "exit 2" in verdict


def test_the_threshold_is_the_one_chosen_from_the_power_figures_and_checked() -> None:
    """docs/nightly.md: 0.03 is what lets a 5 % PLT slowdown fail the night (0.10, compare's
    default, never flags one); a manual run may give another, checked before anything runs."""
    wf = _wf()
    assert wf["env"]["THRESHOLD"] == "${{ inputs.threshold || '0.03' }}"
    assert wf[True]["workflow_dispatch"]["inputs"]["threshold"]["default"] == "0.03"
    plan = _run_text(wf["jobs"]["plan"])
    assert "threshold '$THRESHOLD': expected a share" in plan and "exit 2" in plan


def test_the_default_campaign_validates_and_fits_the_budget() -> None:
    plan = plan_file(Path("campaigns/nightly.yaml"))
    assert plan.seed is not None  # shards must expand the same plan
    assert len({r.cell for r in plan.runs}) == 12
    per_cell = Counter(r.cell.path for r in plan.runs)
    # docs/nightly.md: the HTTP/3 + BBR cells need 30 (500 KB) and 20 (1 MB) loads to
    # catch +5 %; the other ten 10
    h3_bbr = {p: n for p, n in per_cell.items() if p.startswith("geo/3/bbr/")}
    assert sorted(h3_bbr.values()) == [20, 30] and sorted(set(per_cell.values())) == [10, 20, 30]
    assert len(plan.runs) == 150
    # ~9.6 s per geo load (PLT 2.5-9 s + ~4.6 s harness): within ~45 runner-minutes
    assert len(plan.runs) * 9.6 / 60 < 45 - 10


def test_the_client_gets_the_runs_firefox_nightly_date() -> None:
    # CONTRACTS.md: build argument FIREFOX_NIGHTLY_DATE (YYYY-MM-DD), the run's UTC date,
    # fixed once by the plan job so that every shard builds the same day's Nightly.
    jobs = _wf()["jobs"]
    assert jobs["plan"]["outputs"]["nightly_date"] == "${{ steps.plan.outputs.nightly_date }}"
    plan = _run_text(jobs["plan"])
    assert 'echo "nightly_date=$(date -u -d "@$now" +%F)"' in plan
    assert 'echo "campaign_id=$CAMPAIGN-$(date -u -d "@$now" +%Y%m%dT%H%M%SZ)"' in plan
    shard = jobs["shard"]
    assert shard["env"]["FIREFOX_NIGHTLY_DATE"] == "${{ needs.plan.outputs.nightly_date }}"
    # the compose step inherits the job's env: nothing may override the date on the way
    for step in shard["steps"]:
        assert "FIREFOX_NIGHTLY_DATE" not in step.get("env", {}), step


def test_python_runs_in_uvs_virtual_environment_of_a_pinned_uv() -> None:
    wf = _wf()
    assert wf["env"]["UV_PYTHON"] == "3.11"  # the Python the tests run on (Debian 12)
    setup = Path("ci/setup.sh").read_text()
    uv_version = next(ln.split("=")[1] for ln in setup.splitlines() if ln.startswith("UV_VERSION="))
    for name in ("plan", "merge"):
        steps = wf["jobs"][name]["steps"]
        uv = next(s for s in steps if s.get("uses", "").startswith("astral-sh/setup-uv@"))
        assert uv["with"]["version"] == uv_version, name
        assert "uv sync --frozen" in _run_text(wf["jobs"][name]), name
        assert "pip install" not in _run_text(wf["jobs"][name]), name


def test_a_failing_baseline_lookup_is_not_taken_for_no_baseline() -> None:
    merge = _wf()["jobs"]["merge"]
    find = next(s for s in merge["steps"] if s.get("id") == "baseline")["run"]
    assert "runs=$(gh run list" in find and "exit 2" in find
