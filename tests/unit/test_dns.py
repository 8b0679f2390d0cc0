"""The resolvers of clarke.dns on loopback, as processes: the authoritative one answers
its zone's names and only those, the cache forwards a name once per TTL, every query is
logged where it was answered, and a bad zone exits 2 naming the field."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from conftest import free_port

LOOPBACK = "127.0.0.1"


def _start(kind: str, port: int, log: Path, *args: str) -> subprocess.Popen[str]:
    """`python -m clarke.dns KIND ARGS` on loopback at `port`, logging to `log`, ready."""
    listen = ["--listen", LOOPBACK, "--port", str(port), "--log", str(log)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "clarke.dns", kind, *args, *listen],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("ready "):
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"{kind} did not start: {err}")
    return proc


def _upstream(port: int) -> tuple[str, ...]:
    return ("--upstream", LOOPBACK, "--upstream-port", str(port))


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    _, err = proc.communicate(timeout=10)  # closes the pipes too
    assert proc.returncode == 0, err


@pytest.fixture
def authoritative(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    zone = tmp_path / "zone.json"
    zone.write_text(json.dumps({"ttl": 60, "names": {"www.Example.org.": "198.18.2.10"}}))
    port, log = free_port(), tmp_path / "authoritative.jsonl"
    proc = _start("authoritative", port, log, "--zone", str(zone))
    try:
        yield port, log
    finally:
        _stop(proc)


def _ask(name: str, port: int, rdtype: str = "A", tcp: bool = False) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    ask = dns.query.tcp if tcp else dns.query.udp
    return ask(query, LOOPBACK, port=port, timeout=5)


def _log(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_zone_and_only_the_zone(authoritative: tuple[int, Path]) -> None:
    port, log = authoritative
    a = _ask("WWW.example.org", port)
    assert a.rcode() == dns.rcode.NOERROR
    assert [(rr.ttl, [r.to_text() for r in rr]) for rr in a.answer] == [(60, ["198.18.2.10"])]
    assert _ask("www.example.org", port, tcp=True).answer[0][0].to_text() == "198.18.2.10"
    other = _ask("other.example.org", port)
    assert other.rcode() == dns.rcode.NXDOMAIN
    none = _ask("www.example.org", port, "AAAA")  # no IPv6 in a testbed: empty, at once
    assert none.rcode() == dns.rcode.NOERROR and not none.answer
    # Negative answers say for how long they hold (RFC 2308): an SOA whose TTL and
    # MINIMUM are the zone's TTL.
    for negative in (other, none):
        [soa] = negative.authority
        assert soa.rdtype == dns.rdatatype.SOA and soa.name.to_text() == "example.org."
        assert soa.ttl == 60 and soa[0].minimum == 60
    entries = _log(log)
    assert [(e["name"], e["type"], e["rcode"]) for e in entries] == [
        ("www.example.org", "A", "NOERROR"),
        ("www.example.org", "A", "NOERROR"),
        ("other.example.org", "A", "NXDOMAIN"),
        ("www.example.org", "AAAA", "NOERROR"),
    ]
    assert entries[0]["answer"] == ["198.18.2.10"] and entries[0]["client"] == LOOPBACK


def test_the_cache_forwards_a_name_once(authoritative: tuple[int, Path], tmp_path: Path) -> None:
    upstream_port, upstream_log = authoritative
    port, log = free_port(), tmp_path / "cache.jsonl"
    proc = _start("cache", port, log, *_upstream(upstream_port), "--source", LOOPBACK)
    try:
        for _ in range(3):
            assert _ask("www.example.org", port).answer[0][0].to_text() == "198.18.2.10"
        for _ in range(2):  # negative answers are kept for the SOA's negative TTL
            assert _ask("gone.example.org", port).rcode() == dns.rcode.NXDOMAIN
            empty = _ask("www.example.org", port, "HTTPS")
            assert empty.rcode() == dns.rcode.NOERROR and not empty.answer
    finally:
        _stop(proc)
    entries = _log(log)
    assert [e["hit"] for e in entries] == [False, True, True, False, False, True, True]
    # Its own time per query; a forwarded one's includes the upstream's answer, timed.
    assert all(e["at"] <= e["answered_at"] for e in entries)
    assert [("upstream_ms" in e) for e in entries] == [not e["hit"] for e in entries]
    assert all(
        0 < e["upstream_ms"] <= (e["answered_at"] - e["at"]) * 1000 for e in entries if not e["hit"]
    )
    forwarded = [(e["name"], e["type"]) for e in _log(upstream_log)]
    assert forwarded == [
        ("www.example.org", "A"),
        ("gone.example.org", "A"),
        ("www.example.org", "HTTPS"),
    ]


def test_the_stub_forwards_the_zones_names_only(
    authoritative: tuple[int, Path], tmp_path: Path
) -> None:
    """The client's stub: the site's names go upstream, every time (no cache); any other
    name is answered NXDOMAIN where it was asked, and never reaches the upstream."""
    upstream_port, upstream_log = authoritative
    zone = tmp_path / "site-zone.json"
    zone.write_text(json.dumps({"names": {"www.example.org": "198.18.2.10"}}))
    port, log = free_port(), tmp_path / "stub.jsonl"
    proc = _start(
        "stub", port, log, "--zone", str(zone), *_upstream(upstream_port), "--source", LOOPBACK
    )
    try:
        for _ in range(2):
            assert _ask("www.example.org", port).answer[0][0].to_text() == "198.18.2.10"
        assert _ask("firefox.settings.services.mozilla.com", port).rcode() == dns.rcode.NXDOMAIN
        assert _ask("www.example.org", port, "HTTPS").rcode() == dns.rcode.NOERROR
    finally:
        _stop(proc)
    entries = _log(log)
    assert [(e["name"], e["forwarded"]) for e in entries] == [
        ("www.example.org", True),
        ("www.example.org", True),
        ("firefox.settings.services.mozilla.com", False),
        ("www.example.org", True),
    ]
    assert [("upstream_ms" in e) for e in entries] == [e["forwarded"] for e in entries]
    assert all(e["at"] <= e["answered_at"] for e in entries)
    assert [(e["name"], e["type"]) for e in _log(upstream_log)] == [
        ("www.example.org", "A"),
        ("www.example.org", "A"),
        ("www.example.org", "HTTPS"),
    ]


def test_a_silent_upstream_is_a_server_failure(tmp_path: Path) -> None:
    port = free_port()
    proc = _start("cache", port, tmp_path / "c", *_upstream(free_port()))
    try:
        # Nothing listens upstream: loopback answers with ICMP port unreachable at once.
        assert _ask("www.example.org", port).rcode() == dns.rcode.SERVFAIL
    finally:
        _stop(proc)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            {"www.example.org": "192.0.2.1"},
            "www.example.org: 192.0.2.1 is outside the testbed range",
        ),
        ({"www.example.org": "not-an-address"}, "is not an IPv4 address"),
        ({"a..b": "198.18.2.10"}, "'a..b': not a host name"),
    ],
)
def test_a_bad_zone_exits_2_naming_it(tmp_path: Path, names: dict, message: str) -> None:  # type: ignore[type-arg]
    zone = tmp_path / "zone.json"
    zone.write_text(json.dumps({"names": names}))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "clarke.dns",
            "authoritative",
            "--zone",
            str(zone),
            "--listen",
            LOOPBACK,
            "--port",
            str(free_port()),
            "--log",
            str(tmp_path / "l"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert str(zone) in done.stderr and message in done.stderr
    assert "Traceback" not in done.stderr


def test_ask_looks_names_up_at_one_resolver(authoritative: tuple[int, Path]) -> None:
    """`ask` (what warms a terminal's cache before a site's load): each name's A and
    HTTPS records at the resolver given; a name without an A record exits 1."""
    port, log = authoritative
    ask = [sys.executable, "-m", "clarke.dns", "ask", "--server", LOOPBACK, "--port", str(port)]
    both = ["--type", "A", "--type", "HTTPS"]
    found = subprocess.run(
        [*ask, *both, "www.example.org"], capture_output=True, text=True, check=False, timeout=30
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines() == ["www.example.org A 198.18.2.10", "www.example.org HTTPS"]
    assert [(q["name"], q["type"]) for q in _log(log)] == [
        ("www.example.org", "A"),
        ("www.example.org", "HTTPS"),
    ]
    unknown = subprocess.run(
        [*ask, "nowhere.test"], capture_output=True, text=True, check=False, timeout=30
    )
    assert unknown.returncode == 1 and unknown.stdout.strip() == "nowhere.test A"


def test_a_restarted_resolver_is_ready_when_it_says_so_not_when_the_last_one_did(
    tmp_path: Path,
) -> None:
    """A testbed's resolvers append to one output log per role; a stopped resolver's
    `ready` line must not make its successor count as listening (a browser then asked a
    stub that was not bound yet and got dnsNotFound)."""
    from clarke.agent.names_slot import said_ready

    out = tmp_path / "dns-client.log"
    out.write_text("# ip netns exec ... stub\nready 127.0.0.1:53\n")
    before = out.stat().st_size
    with out.open("a") as f:
        f.write("# ip netns exec ... stub\n")
    assert not said_ready(out, before)
    with out.open("a") as f:
        f.write("ready 127.0.0.1:53\n")
    assert said_ready(out, before)
    assert not said_ready(tmp_path / "none.log", 0)
