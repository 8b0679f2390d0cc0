"""A results directory has one writer: a second `clarke run --resume` of a directory
being written stops (exit 2, naming the holder) and records nothing, and a resume with a
campaign file other than the stored one stops with the difference. Both are refused
before a testbed is built (root: `clarke run` checks root first)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clarke.campaign.plan import plan_file
from clarke.results import store
from clarke.results.journal import JOURNAL
from clarke.results.meta import Meta
from conftest import need

pytestmark = pytest.mark.root
SMOKE = Path("campaigns/smoke.yaml")


def _results_dir(tmp_path: Path, campaign: Path) -> Path:
    plan = plan_file(campaign)
    return store.create(
        tmp_path,
        "smoke-guard",
        campaign,
        {"campaign": plan.campaign.name, "runs": [r.to_dict() for r in plan.runs]},
        Meta(campaign=plan.campaign.name, shard="", link=[]),
    )


def _resume(campaign: Path, d: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clarke", "run", str(campaign), "--resume", str(d)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_second_writer_stops_naming_the_first(tmp_path: Path) -> None:
    need(os.geteuid() == 0, "root (clarke run checks it before the results directory)")
    d = _results_dir(tmp_path, SMOKE)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sys, time
                from pathlib import Path
                from clarke.results import store
                with store.sole_writer(Path({str(d)!r})):
                    print("held", flush=True)
                    sys.stdin.read()
            """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        second = _resume(SMOKE, d)
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"being written by pid {holder.pid}" in second.stderr
        assert (d / JOURNAL).read_text() == ""  # nothing recorded by the second
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()
    # Released with its holder: the directory can be taken again.
    with store.sole_writer(d):
        pass


def test_a_resume_with_another_campaign_stops_with_the_difference(tmp_path: Path) -> None:
    need(os.geteuid() == 0, "root (clarke run checks it before the results directory)")
    d = _results_dir(tmp_path, SMOKE)
    edited = tmp_path / "smoke.yaml"
    text = SMOKE.read_text()
    assert "repetitions: 1" in text
    edited.write_text(text.replace("repetitions: 1", "repetitions: 2"))
    run = _resume(edited, d)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "is not the campaign" in run.stderr
    assert "-repetitions: 1" in run.stderr and "+repetitions: 2" in run.stderr
    assert (d / JOURNAL).read_text() == ""
    # Comments and layout are not a different campaign.
    same = tmp_path / "same.yaml"
    same.write_text("# a comment\n" + text)
    from clarke.campaign.plan import plan_file
    from clarke.run.loop.resume import campaign_difference

    assert campaign_difference(d / store.CAMPAIGN_COPY, plan_file(same)) == ""
    assert "repetitions" in campaign_difference(d / store.CAMPAIGN_COPY, plan_file(edited))
