"""Ids are names, not paths (issue 37, finding 7): `--campaign-id ../x` wrote outside
--results. Every id that comes in (the option, and the ids a resume reads back from
meta.json, parallel.json or implementations.json to name directories) goes through one
validator: exit 2 naming where it came from, and nothing is created."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clarke.errors import InputError
from conftest import need

SMOKE = Path("campaigns/smoke.yaml").resolve()
BAD = ["../x", "..", ".", "a/b", "/abs", "x\n", "", "-rf", "a" * 200, "x\x00y", "~root"]
GOOD = ["smoke-20250101T000000Z", "geo_study.2", "A1"]


@pytest.mark.parametrize("value", BAD)
def test_the_validator_refuses_paths(value: str) -> None:
    from clarke.ids import check_id

    with pytest.raises(InputError, match="--campaign-id"):
        check_id(value, "--campaign-id")


@pytest.mark.parametrize("value", GOOD)
def test_the_validator_takes_names(value: str) -> None:
    from clarke.ids import check_id

    assert check_id(value, "--campaign-id") == value


@pytest.mark.parametrize("value", ["../x", "../../x", "a/b", "{tmp}/abs", "..", "-x"])
def test_campaign_id_option(
    tmp_path: Path,
    value: str,
    run_cli,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    """The compose substrate: no root or testbed needed to get as far as the results
    directory (before the fix, `../x` was made beside --results)."""
    monkeypatch.setenv("CLARKE_STATE_DIR", str(tmp_path / "state"))
    results = tmp_path / "deep" / "results"
    results.mkdir(parents=True)
    value = value.replace("{tmp}", str(tmp_path))
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    code, out, err = run_cli(
        "run", str(SMOKE), "--substrate", "compose", "--results", str(results),
        "--campaign-id", value,
    )  # fmt: skip
    assert code == 2, out + err
    assert "--campaign-id" in err and "Traceback" not in err, err
    # Nothing made, inside the test's directory or beside it.
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


@pytest.mark.root
def test_ids_read_back_on_resume(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    """A parallel run's parts directory and a campaign's top directory on several
    implementations name their directories after ids they read back: a damaged or
    crafted one is refused, naming its file."""
    need(os.geteuid() == 0, "root (a campaign on several implementations checks it first)")
    parts = tmp_path / "c.testbeds"
    parts.mkdir()
    (parts / "parallel.json").write_text(
        json.dumps(
            {"campaign": "smoke", "campaign_id": "../../escape", "testbeds": 2,
             "cpus": [[0], [1]], "shared_cpus": False, "merged": "c"}
        )
    )  # fmt: skip
    code, out, err = run_cli("run", str(SMOKE), "--parallel", "2", "--resume", str(parts))
    assert code == 2, out + err
    assert "parallel.json" in err and "campaign_id" in err, err
    assert not (tmp_path.parent / "escape").exists()
    top = tmp_path / "top"
    top.mkdir()
    (top / "implementations.json").write_text(
        json.dumps(
            {"campaign": "smoke", "campaign_id": "../escape", "started_at": "x",
             "combinations": []}
        )
    )  # fmt: skip
    code, out, err = run_cli("run", str(SMOKE), "--resume", str(top))
    assert code == 2, out + err
    assert "implementations.json" in err and "campaign_id" in err, err
