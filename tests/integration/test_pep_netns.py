"""Performance-enhancing proxies in a real testbed (docs/peps.md): splittcp at terminal
and gateway splits a page's TCP connections, and the load proves it (the server sees the
gateway, the proxies' per-hop counts match); QUIC passes it untouched; a PEP whose TCP
was not split fails the load with the reason; PEPsal where it is installed. One lan
testbed, five short loads."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from clarke import registry
from clarke.errors import EnvironmentProblem
from clarke.pep import tproxy
from clarke.place import Place
from clarke.results.record import Status
from clarke.run.session.session import Session
from clarke.run.session.settings import PageLoad
from clarke.testbed.substrate import NetnsSubstrate
from conftest import need

pytestmark = [pytest.mark.root, pytest.mark.browser, pytest.mark.slow]
PAGE = "triangular-100k"
# A TLS 1.3 alert record: 5 bytes of header, 2 of alert, 1 of content type, 16 of AEAD tag.
TLS13_CLOSE_NOTIFY_BYTES = 24
CC = "cubic"


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    need(os.geteuid() == 0, "root (network namespaces)")
    need(registry.names("pep") != (), "the pep registry")
    s = Session(NetnsSubstrate(), [PAGE])
    s.start("lan")
    try:
        s.ensure_cc(CC)
        yield s
    finally:
        s.close()


def _load(session: Session, pep: str, http: str) -> tuple[Status, str, dict]:  # type: ignore[type-arg]
    session.ensure_pep(pep, CC)
    result, details = session.load_page(PageLoad(PAGE, http, CC, 6, pep=pep))
    return result.status, result.reason, details


def test_splittcp_splits_h2_the_server_sees_the_gateway(session: Session) -> None:
    status, reason, details = _load(session, "splittcp", "2")
    assert status is Status.ok, reason
    assert session.plan is not None
    client, gateway = session.plan.addresses["client"], session.plan.addresses["gateway"]
    conns = details["server_connections"]
    assert conns and {c["peer"].rsplit(":", 1)[0] for c in conns} == {gateway}
    terminal, gw = details["pep"]["stations"]["terminal"], details["pep"]["stations"]["gateway"]
    assert terminal["pep"] == gw["pep"] == "splittcp"
    # Per hop: the terminal took the client's connections and relayed each across the
    # link; the gateway took exactly those and connected to the server.
    assert terminal["accepted"] == terminal["relayed"] == gw["accepted"] == gw["relayed"]
    assert terminal["accepted"] >= len(conns)
    # The kernel's own count of what the interception handed the proxies agrees.
    assert terminal["intercepted_syns"] == gw["intercepted_syns"] == terminal["accepted"]
    assert {c["accepted_from"].rsplit(":", 1)[0] for c in terminal["connections"]} == {client}
    assert {c["accepted_from"] for c in gw["connections"]} == {
        c["relayed_from"] for c in terminal["connections"]
    }
    assert {c["hop_cc"] for c in terminal["connections"] + gw["connections"]} == {CC}
    # The page's bytes crossed both proxies. The server answers the browser's close with a
    # TLS close_notify, which the gateway relays but the terminal may find the browser
    # gone for (it was 24 bytes short once): at most one such record per connection.
    assert gw["bytes_to_client"] >= terminal["bytes_to_client"] > 100_000
    short = gw["bytes_to_client"] - terminal["bytes_to_client"]
    assert short <= TLS13_CLOSE_NOTIFY_BYTES * terminal["accepted"], short
    assert details["metrics"]["pep_terminal_accepted"] == terminal["accepted"]


def test_splittcp_leaves_quic_untouched(session: Session) -> None:
    status, reason, details = _load(session, "splittcp", "3")
    assert status is Status.ok, reason
    assert session.plan is not None
    client = session.plan.addresses["client"]
    assert {c["peer"].rsplit(":", 1)[0] for c in details["server_connections"]} == {client}
    for station in details["pep"]["stations"].values():
        assert station["pep"] == "splittcp" and station["accepted"] == 0


def test_a_pep_that_did_not_split_fails_the_load(session: Session) -> None:
    """splittcp runs, but the terminal's interception is gone: TCP crosses unsplit, and
    the load says so rather than counting as a PEP load."""
    session.ensure_pep("splittcp", CC)
    assert session.plan is not None
    terminal = Place(
        "netns", "terminal", session.plan, session.substrate.pages_dir, session.substrate.pages_dir,
        session.substrate.pages_dir, ns=session.plan.ns("terminal"),  # type: ignore[attr-defined]
    )  # fmt: skip
    tproxy.remove(terminal)
    try:
        result, details = session.load_page(PageLoad(PAGE, "2", CC, 6, pep="splittcp"))
    finally:
        # Back to a clean state for the next test: none, then splittcp again afresh.
        session.ensure_pep("none", CC)
    assert result.status is Status.failed
    assert "TCP was not split" in result.reason, result.reason


def test_without_a_pep_the_server_sees_the_client(session: Session) -> None:
    status, reason, details = _load(session, "none", "2")
    assert status is Status.ok, reason
    assert session.plan is not None
    client = session.plan.addresses["client"]
    assert {c["peer"].rsplit(":", 1)[0] for c in details["server_connections"]} == {client}
    assert details["pep"]["stations"]["terminal"] == {"pep": "none"}


def test_pepsal_splits_h2_where_installed(session: Session) -> None:
    # pytest.skip, not conftest.need(): CI cannot install PEPsal (it is not in Debian),
    # so its absence skips there too, with the reason and how to get it.
    try:
        registry.get("pep", "pepsal").check_environment()
    except EnvironmentProblem as e:
        pytest.skip(f"{e}; skipped, also in CI")
    status, reason, details = _load(session, "pepsal", "2")
    assert status is Status.ok, reason
    terminal = details["pep"]["stations"]["terminal"]
    assert terminal["pep"] == "pepsal" and terminal["accepted"] >= 1
