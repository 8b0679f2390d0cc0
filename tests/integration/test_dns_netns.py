"""DNS across a real geo link (issue 33): an authoritative resolver on the gateway side
answers from the client's namespace in one round trip of the link, and counts the
lookup; a cache in the terminal forwards a name once, so a repeat never crosses the
link. Judged with the geo profile's own RTT tolerance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clarke import profiles
from clarke.place.plan import NetnsPlan
from clarke.run.session.session import Session
from clarke.testbed.substrate import NetnsSubstrate
from conftest import need

pytestmark = [pytest.mark.root, pytest.mark.slow]
PROFILE = "geo"
NAME = "www.example.org"
ADDRESS = "198.18.2.10"

# Times one A query from inside a namespace, as the browser's resolver would ask it.
LOOKUP = """
import sys, time, dns.message, dns.query
server, name = sys.argv[1], sys.argv[2]
start = time.perf_counter()
reply = dns.query.udp(dns.message.make_query(name, "A"), server, timeout=10)
elapsed_ms = (time.perf_counter() - start) * 1000
print(elapsed_ms, reply.answer[0][0].to_text() if reply.answer else "")
"""


@pytest.fixture(scope="module")
def plan() -> Iterator[NetnsPlan]:
    need(os.geteuid() == 0, "root (network namespaces)")
    s = Session(NetnsSubstrate(), [])
    try:
        s.start(PROFILE)
        assert isinstance(s.plan, NetnsPlan)
        yield s.plan
    finally:
        s.close()


class Resolvers:
    """The resolver processes a test started, ended by PID at its end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, ns: str, args: list[str]) -> None:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "clarke.dns", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        if not proc.stdout.readline().startswith("ready "):
            _, err = proc.communicate(timeout=10)
            raise AssertionError(f"resolver in {ns} did not start: {err}")

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
            proc.communicate(timeout=10)


@pytest.fixture
def resolvers() -> Iterator[Resolvers]:
    r = Resolvers()
    try:
        yield r
    finally:
        r.stop()


def _lookup(plan: NetnsPlan, server: str) -> tuple[float, str]:
    done = subprocess.run(
        ["ip", "netns", "exec", plan.ns("client"), sys.executable, "-c", LOOKUP, server, NAME],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    elapsed, answer = done.stdout.split()
    return float(elapsed), answer


def _queries(log: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.timing
def test_lookups_cross_the_link_and_the_cache_saves_them(
    plan: NetnsPlan, resolvers: Resolvers, tmp_path: Path
) -> None:
    profile = profiles.read(PROFILE)
    tol = profile.tolerance
    rtt = profile.idle_rtt_ms
    floor = rtt * (1 - tol.rtt_pct / 100) - tol.rtt_ms
    zone = tmp_path / "zone.json"
    zone.write_text(json.dumps({"names": {NAME: ADDRESS}}))
    gateway = plan.gw_lan.address("gateway")
    terminal = plan.st_lan.address("terminal")
    gateway_log, terminal_log = tmp_path / "gateway.jsonl", tmp_path / "terminal.jsonl"
    resolvers.start(
        plan.ns("gateway"),
        ["authoritative", "--zone", str(zone), "--listen", gateway, "--log", str(gateway_log)],
    )
    resolvers.start(
        plan.ns("terminal"),
        ["cache", "--upstream", gateway, "--listen", terminal, "--log", str(terminal_log)],
    )

    # Straight to the gateway side: every lookup one round trip of the link.
    direct = [_lookup(plan, gateway) for _ in range(2)]
    assert [answer for _, answer in direct] == [ADDRESS, ADDRESS]
    assert min(ms for ms, _ in direct) >= floor, (direct, rtt)
    client = plan.st_lan.address("client")
    assert [(q["client"], q["name"]) for q in _queries(gateway_log)] == [(client, NAME)] * 2

    # Through the terminal's cache: the first crosses the link, the repeat does not.
    first, again = _lookup(plan, terminal), _lookup(plan, terminal)
    assert first[1] == again[1] == ADDRESS
    assert first[0] >= floor, (first, rtt)
    assert again[0] < rtt / 4, (again, rtt)
    print(
        f"lookups, ms: direct {[round(ms, 1) for ms, _ in direct]}, through the cache "
        f"{first[0]:.1f} then {again[0]:.1f}; link RTT {rtt:.1f}"
    )
    assert [q["hit"] for q in _queries(terminal_log)] == [False, True]
    assert len(_queries(gateway_log)) == 3  # the cache asked once
