"""One campaign on several implementations, for real (issue 15): satlink with origin
and with OpenLiteSpeed, HTTP/1.1, /2 and /3 with Cubic and BBR, two repetitions, then the
cross-implementation table. Where OpenLiteSpeed is not installed (CI) its combination
must be reported as not installed, never dropped; where it is, its loads must be
verified like origin's, the congestion control measured on every connection (kernel for
TCP, lsquic's log for QUIC)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from clarke.campaign.dimensions import CC, HTTP
from clarke.results.journal import Journal
from clarke.results.record import Status
from clarke.server.openlitespeed import find_install, install_problem
from clarke.testbed import lifecycle
from conftest import need

pytestmark = [pytest.mark.root, pytest.mark.browser, pytest.mark.slow]

CAMPAIGN = {
    "name": "impl",
    "matrix": {
        "profiles": ["lan"],
        "http": [1.1, 2, 3],
        "cc": ["cubic", "bbr"],
        "models": ["uniform"],
        "sizes": ["100k"],
    },
    "repetitions": 2,  # a ratio to the baseline needs two loads of each
    "retries": 1,
    "browser": {"engine": "selenium", "connections_per_server": {1.1: 1, 2: 6, 3: 6}},
    "implementations": {"link": "satlink", "server": ["origin", "openlitespeed"]},
}
MEASURED_BY = {"h1": "kernel", "h2": "kernel", "h3": "lsquic log"}


@pytest.fixture
def state_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state directory of the test's own, where OpenLiteSpeed's workers (nobody) may
    pass (pytest's tmp_path is private to root)."""
    need(os.geteuid() == 0, "root (network namespaces)")
    d = Path(tempfile.mkdtemp(prefix="clarke-impl-", dir="/var/tmp"))
    d.chmod(0o755)
    monkeypatch.setenv("CLARKE_STATE_DIR", str(d / "testbeds"))
    try:
        yield d
    finally:
        lifecycle.down_all()
        shutil.rmtree(d, ignore_errors=True)


def _clarke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clarke", *args],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip


def test_a_campaign_on_two_servers(state_dir: Path) -> None:
    campaign = state_dir / "impl.yaml"
    campaign.write_text(yaml.safe_dump(CAMPAIGN))
    results = state_dir / "results"
    ols = find_install() is not None
    p = _clarke("run", str(campaign), "--results", str(results), "--link-check", "quick",
                "--campaign-id", "impl-t")  # fmt: skip
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    top = results / "impl-t"
    index = json.loads((top / "implementations.json").read_text())
    combos = {(c["link"], c["server"]): c for c in index["combinations"]}
    assert list(combos) == [("satlink", "origin"), ("satlink", "openlitespeed")]
    if not ols:
        # nothing dropped: said in the index, in the output and in the table
        c = combos[("satlink", "openlitespeed")]
        assert (c["state"], c["results"]) == ("not installed", None), c
        assert "ci/openlitespeed-from-source" in c["reason"], c
        assert "satlink + openlitespeed: not installed" in p.stdout, p.stdout
    for (_, server), c in combos.items():
        if server == "openlitespeed" and not ols:
            continue
        assert (c["state"], c["runs"], c["runs_ok"]) == ("complete", 12, 12), c
        records = list(Journal.in_dir(top / c["results"]).records())
        assert len(records) == 12 and all(r.status is Status.ok for r in records), [
            (r.run_id, r.reason) for r in records
        ]
        for r in records:
            assert r.implementations["server"] == server, r.implementations
            conns = r.details.server_connections
            want = "newreno" if (r.cell[HTTP], r.cell[CC]) == ("3", "reno") else r.cell[CC]
            assert conns and all(k.cc == want for k in conns), conns
            if server == "openlitespeed":
                # measured, not configured: TCP from the kernel, QUIC from lsquic's log
                tag = {"1.1": "h1", "2": "h2", "3": "h3"}[r.cell[HTTP]]
                assert {k.cc_source for k in conns} == {MEASURED_BY[tag]}, conns
                assert r.versions.get("openlitespeed", "").startswith("1."), r.versions
                assert r.metrics.get("wire_bytes", 0) > r.metrics["app_bytes"], r.metrics

    # a resume of the whole runs nothing again: every combination that could run is done
    again = _clarke("run", str(campaign), "--resume", str(top))
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert "satlink + origin: complete in impl-t-satlink-origin, not run again" in again.stdout
    assert json.loads((top / "implementations.json").read_text()) == index

    t = _clarke("report", "--by", "implementation", str(top))
    assert t.returncode == 0, t.stdout + t.stderr
    table = (top / "implementations.md").read_text()
    assert "| cell | metric | satlink + origin |" in table, table
    # every cell has a row per metric; the baseline's ratio to itself is 1
    for metric in ("PLT", "FCP", "LCP"):
        assert table.count(f" | {metric} | ") == 6, table
    assert " x1.00 [1.00, 1.00] |" in table, table
    if ols:
        assert "| cell | metric | satlink + origin | satlink + openlitespeed |" in table
    else:
        assert "satlink + openlitespeed: not installed (" in table, table
        assert install_problem() in table, table
