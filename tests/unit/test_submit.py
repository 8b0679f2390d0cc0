"""`clarke submit`: the submission's checks (exit 2 or 3 with the reason, nothing
written), the Slurm batch scripts (their directives, and their shell run with stand-ins
for `clarke`: shard numbers, resume, the restart limit), the Kubernetes manifests written
from the same steps, and the reading of Slurm's job states. The merge script on recorded
shards: tests/integration/test_submit_merge.py; a real cluster:
tests/integration/test_slurm.py."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from clarke.errors import InputError
from clarke.submit import slurm, slurm_jobs
from clarke.submit.model import ShardRunArgs, SubmitOptions, prepare
from clarke.submit.steps import merge_step, render, shard_step

SMOKE = Path("campaigns/smoke.yaml")


def _emit(run_cli, tmp_path: Path, *extra: str) -> Path:  # type: ignore[no-untyped-def]
    code, out, err = run_cli(
        "submit", "slurm", str(SMOKE), "--shards", "3", "--results", str(tmp_path / "results"),
        "--campaign-id", "smoke-t", "--link-check", "quick", "--emit", *extra,
    )  # fmt: skip
    assert code == 0, err
    assert "array=$(sbatch --parsable" in out and "--dependency=afterok:" in out
    return tmp_path / "results" / "smoke-t.slurm"


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--shards", "0"], "--shards 0: the number of shards must be 1 or more"),
        (["--shards", "4"], "the plan has 3 runs, so shard(s) 4 would have none"),
        (["--shards", "2", "--campaign-id", "a b"], "--campaign-id 'a b': an id is a name"),
    ],
)
def test_bad_submissions_exit_2_with_the_reason(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path, args: list[str], reason: str
) -> None:
    for engine in (
        ["slurm", "--results", str(tmp_path / "r")],
        ["k8s", "--emit", "--out", str(tmp_path / "k8s")],
    ):
        code, _, err = run_cli("submit", *engine, str(SMOKE), *args)
        assert code == 2 and reason in err, err
        assert "Traceback" not in err
    assert not (tmp_path / "r").exists() and not (tmp_path / "k8s").exists()


def test_a_shuffled_campaign_needs_a_seed(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    campaign = tmp_path / "shuffled.yaml"
    spec = yaml.safe_load(SMOKE.read_text())
    campaign.write_text(yaml.safe_dump({**spec, "order": "shuffled", "repetitions": 2}))
    code, _, err = run_cli("submit", "slurm", str(campaign), "--shards", "2")
    assert code == 2 and "shuffled without a seed" in err


def test_a_browser_given_as_a_path_is_refused(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The shards run a copy of the campaign elsewhere, where a browser named by its path
    would be refused on every node (clarke.campaign.paths): refused once, here."""
    (tmp_path / "firefox").write_text("")
    campaign = tmp_path / "pathbrowser.yaml"
    spec = yaml.safe_load(SMOKE.read_text())
    campaign.write_text(
        yaml.safe_dump({**spec, "browser": {**spec["browser"], "binary": "./firefox"}})
    )
    for engine in (
        ["slurm", "--results", str(tmp_path / "r"), "--emit"],
        ["k8s", "--emit", "--out", str(tmp_path / "k8s")],
    ):
        code, _, err = run_cli("submit", *engine, str(campaign), "--shards", "2")
        assert code == 2 and "browser.binary" in err and "is a path" in err, err
    assert not (tmp_path / "r").exists() and not (tmp_path / "k8s").exists()


