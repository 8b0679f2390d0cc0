"""A scenario may ask for more repetitions than the campaign (campaigns/nightly.yaml gives
its noisiest cells more loads): its cells get that many runs, interleaved with the rest, a
cell listed by several scenarios the most any asks, and campaigns without one keep their
plans. What cannot work with it is refused naming the field."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from clarke.campaign.plan import ShardBy, plan_file

MATRIX = {"profiles": ["lan"], "cc": ["bbr"], "models": ["uniform"], "sizes": ["100k"]}


def _campaign(tmp_path: Path, **more: object) -> Path:
    doc = {
        "name": "t",
        "scenarios": [
            {"name": "all", "matrix": {**MATRIX, "http": [1.1, 2, 3]}},
            {"name": "noisy", "matrix": {**MATRIX, "http": [3]}, "repetitions": 5},
        ],
        "repetitions": 2,
        "order": "shuffled",
        "seed": 4,
        **more,
    }
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


def test_a_scenarios_cells_get_its_repetitions_interleaved(tmp_path: Path) -> None:
    runs = plan_file(_campaign(tmp_path)).runs
    per_cell = Counter(r.run_id.rsplit("-r", 1)[0] for r in runs)
    assert per_cell == {
        "lan-h1-bbr-uniform-100k": 2,
        "lan-h2-bbr-uniform-100k": 2,
        "lan-h3-bbr-uniform-100k": 5,
    }
    h3 = sorted(r.repetition for r in runs if r.cell.path.startswith("lan/3/"))
    assert h3 == [1, 2, 3, 4, 5]
    assert {r.scenarios for r in runs if r.cell.path.startswith("lan/3/")} == {("all", "noisy")}
    # shuffled over the whole profile: extra runs already in the plan's first half
    assert any(r.repetition > 2 for r in runs[: len(runs) // 2])


def test_every_shard_gets_the_extra_runs_and_together_they_are_the_plan(tmp_path: Path) -> None:
    plan = plan_file(_campaign(tmp_path))
    for by in ShardBy:
        shards = [plan.shard(i, 2, by) for i in (1, 2)]
        ids = [r.run_id for s in shards for r in s]
        assert sorted(ids) == sorted(r.run_id for r in plan.runs) and len(set(ids)) == len(ids)
    by_rep = [plan.shard(i, 2, ShardBy.repetition) for i in (1, 2)]
    assert all(sum(r.cell.path.startswith("lan/3/") for r in s) >= 2 for s in by_rep)


def test_the_plan_says_which_scenario_takes_more(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli("campaign", "plan", str(_campaign(tmp_path)))
    assert code == 0
    assert out.splitlines()[-1].startswith("9 runs: 3 cells x 2 repetitions (noisy: 5); lan: 9")


@pytest.mark.parametrize(
    ("more", "said"),
    [
        ({"repetitions": 6}, "scenarios[1].repetitions: 5 is fewer than the campaign's 6"),
        (
            {
                "scenarios": [
                    {"name": "a", "matrix": MATRIX | {"http": [2]}, "repetitions": 3},
                    {"name": "b", "matrix": MATRIX | {"http": [3]}, "repetitions": 1},
                ]
            },
            "scenarios[1].repetitions: 1 is fewer than the campaign's 2",
        ),
        (
            {"repetitions": {"min": 3, "max": 30, "until": {"metric": "plt", "half_width": 0.02}}},
            "scenarios[1].repetitions: a scenario's own repetitions need a fixed number",
        ),
        ({"slot_phase": {"mode": "spread"}}, "scenarios[1].repetitions: slot_phase spreads"),
    ],
)
def test_what_cannot_take_a_scenarios_repetitions_is_refused(
    tmp_path: Path,
    run_cli,
    more: dict[str, object],
    said: str,  # type: ignore[no-untyped-def]
) -> None:
    f = _campaign(tmp_path, **more)
    code, _, err = run_cli("campaign", "validate", str(f))
    assert code == 2 and said in err and "Traceback" not in err, err
