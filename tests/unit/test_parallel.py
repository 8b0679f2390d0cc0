"""`clarke run --parallel N` without a testbed: the repetition assignment (every cell
with N or more repetitions on every testbed, every run exactly once), the CPU sets, the
children's command lines, bad input (exit 2 naming the option, never a traceback), the
merge of lanes and the cross-testbed check on recorded loads (tests/data/recorded-repeats:
40 real loads, 2 cells of 20 repetitions)."""

from __future__ import annotations

import io
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from clarke.campaign.plan import ShardBy, plan_file
from clarke.results import store
from clarke.results.journal import Journal
from clarke.results.meta import Meta
from clarke.results.record import RunRecord
from clarke.run.loop.options import RunOptions, Shard
from clarke.run.parallel import testbeds as parallel
from clarke.run.parallel.check import TOO_FEW, check_testbeds, warnings
from clarke.run.parallel.testbeds import (
    STATE_FILE,
    Lane,
    ParallelState,
    child_argv,
    cpu_sets,
    resolve_resume,
)
from helpers import split_results

RECORDED = Path("tests/data/recorded-repeats")


def _campaign(tmp_path: Path, **changes: object) -> Path:
    data: dict[str, object] = {
        "name": "par",
        "matrix": {
            "profiles": ["lan", "geo"],
            "http": [1.1, 2, 3],
            "cc": ["bbr", "cubic"],
            "models": ["uniform"],
            "sizes": ["100k"],
        },
        "repetitions": 5,
        "browser": {"engine": "selenium"},
    }
    f = tmp_path / "par.yaml"
    f.write_text(yaml.safe_dump({**data, **changes}))
    return f


@pytest.mark.parametrize("order", ["listed", "shuffled"])
@pytest.mark.parametrize("repetitions", [1, 2, 3, 5])
@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_repetition_shards_spread_every_cell_and_hold_every_run_once(
    tmp_path: Path, order: str, repetitions: int, count: int
) -> None:
    f = _campaign(tmp_path, repetitions=repetitions, order=order, seed=7)
    plan = plan_file(f)
    shards = [plan.shard(i, count, ShardBy.repetition) for i in range(1, count + 1)]
    ids = [r.run_id for s in shards for r in s]
    assert Counter(ids) == Counter(r.run_id for r in plan.runs)  # every run exactly once
    cells = {r.cell for r in plan.runs}
    for cell in cells:
        per_shard = [sum(1 for r in s if r.cell == cell) for s in shards]
        if repetitions >= count:
            assert all(n >= 1 for n in per_shard), (cell, per_shard)
        assert max(per_shard) - min(per_shard) <= 1, (cell, per_shard)
    # Rotating each cell's start keeps the testbeds' shares even, not just per cell.
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1, sizes


def test_repetition_assignment_does_not_depend_on_the_plan_order(tmp_path: Path) -> None:
    one = plan_file(_campaign(tmp_path, order="shuffled", seed=1))
    two = plan_file(_campaign(tmp_path, order="shuffled", seed=2))
    assert [r.run_id for r in one.runs] != [r.run_id for r in two.runs]
    for i in (1, 2, 3):
        a = {r.run_id for r in one.shard(i, 3, ShardBy.repetition)}
        b = {r.run_id for r in two.shard(i, 3, ShardBy.repetition)}
        assert a == b


def test_index_shards_are_still_every_nth_run(tmp_path: Path) -> None:
    plan = plan_file(_campaign(tmp_path))
    for i in (1, 2, 3):
        assert plan.shard(i, 3) == [r for r in plan.runs if r.index % 3 == i - 1]


def test_cpu_sets() -> None:
    assert cpu_sets(2, [0, 1]) == ([[0], [1]], False)
    assert cpu_sets(1, [0, 1]) == ([[0, 1]], False)
    assert cpu_sets(2, [0, 1, 2, 3, 4]) == ([[0, 1, 2], [3, 4]], False)
    assert cpu_sets(3, [1, 0]) == ([[0, 1], [0, 1], [0, 1]], True)  # shared, not refused


