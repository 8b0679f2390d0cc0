"""Cross traffic for real (issue 17): a campaign on the netns testbed loads a page while a
bulk Cubic flow from xserver to xclient shares the 10 Mb/s link; the load is verified as
every load is, its record carries the flow's achieved rate, and nothing of the flow or
the testbed is left afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clarke.place import netns
from clarke.place.plan import parse_ns
from clarke.results.journal import Journal
from clarke.results.record import Status
from clarke.testbed import lifecycle
from conftest import need

pytestmark = [pytest.mark.root, pytest.mark.browser, pytest.mark.slow]

PROFILE = "wired-10m-50ms"  # a rate limit a single flow fills within a second or two


def test_bulk_cubic_shares_the_link_with_a_verified_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need(os.geteuid() == 0, "root (network namespaces)")
    monkeypatch.setenv("CLARKE_STATE_DIR", str(tmp_path / "testbeds"))
    campaign = tmp_path / "cross.yaml"
    campaign.write_text(
        yaml.safe_dump(
            {
                "name": "cross",
                "matrix": {
                    "profiles": [PROFILE],
                    "http": [2],
                    "cc": ["cubic"],
                    "models": ["uniform"],
                    "sizes": ["100k"],
                    "cross_traffic": ["bulk-cubic"],
                },
                "repetitions": 1,
                "retries": 0,
            }
        )
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "clarke", "run", str(campaign), "--results",
             str(tmp_path / "results"), "--link-check", "quick"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        (d,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
        (record,) = list(Journal.in_dir(d).records())
        assert record.status is Status.ok, record.reason
        assert record.run_id == f"{PROFILE}-h2-cubic-uniform-100k-xbulk-cubic-r1"
        assert record.cross_traffic == "bulk-cubic"
        crossing = record.details["cross_traffic"]
        assert (crossing["name"], crossing["flows"], crossing["direction"]) == (
            "bulk-cubic",
            1,
            "forward",
        )
        assert crossing["cc"] == ["cubic"]  # read from the sender's sockets
        # The flow moved bytes during the load, at most what the link carries (its
        # tolerance: the profile's rate is the ceiling of whatever the link passes).
        assert 0 < record.metrics["cross_forward_mbps"] <= 10 * 1.05, crossing
        # Started before the load: it had moved bytes and settled first.
        assert crossing["confirmed_after_s"] <= crossing["settled_after_s"]
        # The page's own bytes are counted as before: only the browser crosses st-lan.
        assert record.metrics["app_bytes"] > 0
    finally:
        lifecycle.down_all()
    left = [n for n in netns.namespaces() if parse_ns(n) and netns.owner(n) is None]
    tag = f"clarke:{(tmp_path / 'testbeds').resolve()}"
    left += [n for n in netns.namespaces() if parse_ns(n) and netns.owner(n) == tag]
    assert not left, left
    # The generators went with the testbed (they ran against this testbed's xserver).
    iperf = subprocess.run(["pgrep", "-a", "iperf3"], capture_output=True, text=True).stdout
    assert f" {crossing['server']} " not in f"{iperf} ".replace("\n", " "), iperf
