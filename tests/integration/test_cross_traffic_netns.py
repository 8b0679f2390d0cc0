"""Cross traffic for real (issue 17): a campaign on the netns testbed loads a page while
cross traffic between xserver and xclient shares the 10 Mb/s link: a bulk Cubic flow
forward, a BBR flow on the return link, UDP at 2 Mb/s each way, rrul, and a second
user fetching the same page again and again (web); each load is
verified as every load is, its record carries the traffic's achieved rates, and nothing
of the traffic or the testbed is left afterwards."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from clarke import profiles
from clarke.campaign.cross import CrossTraffic
from clarke.campaign.dimensions import CROSS_TRAFFIC
from clarke.place import netns, procs
from clarke.place.plan import parse_ns
from clarke.results.journal import Journal
from clarke.results.record import Status
from clarke.run.session.cross import CrossTrafficDriver
from clarke.testbed import lifecycle
from clarke.testbed.cross import NetnsCrossEndpoints
from clarke.testbed.state import Store
from conftest import ON_OWN_TESTBEDS

pytestmark = ON_OWN_TESTBEDS

PROFILE = "wired-10m-50ms"  # a rate limit a single flow fills within a second or two
LINK_MBPS = 10  # its rate each way


def test_cross_traffic_shares_the_link_with_verified_loads(tmp_path: Path) -> None:
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
                    "cross_traffic": [
                        "bulk-cubic",
                        {"name": "bulk-bbr", "direction": "return"},
                        {"name": "udp-cbr", "rate_mbps": 2, "direction": "both"},
                        "rrul",
                        "web",
                    ],
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
        records = {r.cell[CROSS_TRAFFIC].label: r for r in Journal.in_dir(d).records()}
        assert set(records) == {
            "bulk-cubic",
            "bulk-bbr-return",
            "udp-cbr-both-2mbps",
            "rrul",
            "web",
        }
        for r in records.values():
            assert r.status is Status.ok, (r.run_id, r.reason)
            assert r.metrics["app_bytes"] > 0  # the page, verified as every load is
        bulk = records["bulk-cubic"]
        assert bulk.run_id == f"{PROFILE}-h2-cubic-uniform-100k-xbulk-cubic-r1"
        crossing = bulk.details.cross_traffic
        assert crossing is not None
        assert (crossing.name, crossing.flows, crossing.direction) == ("bulk-cubic", 1, "forward")
        assert crossing.cc == ["cubic"]  # read from the sender's sockets
        # Started before the load: it had moved bytes and settled first.
        assert (crossing.confirmed_after_s or 0) <= (crossing.settled_after_s or 0)
        # Moved bytes during the load, at most what the link carries (the interface
        # counts Ethernet headers too: 1538 bytes on the wire per 1500-byte packet),
        # within the profile's rate tolerance: the window is one short load, and a
        # reading once came 2.5 % over (10.505 Mb/s).
        link_max = LINK_MBPS * 1538 / 1500 * (1 + profiles.read(PROFILE).tolerance.rate_pct / 100)
        assert 0 < bulk.metrics["cross_forward_mbps"] <= link_max, crossing
        assert "cross_return_mbps" not in bulk.metrics
        # The link counted the flow too: no overhead figure pretends it was the page's.
        assert bulk.metrics["link_bytes_forward"] > bulk.metrics["app_bytes"]
        assert "link_overhead" not in bulk.metrics
        bbr = records["bulk-bbr-return"]
        assert bbr.details.cross_traffic and bbr.details.cross_traffic.cc == ["bbr"]
        assert 0 < bbr.metrics["cross_return_mbps"] <= link_max
        udp = records["udp-cbr-both-2mbps"]
        for direction in ("forward", "return"):
            # a constant 2 Mb/s each way, which the 10 Mb/s link carries whole
            assert 1.5 < udp.metrics[f"cross_{direction}_mbps"] < 2.5, udp.details.cross_traffic
        rrul = records["rrul"]
        assert rrul.details.cross_traffic and rrul.details.cross_traffic.flows == 4
        assert rrul.metrics["cross_forward_mbps"] > 0 and rrul.metrics["cross_return_mbps"] > 0
        # the latency probe under load: at least the idle RTT of 50 ms
        assert rrul.metrics["cross_ping_p50_ms"] >= 50 * 0.95, rrul.details.cross_traffic
        web = records["web"]
        assert web.details.cross_traffic and web.details.cross_traffic.flows == 6
        assert web.details.cross_traffic.cc == ["cubic"]
        assert 0 < web.metrics["cross_forward_mbps"] <= link_max
        # The page's own server saw only the browser: web fetches from its own origin.
        peers = [str(c.peer) for c in web.details.server_connections]
        assert peers and not [p for p in peers if p.startswith("198.19.")], peers
    finally:
        lifecycle.down_all()
    tag = f"clarke:{(tmp_path / 'testbeds').resolve()}"
    left = [n for n in netns.namespaces() if parse_ns(n) and netns.owner(n) == tag]
    assert not left, left
    # The generators went with the testbed (they ran against this testbed's xserver).
    iperf = subprocess.run(["pgrep", "-a", "iperf3"], capture_output=True, text=True).stdout
    assert f" {crossing.server} " not in f"{iperf} ".replace("\n", " "), iperf


def test_down_stops_cross_traffic_a_dead_runner_left(tmp_path: Path) -> None:
    """The runner starts the generators and dies without stopping them: they are in the
    state file, and `down` stops them with the testbed."""
    store = Store()
    try:
        up = lifecycle.up(PROFILE, store=store)
        endpoints = NetnsCrossEndpoints(up.plan, store, Path(up.state.run_dir))
        driver = CrossTrafficDriver(endpoints)
        driver.ensure(CrossTraffic.model_validate({"name": "bulk-cubic"}), PROFILE)
        assert driver.running is not None
        started = driver.running.procs
        recorded = {p.pid for p in (store.read(up.plan.id) or up.state).processes}
        assert {p.pid for p in started} <= recorded
        assert all(procs.alive(p) for p in started)
        # no driver.stop(): the runner is gone
    finally:
        lifecycle.down_all(store)
    assert not any(procs.alive(p) for p in started)
    assert not [n for n in netns.namespaces() if n in up.plan.namespaces.values()]