def test_child_argv(tmp_path: Path) -> None:
    shard = Shard(2, 3, ShardBy.repetition)
    options = RunOptions(link_check="quick", server="origin")
    argv = child_argv(Path("c.yaml"), shard, tmp_path, "cid", options)
    joined = " ".join(argv)
    assert "run c.yaml --shard 2/3 --shard-by repetition --campaign-id cid" in joined
    assert "--link-check quick" in joined and "--server origin" in joined
    assert "--link " not in joined and "--influx" not in joined and "--resume" not in joined
    options = RunOptions(resume=tmp_path / "d", link="satlink", influx_url="http://127.0.0.1:1")
    again = child_argv(Path("c.yaml"), shard, tmp_path, "cid", options)
    assert f"--resume {tmp_path / 'd'}" in " ".join(again) and "--campaign-id" not in again


def _parts_dir(tmp_path: Path, campaign: Path, testbeds: int = 2) -> Path:
    parts = tmp_path / "results" / "par-x.testbeds"
    parts.mkdir(parents=True)
    (parts / store.CAMPAIGN_COPY).write_bytes(campaign.read_bytes())
    state = ParallelState(
        campaign="par", campaign_id="par-x", testbeds=testbeds, cpus=[[0], [1]],
        shared_cpus=False, merged="par-x",
    )  # fmt: skip
    store.write_json(parts / STATE_FILE, state.model_dump(mode="json"))
    return parts


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--parallel", "0"], "--parallel 0"),
        (["--parallel", "-3"], "--parallel -3"),
        (["--parallel", "2", "--shard", "1/2"], "--shard"),
        (["--parallel", "2", "--testbed", "1"], "--testbed"),
        (["--parallel", "2", "--substrate", "compose"], "--substrate compose"),
        (["--parallel", "2", "--capture", "all"], "--capture"),
        (["--shard-by", "repetition"], "--shard-by"),
    ],
)
def test_bad_options_exit_2_naming_them(
    tmp_path: Path, run_cli, args: list[str], named: str
) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run_cli("run", str(_campaign(tmp_path)), *args, "--results", str(tmp_path))
    assert code == 2, out + err
    assert named in err and "Traceback" not in out + err
    assert list(tmp_path.iterdir()) == [tmp_path / "par.yaml"]  # nothing made


