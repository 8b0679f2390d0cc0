"""Context isolation checked for real, on loopback (no testbed, no root): a real browser
in a running process loads a study page from a real origin over TLS, and the load's
isolation verdict (run/session/isolation.py, what a session records for every load)
comes from origin's own records. A new context per load passes; a context used again
on purpose, as a broken isolation would, fails the load with the reason."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from clarke import tls
from clarke.browser import contexts, prestart, selenium_engine
from clarke.browser.load import BrowserSetup, ExpectedObject, LoadRequest, LoadResult
from clarke.contract import ServerStats
from clarke.pages.build import build
from clarke.pages.models import Registry, Units
from clarke.results.record import Status
from clarke.run.session.isolation import isolation_verdict
from clarke.server.origin import origin_binary
from clarke.vocab import Browser, Isolation
from conftest import need

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PAGE = "triangular-100k"
HOST = "localhost"  # Firefox resolves it to loopback without a hosts file


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    binary = origin_binary()
    need(binary is not None, "origin (ci/build.sh builds it)")
    assert binary is not None
    need(shutil.which("firefox-esr") is not None or shutil.which("firefox") is not None, "Firefox")
    work = tmp_path_factory.mktemp("origin")
    manifest = json.loads(
        build([Registry.default().page_by_name(PAGE)], work / "pages", Units.si).read_text()
    )
    pki = tls.issue_testbed_pki(work / "pki", hosts=[HOST])
    proc = subprocess.Popen(
        [
            str(binary), "--root", str(work / "pages"), "--listen", "127.0.0.1:0",
            "--control", "127.0.0.1:0", "--cert", str(pki.cert), "--key", str(pki.key),
            "--tcp-cc", "cubic", "--quic-cc", "cubic",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        listening = json.loads(proc.stdout.readline())["listening"]
        port = int(listening["tls_tcp"].rsplit(":", 1)[1])
        control = httpx.Client(base_url=f"http://{listening['control']}", trust_env=False)
        setup = BrowserSetup(
            ca_cert=pki.ca_cert, server_name=HOST, server_port=port, server_address="127.0.0.1"
        )
        yield {"setup": setup, "control": control, "page": manifest["pages"][0], "port": port}
        control.close()
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        contexts.RESIDENT.discard()
        prestart.SPARES.discard()


def _request(o: dict[str, Any], http: str, browser: Browser) -> LoadRequest:
    page = o["page"]
    req = LoadRequest(
        url=f"https://{HOST}:{o['port']}/{page['path']}",
        http=http,
        browser=browser,
        connections=6,
        isolation=Isolation.context,
        expected_objects=[
            ExpectedObject(path=x["path"], bytes=x["bytes"]) for x in page["objects"]
        ],
        lcp_candidates=page["lcp_candidates"],
    )
    return req.model_copy(update={"next_load": req.settings()})


def _loads(o: dict[str, Any], req: LoadRequest, n: int) -> list[tuple[LoadResult, dict[str, Any]]]:
    """`n` loads in context isolation, each verified as a session verifies it: origin's
    records of the load's own window (reset before it), the browser's entries."""
    out = []
    for i in range(n):
        o["control"].post("/stats/reset").raise_for_status()
        last = req.model_copy(update={"next_load": None}) if i == n - 1 else req
        result = selenium_engine.load(last, o["setup"])
        stats = ServerStats.model_validate(o["control"].get("/stats").json())
        verdict = isolation_verdict(stats, result.raw, req.http, Isolation.context)
        out.append((result, verdict.written()))
    return out


@pytest.mark.parametrize(
    ("browser", "http"),
    [(Browser.firefox, "2"), (Browser.firefox, "3"), (Browser.chromium, "3")],
)
@pytest.mark.timing
def test_a_new_context_per_load_starts_from_nothing(
    origin: dict[str, Any], browser: Browser, http: str
) -> None:
    """Three loads in one browser, a new context each: every load verified, on new
    connections with full handshakes that offered no earlier session; the browser
    started once."""
    loads = _loads(origin, _request(origin, http, browser), 3)
    for i, (result, verdict) in enumerate(loads, start=1):
        assert result.status is Status.ok, result.reason
        assert verdict["failure"] == "", verdict
        assert result.context == i
        assert verdict["connections"] >= 1
        assert verdict["full_handshakes"] == verdict["connections"], verdict
        assert verdict["first_protocol"] == verdict["new_profile_protocol"]
    assert "browser_start" in loads[0][0].phases_ms
    assert all("browser_start" not in r.phases_ms for r, _ in loads[1:])
    # The last load quits its browser, started with WebDriver BiDi: without waiting out
    # the BiDi socket's reader, which sleeps 10 s at a time (prestart.quit_driver).
    assert loads[-1][0].phases_ms["browser_exit"] < 5_000, loads[-1][0].phases_ms


def test_a_context_used_again_fails_the_load_with_the_reason(
    origin: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Isolation broken on purpose: the second load runs in the first load's context
    (its next context is not made). The server saw the first load's connections serve
    the second: the load fails, saying so."""

    def reuse(browser: prestart.Started) -> None:
        browser.quiet_since = None  # the same context, its connections still open

    monkeypatch.setattr(selenium_engine, "_prepare_next_context", reuse)
    (first, ok), (second, broken) = _loads(origin, _request(origin, "2", Browser.firefox), 2)
    assert first.status is Status.ok and ok["failure"] == "", (first.reason, ok)
    assert second.status is Status.ok, "the browser saw nothing wrong"
    assert second.context == 2
    assert broken["failure"].startswith("isolation: "), broken
    assert "carried over from an earlier load" in broken["failure"] or (
        "earlier TLS session" in broken["failure"]
    ), broken


@pytest.mark.timing
def test_the_settle_wait_ends_once_the_largest_element_has_painted(
    origin: dict[str, Any],
) -> None:
    """With the page's largest elements known, collection waits for one of them to have
    its LCP entry, not for the whole margin (a browser never replaces that entry); a
    page whose largest elements are not known waits the margin out."""
    req = _request(origin, "2", Browser.firefox).model_copy(
        update={"settle_ms": 3_000, "next_load": None}
    )
    known = selenium_engine.load(req, origin["setup"])
    assert known.status is Status.ok, known.reason
    assert known.lcp_element in req.lcp_candidates
    assert known.phases_ms["settle_collect"] < 3_000, known.phases_ms
    unknown = selenium_engine.load(
        req.model_copy(update={"lcp_candidates": [], "settle_ms": 1_000}), origin["setup"]
    )
    assert unknown.status is Status.ok, unknown.reason
    assert unknown.phases_ms["settle_collect"] >= 1_000, unknown.phases_ms
