"""Link parameters swept over a profile, for real (issue 51; clarke/link_points.py): a
campaign runs each point on the netns testbed with its own pair of link checks, each
judged against the point with the profile's own tolerance; a point and a profile file
copied by hand with its values give the same link. Both judge measured times and rates,
so they run in the timing phase, one at a time with nothing else running. The compose
stack runs a sweep point in tests/integration/test_compose.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from clarke import profiles
from clarke.results.journal import Journal
from clarke.results.record import Status
from conftest import ON_OWN_TESTBEDS, SMALL_LAN_CAMPAIGN

pytestmark = [*ON_OWN_TESTBEDS, pytest.mark.timing]

BASE = "wired-10m-50ms"
# The campaign's base: lan's rates are unlimited, so its quick link checks are the round
# trip alone (rates are measured on a point in the second test).
FAST_BASE = "lan"


def _clarke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clarke", *args], capture_output=True, text=True, timeout=900
    )


def _said(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout[-3000:] + proc.stderr[-3000:]


def test_a_sweep_runs_each_point_between_its_own_link_checks(tmp_path: Path) -> None:
    campaign = tmp_path / "sweep.yaml"
    matrix = {**SMALL_LAN_CAMPAIGN["matrix"], "profiles": [FAST_BASE], "http": [2],  # type: ignore[dict-item]
              "rtt_ms": [20, 120]}  # fmt: skip
    campaign.write_text(yaml.safe_dump({**SMALL_LAN_CAMPAIGN, "name": "sweep", "matrix": matrix,
                                        "repetitions": 1}))  # fmt: skip
    results = tmp_path / "results"
    proc = _clarke("run", str(campaign), "--results", str(results), "--link-check", "quick")
    assert proc.returncode == 0, _said(proc)
    (run_dir,) = [d for d in results.iterdir() if d.is_dir()]
    records = {r.run_id: r for r in Journal.in_dir(run_dir).records()}
    assert set(records) == {f"{FAST_BASE}-rtt{ms}-h2-bbr-uniform-100k-r1" for ms in (20, 120)}
    for r in records.values():
        assert r.status is Status.ok, (r.run_id, r.reason)
        assert r.cell.link == f"{FAST_BASE}+rtt_ms={r.cell.texts()['rtt_ms']}"
    meta = json.loads((run_dir / "meta.json").read_text())
    points = [f"{FAST_BASE}+rtt_ms=20", f"{FAST_BASE}+rtt_ms=120"]
    assert [(c["phase"], c["profile"]) for c in meta["link"]] == [
        (phase, point) for point in points for phase in ("before", "after")
    ]
    for check in meta["link"]:
        expected = profiles.read(check["profile"]).idle_rtt_ms
        print(f"{check['phase']} {check['profile']}: RTT {check['rtt_mean_ms']} ms "
              f"(profile {expected} ms), passed {check['passed']}")  # fmt: skip
        # Judged against the point (its RTT, the profile's tolerance), not the profile.
        assert check["passed"] is True, check
    assert meta["apply_counts"] == {f"profile:{p}": 1 for p in points} | {"cc:bbr": 1}


def _check(run_cli: Any, testbed_id: int, profile: str | None = None) -> dict[str, Any]:
    args = ["testbed", "check", "--id", str(testbed_id), "--samples", "10", "--duration", "3",
            "--omit", "1", "--json"] + (["--profile", profile] if profile else [])  # fmt: skip
    code, out, err = run_cli(*args)
    report: dict[str, Any] = json.loads(out)
    assert code == (0 if report["ok"] else 1), err
    return report


def test_a_point_and_a_profile_copied_with_its_values_measure_the_same(
    tmp_path: Path, run_cli: Any
) -> None:
    point = f"{BASE}+rtt_ms=100+rate_mbps=5+queue_ms=100"
    data = yaml.safe_load((profiles.profile_dir() / f"{BASE}.yaml").read_text())
    for way in ("forward", "return"):
        data[way] = dict(data[way]) | {"rate_mbps": 5, "uplink_delay_ms": 25,
                                       "downlink_delay_ms": 25, "queue": {"ms": 100}}  # fmt: skip
    copied = tmp_path / "copied.yaml"
    copied.write_text(yaml.safe_dump(data))
    code, out, err = run_cli("testbed", "up", "--profile", point, "--json")
    assert code == 0, err
    tb = json.loads(out)
    assert tb["profile"] == point
    reports = {"point": _check(run_cli, tb["id"]), "copied": _check(run_cli, tb["id"], str(copied))}
    checks = {k: {c["name"]: c for c in r["checks"]} for k, r in reports.items()}
    for name in ("rtt p50", "forward rate", "return rate"):
        point, by_hand = checks["point"][name], checks["copied"][name]
        print(
            f"{name}: point {point['measured']} ({point['verdict']}), copied profile "
            f"{by_hand['measured']} ({by_hand['verdict']}), expected {point['expected']}"
        )
        assert point["expected"] == by_hand["expected"], (point, by_hand)  # the same link asked
        assert point["verdict"] == by_hand["verdict"] == "ok", (point, by_hand)
    assert reports["point"]["ok"] and reports["copied"]["ok"]
