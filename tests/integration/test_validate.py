"""`clarke bench validate` on leo-starlink-measured, briefly: its own testbed, echoes
placed on the link's UTC clock (losses crowd the slot boundaries, jitter between
successive echoes), the rate each way per stretch of the schedule, and the table beside
the profile's published figures; nothing left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clarke.testbed import lifecycle

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.mark.timing
@pytest.mark.usefixtures("netns_state")
def test_validate_measures_the_starlink_profile(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "clarke", "bench", "validate", "leo-starlink-measured",
             "--duration", "20", "--rate-duration", "6", "--max-offered-mbps", "250",
             "--out", str(out)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        left = lifecycle.known_ids()
    finally:
        lifecycle.down_all()
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(proc.stdout)
    r = json.loads(out.read_text())
    f = r["figures"]
    assert r["echoes"]["sent"] == 2000 and r["echoes"]["lost"] > 0
    # Per-packet jitter: successive echoes differ by several ms (6.7 published).
    assert 3 <= f["rtt_successive_diff_ms"] <= 10
    assert f["rtt_min_ms"] >= 20
    # Losses crowd the boundaries: the 0.2 s after each loses echoes at tens of %, the
    # middle of the slots at the background's 0.4 %.
    start, middle = r["echoes"]["phases"][0], r["echoes"]["phases"][2]
    assert start["echoes"] >= 15 and start["lost_pct"] >= 10, r["echoes"]["phases"]
    assert middle["lost_pct"] <= 2, r["echoes"]["phases"]
    assert 0 < f["loss_after_boundary_pct"] <= 100
    # The link follows the schedule's rates where the UDP flow could fill them: stretches
    # the flow offered enough for and whose queue never ran empty (a user-space sender
    # that a busy VM pauses lets the queue drain: that stretch is a lower bound, and the
    # command does not judge it either). The return's rates (tens of Mb/s) are always
    # filled; the forward's, up to 250 Mb/s, may not be on a loaded machine.
    judged_in = {}
    for direction in ("forward", "return"):
        rates = r["rates"][direction]
        assert rates["segments"], rates
        judged_in[direction] = [
            s for s in rates["segments"] if not s["offer_limited"] and not s["queue_ran_empty"]
        ]
        for s in judged_in[direction]:
            assert s["measured_mbps"] == pytest.approx(s["scheduled_mbps"], rel=0.03), s
        for s in rates["segments"]:
            assert s["measured_mbps"] <= s["scheduled_mbps"] * 1.03, s
    assert judged_in["return"], r["rates"]["return"]
    verdicts = {p["figure"]: p["verdict"] for p in r["published"]}
    assert set(verdicts) >= {"rtt_median_ms", "loss_pct", "forward_rate_mbps"}
    assert set(verdicts.values()) <= {"inside", "outside", "not measured"}
    assert "RTT median (ms)" in proc.stdout and "Michel" in proc.stdout
    # The command removed its testbed itself.
    assert left == []
