"""`clarke results merge` on recorded data: tests/data/recorded-repeats (40 real loads)
split into shard directories exactly as `clarke run --shard i/N --campaign-id ID` lays
them out, merged back, and the merge's refusals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clarke.results import store
from clarke.results.journal import Journal
from clarke.results.record import RunRecord
from helpers import split_results

RECORDED = Path("tests/data/recorded-repeats")


def _records(d: Path) -> list[RunRecord]:
    return list(Journal.in_dir(d).records())


def test_split_and_merged_back_is_the_recorded_campaign(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    shards = split_results(RECORDED, tmp_path / "shards", 3)
    assert [len(_records(s)) for s in shards] == [14, 13, 13]
    out = tmp_path / "merged"
    code, stdout, err = run_cli("results", "merge", *map(str, reversed(shards)), "--out", str(out))
    assert code == 0, err
    assert "40 of 40 planned runs" in stdout and not err
    merged = _records(out)
    assert {r.shard for r in merged} == {"1/3", "2/3", "3/3"}
    assert [r.model_copy(update={"shard": ""}) for r in merged] == _records(RECORDED)
    want_plan = json.loads((RECORDED / store.PLAN).read_text())
    assert json.loads((out / store.PLAN).read_text()) == want_plan
    assert (out / store.CAMPAIGN_COPY).read_bytes() == (RECORDED / store.CAMPAIGN_COPY).read_bytes()
    meta = json.loads((out / store.META).read_text())
    assert meta["campaign_id"] == "recorded-repeats" and meta["missing_runs"] == []
    assert [m["shard"] for m in meta["merged_from"]] == ["1/3", "2/3", "3/3"]
    assert len(meta["link"]) == 3 and {c["shard"] for c in meta["link"]} == {"1/3", "2/3", "3/3"}
    # what the nightly does with it next
    code, stdout, _ = run_cli("compare", str(RECORDED), str(out))
    assert code == 0 and "no regression" in stdout
    assert run_cli("report", str(out))[0] == 0 and (out / "report.html").stat().st_size > 10_000
    code, stdout, _ = run_cli("results", "export", str(out))
    assert code == 0 and "40 records" in stdout


def test_a_missing_shard_is_reported(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    shards = split_results(RECORDED, tmp_path / "shards", 3)
    code, _, err = run_cli(
        "results", "merge", str(shards[0]), str(shards[1]), "--out", str(tmp_path / "m")
    )
    assert code == 0
    assert "missing shards: 3/3" in err and "13 runs without a successful load" in err
    assert len(json.loads((tmp_path / "m" / store.META).read_text())["missing_runs"]) == 13
    code, _, err = run_cli(
        "results",
        "merge",
        str(shards[0]),
        str(shards[1]),
        "--out",
        str(tmp_path / "m2"),
        "--require-complete",
    )
    assert code == 2 and "incomplete" in err


@pytest.mark.parametrize(
    "case",
    [
        "other campaign",
        "same shard twice",
        "edited campaign file",
        "run in two shards",
        "other seed",
    ],
)
def test_refuses_what_is_not_one_campaign(tmp_path: Path, run_cli, case: str) -> None:  # type: ignore[no-untyped-def]
    shards = split_results(RECORDED, tmp_path / "shards", 2)
    args = [str(shards[0]), str(shards[1])]
    expect = ""
    if case == "other campaign":
        args = [str(shards[0]), "tests/data/recorded-lan"]
        expect = "different campaign ids"
    elif case == "same shard twice":
        copy = tmp_path / "copy"
        shutil.copytree(shards[0], copy)
        args = [str(shards[0]), str(copy)]
        expect = "overlapping shards: shard 1/2 in"
    elif case == "edited campaign file":
        f = shards[1] / store.CAMPAIGN_COPY
        f.write_text(f.read_text().replace("repetitions: 20", "repetitions: 21"))
        expect = "different campaign files"
    elif case == "run in two shards":
        stray = _records(shards[0])[0].model_copy(update={"shard": "2/2"})
        with Journal.in_dir(shards[1]) as j:
            j.append(stray)
        expect = f"duplicate run ids: 1 runs in both {shards[0]} and {shards[1]}"
    elif case == "other seed":
        p = shards[1] / store.PLAN
        p.write_text(json.dumps({**json.loads(p.read_text()), "seed": 8}))
        expect = "different plan seeds"
    out = tmp_path / "merged"
    code, _, err = run_cli("results", "merge", *args, "--out", str(out))
    assert code == 2, err
    assert expect in err, err
    assert str(args[1]) in err or case == "same shard twice"
    assert not out.exists()
