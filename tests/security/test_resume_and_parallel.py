"""Resume and --parallel (issue 37, finding 10): a damaged plan.json was not checked on
resume, and --parallel had no upper bound.

- Every kind of damage to plan.json (not JSON, not an object, runs missing or of the
  wrong shape, a count or a seed that does not agree, runs that are not the campaign's)
  stops `clarke run --resume` with exit 2 naming plan.json, before anything is built,
  and no file of the results directory changes. (A plan that reads but is not the
  campaign's is judged after the campaign file is compared with the stored one, whose
  difference says more.)
- `--parallel N` above one testbed per CPU this process may use exits 2 naming the
  limit and why, before the campaign file is even read."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clarke.campaign.plan import plan_file
from clarke.results import store
from clarke.results.meta import Meta
from conftest import need

SMOKE = Path("campaigns/smoke.yaml")


def _results_dir(tmp_path: Path) -> Path:
    plan = plan_file(SMOKE)
    return store.create(
        tmp_path,
        "smoke-resume",
        SMOKE,
        {"campaign": plan.campaign.name, "order": plan.campaign.order.value, "seed": plan.seed,
         "count": len(plan.runs), "shard": "", "runs": [r.to_dict() for r in plan.runs]},
        Meta(campaign=plan.campaign.name, shard="", link=[]),
    )  # fmt: skip


def _edit(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        data = json.loads(path.read_text())
        out = change(data)
        path.write_text(json.dumps(data if out is None else out))

    return apply


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.__setitem__(key, value)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "not json": lambda p: p.write_text('{"campaign": "smoke", "runs": ['),
    "empty": lambda p: p.write_text(""),
    "a list": lambda p: p.write_text("[1, 2]"),
    "not utf-8": lambda p: p.write_bytes(b"\xff\xfe{}"),
    "runs missing": _edit(lambda d: d.pop("runs")),
    "runs not a list": _edit(_set("runs", {"a": 1})),
    "a run not an object": _edit(lambda d: d["runs"].__setitem__(0, "x")),
    "a run id changed": _edit(lambda d: d["runs"][0].__setitem__("run_id", "other-r1")),
    "a run missing": _edit(lambda d: d["runs"].pop()),
    "count disagrees": _edit(_set("count", 99)),
    "seed of the wrong type": _edit(_set("seed", "abc")),
    "another campaign": _edit(_set("campaign", "other")),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_plan_json_stops_the_resume(
    tmp_path: Path,
    damage: str,
    run_cli,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    need(os.geteuid() == 0, "root (clarke run checks it before a resume's plan agrees)")
    monkeypatch.setenv("CLARKE_STATE_DIR", str(tmp_path / "state"))
    d = _results_dir(tmp_path)
    DAMAGE[damage](d / store.PLAN)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    code, out, err = run_cli("run", str(SMOKE), "--resume", str(d))
    assert code == 2, out + err
    assert "plan.json" in err and "Traceback" not in err, err
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    assert not (tmp_path / "state").exists()  # no testbed was begun


def test_a_whole_plan_json_is_read_back(tmp_path: Path) -> None:
    """The check can pass: the plan.json a run writes is read back as it was written."""
    d = _results_dir(tmp_path)
    recorded = store.read_plan(d)
    assert recorded.campaign == "smoke" and len(recorded.runs) == recorded.count == 3


def test_parallel_has_an_upper_bound(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    cpus = len(os.sched_getaffinity(0))
    for n in (cpus + 1, 1000):
        code, out, err = run_cli("run", str(tmp_path / "missing.yaml"), "--parallel", str(n))
        assert code == 2, out + err
        assert f"--parallel {n}" in err and f"at most {cpus}" in err and "CPU" in err, err
