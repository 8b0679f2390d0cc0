"""The PEP's listeners on a real netns testbed, tried as a hostile local user would
(issue 37, item 2): splittcp listened on 0.0.0.0:7010, the management address included,
without the agent token, and one connection from any local user made it relay to itself
until its file descriptors ran out. Now:

- From the host, `nobody` finds no PEP port on any station's management address, in
  either mode, and nothing is relayed.
- Inside a station's namespace, `nobody` reaches the transparent listener on loopback,
  and it relays nothing: it takes only the clients' side of the link as sources and
  the server's LAN as destinations (never the station itself); connections to the
  station's own addresses are not intercepted at all.
- The accelerated gateway's hop listener closes a connection from anywhere but the
  terminal's link address, and one that does not prove the testbed's key, which
  `nobody` cannot read; no stream is opened.
- A flood of connections from the client's LAN is bounded (the PEP keeps at most its
  maximum open and closes the rest at once), and the PEP serves the next load.

One lan testbed, two loads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from clarke.agent.client import AgentClient
from clarke.pep import HOP_KEY_FILE
from clarke.pep.splittcp import HOP_PORT, PEP_PORT
from clarke.place.plan import NetnsPlan
from clarke.results.record import Status
from clarke.run.session.session import Session
from clarke.run.session.settings import PageLoad
from clarke.testbed.substrate import NetnsSubstrate
from conftest import need
from testbeds import lan_session

pytestmark = [pytest.mark.root, pytest.mark.browser, pytest.mark.slow]
PAGE = "triangular-100k"
CC = "cubic"
NOBODY = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", "--reset-env"]
MAX_CONNECTIONS = 256  # splittcp's --max-connections default

# What `nobody` tries, with the standard library only (the system's python3).
AS_NOBODY = r"""
import json, socket, sys, time
cfg = json.loads(sys.argv[1])
out = []
if cfg["what"] == "connect":
    for host, port in cfg["targets"]:
        r = {"target": f"{host}:{port}"}
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect((host, port))
            r["connected"] = True
            try:
                s.sendall(cfg["send"].encode("latin-1"))
                got = s.recv(4096)
                r["read"] = got.decode("latin-1")
                if cfg.get("forge_hello") and got.startswith("CLKC".encode()):
                    s.sendall(b"CLKH\x01" + b"\x00" * 8 + b"\x11" * 32)
                    r["after_hello"] = s.recv(4096).decode("latin-1")
            except OSError as e:
                r["error"] = f"{type(e).__name__}: {e}"
        except OSError as e:
            r["connected"] = False
            r["error"] = f"{type(e).__name__}: {e}"
        finally:
            s.close()
        out.append(r)
elif cfg["what"] == "flood":
    socks, refused = [], 0
    for _ in range(cfg["n"]):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect((cfg["host"], cfg["port"]))
            socks.append(s)
        except OSError:
            refused += 1
    time.sleep(cfg["hold_s"])
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    out.append({"connected": len(socks), "refused": refused, "closed_by_peer": closed})
    for s in socks:
        s.close()
elif cfg["what"] == "read":
    try:
        open(cfg["path"], "rb").read()
        out.append({"read": True})
    except OSError as e:
        out.append({"read": False, "error": type(e).__name__})