def test_no_slurm_here_is_a_missing_part(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, _, err = run_cli(
        "submit", "slurm", str(SMOKE), "--shards", "3", "--results", str(tmp_path / "r")
    )
    assert code == 3, err
    assert "Slurm's commands (sbatch, scontrol) are not installed here" in err
    assert not (tmp_path / "r").exists()


def test_k8s_writes_manifests_only(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli("submit", "k8s", str(SMOKE), "--shards", "3")
    assert code == 2 and "give --emit" in err
    code, _, err = run_cli("submit", "slurm", str(SMOKE), "--shards", "3", "--emit", "--wait")
    assert code == 2 and "nothing to --wait for" in err


def test_batch_scripts_ask_for_whole_nodes_requeue_and_the_merge_after(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path
) -> None:
    where = _emit(run_cli, tmp_path, "--partition", "measure", "--time", "1:00:00")
    shards = (where / slurm.SHARDS_SCRIPT).read_text()
    directives = [line.split()[1] for line in shards.splitlines() if line.startswith("#SBATCH")]
    assert directives == [
        "--array=1-3", "--job-name=clarke-smoke-t", "--nodes=1", "--ntasks=1", "--exclusive",
        "--requeue", "--open-mode=append", f"--output={where}/logs/shard-%a.out",
        f"--chdir={where}", "--partition=measure", "--time=1:00:00",
    ]  # fmt: skip
    merge = (where / slurm.MERGE_SCRIPT).read_text()
    assert "#SBATCH --kill-on-invalid-dep=yes" in merge and "#SBATCH --no-requeue" in merge
    assert "#SBATCH --exclusive" not in merge and "#SBATCH --partition=measure" in merge
    # No #SBATCH line after the first command: sbatch stops reading them there.
    for text in (shards, merge):
        lines = [x for x in text.splitlines()[1:] if x.strip() and not x.startswith("#")]
        first_command = text.splitlines().index(lines[0])
        assert not any(x.startswith("#SBATCH") for x in text.splitlines()[first_command:])
    assert (where / slurm.CAMPAIGN_COPY).read_bytes() == SMOKE.read_bytes()
    assert os.access(where / slurm.SHARDS_SCRIPT, os.X_OK) and (where / "logs").is_dir()


def test_the_engines_run_the_same_steps(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    where = _emit(run_cli, tmp_path)
    code, _, err = run_cli(
        "submit", "k8s", str(SMOKE), "--shards", "3", "--campaign-id", "smoke-t",
        "--link-check", "quick", "--emit", "--out", str(tmp_path / "k8s"),
    )  # fmt: skip
    assert code == 0, err
    docs = list(yaml.safe_load_all((tmp_path / "k8s" / "clarke-campaign.yaml").read_text()))
    (job,) = [d for d in docs if d["kind"] == "Job"]
    pod_script = job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    (merge_job,) = yaml.safe_load_all((tmp_path / "k8s" / "clarke-merge.yaml").read_text())
    merge_script = merge_job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    sub = prepare(SubmitOptions(SMOKE, 3, tmp_path, "smoke-t", ShardRunArgs(link_check="quick")))
    step = shard_step(sub)
    assert "--link-check quick" in step
    assert step in (where / slurm.SHARDS_SCRIPT).read_text() and step in pod_script
    assert merge_step() in (where / slurm.MERGE_SCRIPT).read_text()
    assert merge_step() in merge_script


def _stand_in(tmp_path: Path) -> dict[str, str]:
    """A PATH whose `clarke` writes its arguments to `calls` and succeeds."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    f = bindir / "clarke"
    f.write_text(f'#!/bin/sh\necho "clarke $*" >> "{tmp_path}/calls"\n')
    f.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


def _calls(tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "calls"
    return [shlex.split(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_a_shard_task_runs_its_shard_resumes_it_and_stops_after_its_restarts(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path
) -> None:
    where = _emit(run_cli, tmp_path)
    script = where / slurm.SHARDS_SCRIPT
    env = {**_stand_in(tmp_path), "SLURM_ARRAY_TASK_ID": "2"}
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (call,) = _calls(tmp_path)
    results = tmp_path / "results"
    assert call == [
        "clarke", "run", str(where / "campaign.yaml"), "--shard", "2/3",
        "--campaign-id", "smoke-t", "--results", str(results), "--link-check", "quick",
    ]  # fmt: skip
    # Requeued after its node died: the shard's directory exists, so it is resumed.
    shard = results / "smoke-t-shard2of3"
    shard.mkdir(parents=True)
    (shard / "meta.json").write_text("{}")
    env["SLURM_RESTART_COUNT"] = "3"
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "restart 3 (SLURM_RESTART_COUNT)" in proc.stdout
    assert _calls(tmp_path)[-1][-2:] == ["--resume", str(shard)]
    # Past the limit: not run again.
    env["SLURM_RESTART_COUNT"] = "4"
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True)
    assert proc.returncode == 1 and "giving up" in proc.stderr
    assert len(_calls(tmp_path)) == 2
    # Run by hand, without sbatch: it says so.
    del env["SLURM_ARRAY_TASK_ID"]
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "run this script with sbatch" in proc.stderr


def test_a_second_submission_under_one_id_must_be_the_same_campaign(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path
) -> None:
    _emit(run_cli, tmp_path)
    _emit(run_cli, tmp_path)  # the same campaign again: its shards would resume
    other = tmp_path / "other.yaml"
    other.write_text(SMOKE.read_text().replace("repetitions: 1", "repetitions: 2"))
    code, _, err = run_cli(
        "submit", "slurm", str(other), "--shards", "3", "--results", str(tmp_path / "results"),
        "--campaign-id", "smoke-t", "--emit",
    )  # fmt: skip
    assert code == 2 and "holds another campaign file under id smoke-t" in err
    (tmp_path / "results" / "smoke-t").mkdir()
    code, _, err = run_cli(
        "submit", "slurm", str(SMOKE), "--shards", "3", "--results", str(tmp_path / "results"),
        "--campaign-id", "smoke-t", "--emit",
    )  # fmt: skip
    assert code == 2 and "has been merged already" in err


def test_a_page_models_file_goes_along_or_is_refused(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Slurm: the campaign's own page models file is copied beside its copy (the path is
    relative to the campaign); one outside the campaign's directory, and any on
    Kubernetes (the ConfigMap holds the campaign only), exit 2."""
    models = Path("pages/examples/server-delays.yaml")
    (tmp_path / "c" / "models").mkdir(parents=True)
    (tmp_path / "c" / "models" / "delays.yaml").write_bytes(models.read_bytes())
    (tmp_path / "delays.yaml").write_bytes(models.read_bytes())
    spec = yaml.safe_load(SMOKE.read_text())
    spec["matrix"].update(models=["staggered"], sizes=["170k"])
    results = str(tmp_path / "results")
    for name, models_file in (("inside", "models/delays.yaml"), ("outside", "../delays.yaml")):
        campaign = tmp_path / "c" / f"{name}.yaml"
        campaign.write_text(yaml.safe_dump({**spec, "pages": {"models_file": models_file}}))
        code, _, err = run_cli(
            "submit", "slurm", str(campaign), "--shards", "3", "--results", results,
            "--campaign-id", name, "--emit",
        )  # fmt: skip
        if name == "inside":
            assert code == 0, err
            copied = tmp_path / "results" / "inside.slurm" / "models" / "delays.yaml"
            assert copied.read_bytes() == models.read_bytes()
        else:
            # Refused when the campaign is planned (clarke.campaign.paths), before the
            # batch scripts' own check that the copy lands beside the campaign's copy.
            assert code == 2 and "pages.models_file: '../delays.yaml' leads outside" in err, err
            assert not (tmp_path / "results" / "outside.slurm").exists()
        code, _, err = run_cli(
            "submit", "k8s", str(campaign), "--shards", "3", "--emit", "--out",
            str(tmp_path / "k8s"),
        )  # fmt: skip
        assert code == 2 and "pages.models_file" in err, err


def test_placeholders_must_all_be_filled_and_used() -> None:
    assert render("a {{ x }} b\n  {{ y }}\n", {"x": "1", "y": "p\nq"}) == "a 1 b\n  p\n  q\n"
    assert render("a\n{{ y }}\nb\n", {"y": ""}) == "a\nb\n"
    with pytest.raises(ValueError, match="without a value"):
        render("{{ x }}", {})
    with pytest.raises(ValueError, match="without a placeholder"):
        render("x", {"y": "1"})


# What `scontrol -o show job` printed for an array of 3 on this test's cluster (cut to
# the fields read), and a pending remainder.
SHOWN = {
    41: [
        "JobId=42 ArrayJobId=41 ArrayTaskId=1 JobName=clarke-x JobState=COMPLETED "
        "Reason=None Requeue=1 Restarts=0 ExitCode=0:0 NodeList=n1 BatchHost=n1",
        "JobId=43 ArrayJobId=41 ArrayTaskId=2 JobName=clarke-x JobState=PENDING "
        "Reason=BeginTime Requeue=1 Restarts=1 ExitCode=0:0 NodeList=(null)",
        "JobId=41 ArrayJobId=41 ArrayTaskId=3 JobName=clarke-x JobState=FAILED "
        "Reason=NonZeroExitCode Requeue=1 Restarts=0 ExitCode=3:0 NodeList=n3 BatchHost=n3",
    ],
    44: [
        "JobId=44 JobName=clarke-x-merge JobState=CANCELLED Reason=Dependency Restarts=0 "
        "ExitCode=0:0 NodeList=(null)"
    ],
}


def test_job_states_are_read_per_shard(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    class Done:
        def __init__(self, out: str, code: int = 0, err: str = "") -> None:
            self.stdout, self.returncode, self.stderr = out, code, err

    def fake_run(argv: list[str], **_: object) -> Done:
        return Done("\n".join(SHOWN[int(argv[-1])]))

    monkeypatch.setattr(slurm_jobs.sh, "run", fake_run)
    jobs = slurm_jobs.snapshot(slurm.Submitted(41, 44, tmp_path), 3)
    assert [j.describe() for j in jobs] == [
        "COMPLETED on n1 exit 0:0",
        "PENDING (BeginTime) restarts 1",
        "FAILED on n3 exit 3:0",
        "CANCELLED exit 0:0",
    ]
    assert [j.ended for j in jobs] == [True, False, True, True]
    assert slurm_jobs._task_ids("2-4%2") == [2, 3, 4]
    assert slurm_jobs._task_ids("1,3-4") == [1, 3, 4]
    SHOWN[41] = ["JobId=41 ArrayJobId=41 ArrayTaskId=1-3 JobState=PENDING Reason=Priority"]
    assert [j.state for j in slurm_jobs.snapshot(slurm.Submitted(41, 44, tmp_path), 3)][:3] == [
        "PENDING"
    ] * 3


def test_the_partition_is_checked_and_a_small_one_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    sub = prepare(SubmitOptions(SMOKE, 3, Path("results")))
    known = [slurm.Partition("debug", 1, "UP", False), slurm.Partition("measure", 2, "DOWN", True)]
    monkeypatch.setattr(slurm, "partitions", lambda: known)
    cluster = slurm.check_cluster(sub, slurm.SlurmOptions())
    assert cluster.partition.name == "measure"
    assert cluster.notes == [
        "partition measure is DOWN: the jobs wait until it is UP",
        "partition measure has 2 nodes for 3 shards: each shard takes a whole node, so at "
        "most 2 run at a time",
    ]
    with pytest.raises(
        InputError, match="--partition gpu: no such partition; Slurm has: debug, measure"
    ):
        slurm.check_cluster(sub, slurm.SlurmOptions(partition="gpu"))
    monkeypatch.setattr(slurm, "partitions", lambda: known[:1])
    with pytest.raises(InputError, match=r"no default partition: give --partition \(debug\)"):
        slurm.check_cluster(sub, slurm.SlurmOptions())


def test_an_influx_password_keeps_the_scripts_to_their_owner(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = "http://clarke:secret@127.0.0.1:8086/clarke"
    where = _emit(run_cli, tmp_path, "--influx", url)
    shards = where / slurm.SHARDS_SCRIPT
    assert f"export CLARKE_INFLUX={url}" in shards.read_text().splitlines()
    assert shards.stat().st_mode & 0o777 == 0o700
    assert (where / slurm.MERGE_SCRIPT).stat().st_mode & 0o777 == 0o700
