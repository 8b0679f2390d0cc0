"""A recorded site as a campaign dimension, for real: `clarke run` on a new lan netns
testbed replays two archives beside a generated page, Firefox over HTTP/2. The site's
cell stages its archive, the server serves it, its names are answered from the gateway
side (the second cell's through the terminal's cache, warm when the load begins), and
each record names the site
(its digests), the DNS queries that crossed the link for that load, and each origin's
lookup. An archive whose page asks for a URL it lacks gives a failed load naming the
URL. Nothing is left behind: no resolver, no namespace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clarke.campaign.dimensions import DNS_CACHE, SITE
from clarke.results.journal import Journal
from clarke.results.record import Status
from clarke.sites import archive
from clarke.testbed import lifecycle
from clarke.vocab import DnsCache
from conftest import need
from site_archive import HOSTS, write_three_origins

pytestmark = [pytest.mark.root, pytest.mark.browser, pytest.mark.slow]

MISSING = "https://img.cdn.test/missing.jpg"


def test_a_campaign_replays_sites_and_fails_a_load_that_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need(os.geteuid() == 0, "root (network namespaces)")
    need(shutil.which("geckodriver") is not None, "geckodriver (ci/setup.sh)")
    # A state directory of the test's own: the runner inherits it.
    monkeypatch.setenv("CLARKE_STATE_DIR", str(tmp_path / "testbeds"))
    write_three_origins(tmp_path / "sites" / "three-origins")
    write_three_origins(tmp_path / "sites" / "one-missing", "one-missing", extra_image=MISSING)
    campaign = tmp_path / "sites.yaml"
    campaign.write_text(
        yaml.safe_dump(
            {
                "name": "sites",
                "repetitions": 1,
                "retries": 0,
                "scenarios": [
                    {
                        "name": "pages-and-a-site",
                        "matrix": {
                            "profiles": ["lan"], "http": [2], "cc": ["bbr"],
                            "models": ["uniform"], "sizes": ["100k"],
                            "sites": ["none", "sites/three-origins"],
                        },
                    },
                    {
                        "name": "cached-and-missing",
                        "matrix": {
                            "profiles": ["lan"], "http": [2], "cc": ["bbr"],
                            "sites": ["sites/three-origins", "sites/one-missing"],
                            "dns_cache": ["terminal"],
                        },
                    },
                ],
            }
        )
    )  # fmt: skip
    results = tmp_path / "results"
    try:
        proc = subprocess.run(
            [
                sys.executable, "-m", "clarke", "run", str(campaign), "--results", str(results),
                "--link-check", "quick",
            ],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        left = lifecycle.known_ids()  # clarke run takes its testbed down itself
    finally:
        lifecycle.down_all()  # only this test's state directory
    out = proc.stdout[-4000:] + proc.stderr[-4000:]
    [d] = [p for p in results.iterdir() if p.is_dir()]
    records = {r.run_id: r for r in Journal.in_dir(d).records()}
    print(out)
    assert set(records) == {
        "lan-h2-bbr-uniform-100k-r1",
        "lan-h2-bbr-three-origins-r1",
        "lan-h2-bbr-three-origins-dnsterminal-r1",
        "lan-h2-bbr-one-missing-dnsterminal-r1",
    }, out
    page = records["lan-h2-bbr-uniform-100k-r1"]
    assert page.status is Status.ok, page.reason
    assert page.details.site is None and page.cell.site is None

    digest = archive.read(tmp_path / "sites" / "three-origins").digest
    plan = json.loads((d / "plan.json").read_text())
    assert plan["sites"]["sites/three-origins"]["digest"] == digest
    for run_id, cache in [
        ("lan-h2-bbr-three-origins-r1", DnsCache.none),
        ("lan-h2-bbr-three-origins-dnsterminal-r1", DnsCache.terminal),
    ]:
        r = records[run_id]
        details = r.details.written()  # as the journal has them
        assert r.status is Status.ok, (run_id, r.reason)
        assert (r.cell[SITE], r.cell[DNS_CACHE], r.page) == (
            "sites/three-origins", cache, "three-origins",
        )  # fmt: skip
        assert details["site"]["digest"] == digest
        assert details["site"]["dns_cache"] == cache.value
        # Every resource of every origin over HTTP/2, no miss.
        assert {u.split("/")[2] for u in details["protocols"]} == set(HOSTS)
        assert set(details["protocols"].values()) == {"h2"}
        assert details["replay"]["missed"] == 0 and details["replay"]["exact"] == 4
        assert r.metrics["site_missed"] == 0
        dns = details["dns"]
        print(f"{run_id}: {dns['gateway_queries']} queries crossed: {dns['gateway_names']}")
        print(f"{run_id}: origins {json.dumps(details['origins'])}")
        assert r.metrics["dns_queries_crossed"] == dns["gateway_queries"]
        # Every lookup the browser made, at the client's own resolver, with its times.
        asked = dns["client_resolver_queries"]
        assert set(HOSTS) <= {q["name"] for q in asked if q["type"] == "A"}, asked
        assert all(q["at"] <= q["answered_at"] for q in asked), asked
        assert all("upstream_ms" in q for q in asked if q["forwarded"]), asked
        assert r.metrics["origins"] == 3
        # Each origin as the server saw it: a new connection with a full handshake (a
        # fresh profile per load resumes nothing), accepted during the load (give or take
        # the browser's reduced timer precision: one clock, the host's).
        for host in HOSTS:
            seen = details["origins"][host]
            assert seen["server_connections"] >= 1 and set(seen["handshakes"]) == {"full"}, seen
            assert -20 <= seen["server_opened_ms"] <= r.metrics["plt_ms"], seen
        if cache is DnsCache.none:
            # Each of the site's names crossed the link for this load.
            assert {f"A {h}" for h in HOSTS} <= set(dns["gateway_names"]), dns
        else:
            # The terminal's cache held the names when the load began (warmed before it,
            # negative HTTPS answers too): no lookup crossed the link, each was a hit.
            assert dns["gateway_queries"] == 0, dns
            assert dns["terminal_hits"] >= len(HOSTS), dns
            assert len(dns["terminal_cache_queries"]) == dns["terminal_queries"], dns
    # The archive whose page asks for what it lacks: a failed load naming the URL.
    missed = records["lan-h2-bbr-one-missing-dnsterminal-r1"]
    assert missed.status is Status.failed
    assert MISSING in missed.reason and "the replay missed 1" in missed.reason, missed.reason
    assert missed.details.site is not None and missed.details.site.name == "one-missing"
    # Nothing left behind: the testbed is down, with the site's resolvers.
    assert left == [], left
    assert proc.returncode == 0, out  # a failed load is a result, not the command's failure
    assert "site" in proc.stdout