print(json.dumps(out))
"""


def as_nobody(ns: str | None, cfg: dict[str, Any], timeout: float = 120) -> list[dict[str, Any]]:
    """Run AS_NOBODY as `nobody` in namespace `ns` (None: the host's)."""
    argv = [*NOBODY, "/usr/bin/python3", "-I", "-c", AS_NOBODY, json.dumps(cfg)]
    if ns is not None:
        argv = ["ip", "netns", "exec", ns, *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd="/")
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    need(os.geteuid() == 0, "root (network namespaces)")
    need(shutil.which("setpriv") is not None, "setpriv (util-linux), to act as nobody")
    with lan_session(NetnsSubstrate(), [PAGE], CC) as s:
        yield s


def _plan(session: Session) -> NetnsPlan:
    assert isinstance(session.plan, NetnsPlan)
    return session.plan


def _agent(session: Session, role: str) -> AgentClient:
    return AgentClient(role, _plan(session).agent_url(role), session.substrate.agent_token)


def _stats(session: Session, role: str) -> dict[str, Any]:
    return _agent(session, role).pep_stats()


def _reset(session: Session) -> None:
    for role in ("terminal", "gateway"):
        _agent(session, role).pep_reset_stats()


def _fresh(session: Session, preset: str) -> NetnsPlan:
    """The testbed with `preset` in force at both stations, their counters at zero."""
    session.ensure_pep(preset, CC)
    _reset(session)
    return _plan(session)


@pytest.mark.parametrize("preset", ["splittcp", "accelerated"])
def test_nobody_on_the_host_finds_no_pep_port_and_nothing_is_relayed(
    session: Session, preset: str
) -> None:
    plan = _fresh(session, preset)
    targets = [
        (plan.mgmt.address(role), port)
        for role in ("terminal", "gateway")
        for port in (PEP_PORT, HOP_PORT)
    ]
    tried = as_nobody(
        None, {"what": "connect", "targets": targets, "send": "GET / HTTP/1.0\r\n\r\n"}
    )
    assert [r["connected"] for r in tried] == [False] * len(targets), tried
    time.sleep(1)  # a relay to itself would be counting by now
    for role in ("terminal", "gateway"):
        stats = _stats(session, role)
        assert (stats["accepted"], stats["relayed"]) == (0, 0), (role, stats)


def test_nobody_in_a_station_gets_nothing_relayed_by_the_transparent_listener(
    session: Session,
) -> None:
    plan = _fresh(session, "splittcp")
    own = plan.gw_lan.address("gateway")
    for role, targets in (
        ("terminal", [("127.0.0.1", PEP_PORT)]),
        ("gateway", [("127.0.0.1", PEP_PORT), (own, PEP_PORT)]),
    ):
        tried = as_nobody(plan.ns(role), {"what": "connect", "targets": targets, "send": "hello"})
        # On loopback the listener takes the connection and closes it unrelayed; the
        # station's own address is not intercepted, and nothing else listens there.
        assert tried[0]["connected"] and tried[0].get("read", "") == "", tried
        for r in tried[1:]:
            assert not r["connected"], r
        stats = _stats(session, role)
        assert (stats["accepted"], stats["relayed"], stats["bytes_to_server"]) == (0, 0, 0)
        # Refused as from outside the clients' side (loopback); its destination, the
        # listener itself, would have been refused next.
        assert stats["refused"] == stats["refusals"]["source"] == 1, stats
        assert stats["open_connections"] == 0


def test_the_hop_listener_takes_only_the_terminal_with_the_testbeds_key(
    session: Session,
) -> None:
    plan = _fresh(session, "accelerated")
    hop = (plan.sat.address("gateway"), HOP_PORT)
    # From the gateway itself: not the terminal's address. Closed without a word.
    tried = as_nobody(plan.ns("gateway"), {"what": "connect", "targets": [hop], "send": ""})
    assert tried[0].get("read", "") == "", tried
    # From the terminal's address: the challenge, then a forged hello is refused.
    tried = as_nobody(
        plan.ns("terminal"),
        {"what": "connect", "targets": [hop], "send": "", "forge_hello": True},
    )
    assert tried[0]["read"].startswith("CLKC") and tried[0].get("after_hello", "") == "", tried
    gw = _stats(session, "gateway")
    assert gw["refusals"]["source"] == 1 and gw["refusals"]["auth"] == 1, gw
    assert (gw["accepted"], gw["hops_accepted"], gw["relayed"]) == (0, 0, 0), gw
    # And the key itself is the stations' only: `nobody` cannot read it.
    run_dir = session.substrate.run_dir  # type: ignore[attr-defined]
    for role in ("terminal", "gateway"):
        key = run_dir / role / HOP_KEY_FILE
        assert key.stat().st_mode & 0o077 == 0
        assert as_nobody(None, {"what": "read", "path": str(key)}) == [
            {"read": False, "error": "PermissionError"}
        ]


@pytest.mark.parametrize("preset", ["splittcp", "accelerated"])
def test_a_flood_is_bounded_and_the_pep_serves_the_next_load(session: Session, preset: str) -> None:
    """`nobody` in the client's LAN opens more connections towards the server than the
    PEP may hold: it relays at most its maximum and closes the rest at once."""
    plan = _fresh(session, preset)
    n = MAX_CONNECTIONS + 100
    flood = as_nobody(
        plan.ns("client"),
        {"what": "flood", "host": plan.addresses["server"], "port": 443, "n": n, "hold_s": 3},
    )[0]
    terminal = _stats(session, "terminal")
    summary = {k: v for k, v in terminal.items() if k != "connections"}
    # The bound is on connections held at once: one that failed during the flood (a hop
    # not opened in time on a loaded machine) frees its place for another.
    freed = terminal["failed"]
    assert terminal["accepted"] + terminal["refusals"]["limit"] == n, (flood, summary)
    assert terminal["accepted"] - freed <= MAX_CONNECTIONS, (flood, summary)
    assert flood["closed_by_peer"] >= n - MAX_CONNECTIONS - freed, (flood, summary)
    # Once they are gone, the PEP serves a page as before.
    for _ in range(100):
        if _stats(session, "terminal")["open_connections"] == 0:
            break
        time.sleep(0.1)
    result, details = session.load_page(PageLoad(PAGE, "2", CC, 6, pep=preset))
    assert result.status is Status.ok, result.reason
    stations = details.pep.stations if details.pep else None
    assert stations and (stations["terminal"].accepted or 0) >= 1