def test_several_implementations_are_refused(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    campaign = _campaign(tmp_path, implementations={"link": ["satlink", "netem"]})
    code, _, err = run_cli("run", str(campaign), "--parallel", "2", "--results", str(tmp_path))
    assert code == 2 and "--parallel 2" in err and "--link" in err


def test_shuffled_without_seed_is_refused(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    campaign = _campaign(tmp_path, order="shuffled")
    code, _, err = run_cli("run", str(campaign), "--parallel", "2", "--results", str(tmp_path))
    assert code == 2 and "seed" in err and "--parallel 2" in err


def test_resume_combinations(tmp_path: Path, run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    campaign = _campaign(tmp_path)
    parts = _parts_dir(tmp_path, campaign)
    # A host with 4 CPUs, so that --parallel 3 passes its bound (one testbed per CPU).
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))
    code, _, err = run_cli("run", str(campaign), "--parallel", "3", "--resume", str(parts))
    assert code == 2 and "--parallel 3" in err and "--parallel 2" in err
    code, _, err = run_cli("run", str(campaign), "--resume", str(parts))
    assert code == 2 and "--parallel" in err and "Traceback" not in err
    plain = tmp_path / "plain"
    store.create(tmp_path, "plain", campaign, {"runs": []}, Meta(campaign="par"))
    code, _, err = run_cli("run", str(campaign), "--parallel", "2", "--resume", str(plain))
    assert code == 2 and "not a campaign run with --parallel" in err
    (tmp_path / "other").mkdir()
    other = _campaign(tmp_path / "other", repetitions=4)
    code, _, err = run_cli("run", str(other), "--parallel", "2", "--resume", str(parts))
    assert code == 2 and "not the campaign" in err


def test_the_merged_directory_leads_back_to_its_parts(tmp_path: Path) -> None:
    parts = _parts_dir(tmp_path, _campaign(tmp_path))
    merged = store.create(
        parts.parent, "par-x", parts / store.CAMPAIGN_COPY, {}, Meta(parallel={"parts": parts.name})
    )
    assert resolve_resume(merged) == parts == resolve_resume(parts)


def _merged_lanes(tmp_path: Path, run_cli) -> tuple[Path, list[RunRecord]]:  # type: ignore[no-untyped-def]
    lanes = split_results(RECORDED, tmp_path / "lanes", 2, by="repetition")
    out = tmp_path / "merged"
    code, _, err = run_cli("results", "merge", *map(str, lanes), "--out", str(out))
    assert code == 0, err
    return out, list(Journal.in_dir(out).records())


def test_repetition_lanes_merge_into_the_recorded_campaign(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    out, records = _merged_lanes(tmp_path, run_cli)
    assert sorted(r.run_id for r in records) == sorted(
        r.run_id for r in Journal.in_dir(RECORDED).records()
    )
    assert {r.testbed for r in records} == {"netns-1", "netns-2"}
    meta = json.loads((out / store.META).read_text())
    assert meta["shard_by"] == "repetition" and meta["missing_runs"] == []
    # Lanes sliced by index and by repetition are not one campaign's shards.
    by_index = split_results(RECORDED, tmp_path / "by-index", 2)
    code, _, err = run_cli(
        "results", "merge", str(by_index[0]), str(tmp_path / "lanes" / by_index[1].name),
        "--out", str(tmp_path / "mixed"),
    )  # fmt: skip
    assert code == 2 and "--shard-by" in err


def test_the_testbeds_of_recorded_loads_agree(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    _, records = _merged_lanes(tmp_path, run_cli)
    check = check_testbeds(records)
    assert check.reference == "1/2" and check.lanes == {"1/2": ["netns-1"], "2/2": ["netns-2"]}
    assert check.judged == len(check.rows) == 2 * 3  # two cells, three metrics
    assert all(r.n_reference == r.n_testbed == 10 for r in check.rows)
    assert check.disagreeing == [] and warnings(check) == []
    row = check.rows[0]
    assert not math.isnan(row.median_reference) and not math.isnan(row.p_holm)
    json.dumps(check.to_json(), allow_nan=False)  # meta.json keeps it: no NaN


def test_a_slower_testbed_is_warned_about(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    _, records = _merged_lanes(tmp_path, run_cli)
    slowed = [
        r.model_copy(update={"metrics": {k: v * 1.5 for k, v in r.metrics.items()}})
        if r.shard == "2/2"
        else r
        for r in records
    ]
    check = check_testbeds(slowed)
    assert len(check.disagreeing) == len(check.rows) == 6
    assert {r.verdict for r in check.rows} == {"slower"}
    lines = warnings(check)
    assert len(lines) == 6 and all("testbed 2/2 vs 1/2" in line for line in lines)


def test_cells_with_too_few_loads_show_medians_unjudged(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    _, records = _merged_lanes(tmp_path, run_cli)
    few = [r for r in records if r.repetition <= 2]  # one load per cell per testbed
    check = check_testbeds(few)
    assert check.judged == 0 and {r.verdict for r in check.rows} == {TOO_FEW}
    assert all(r.n_reference == r.n_testbed == 1 for r in check.rows)
    assert all(r.median_testbed > 0 and r.ratio > 0 for r in check.rows)
    assert warnings(check) == []
    assert json.loads(json.dumps(check.to_json()))["rows"][0]["p_holm"] is None


def test_a_child_that_ignores_sigterm_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parallel, "STOP_TIMEOUT_S", 1.0)
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    polite = "import time; time.sleep(60)"
    lanes = [Lane(i, [0], tmp_path / str(i), tmp_path / f"{i}.log") for i in (1, 2)]
    for lane, code in zip(lanes, (stubborn, polite), strict=True):
        lane.proc = subprocess.Popen([sys.executable, "-c", code])
    time.sleep(1.0)  # both past their start-up, the stubborn one ignoring SIGTERM
    parallel._stop(lanes, Console(file=io.StringIO()))
    assert [lane.killed for lane in lanes] == [True, False]
    assert lanes[0].exit_code == -signal.SIGKILL and lanes[1].exit_code == -signal.SIGTERM
