"""Context isolation without a browser: which load may use the browser kept from the
previous one (browser/contexts.py), what a load's isolation verdict says from the
server's records and the browser's entries (run/session/isolation.py), and the
campaign and request fields that ask for it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from clarke.browser import contexts, prestart
from clarke.browser.load import BrowserSettings, LoadRequest, from_cache, judge
from clarke.campaign.model import Browser as BrowserBlock
from clarke.campaign.plan import plan_file
from clarke.contract import ServerStats
from clarke.errors import InputError
from clarke.results.details import IsolationCheck
from clarke.results.record import Status
from clarke.run.loop.options import RunOptions
from clarke.run.loop.preflight import preflight
from clarke.run.session.isolation import isolation_verdict
from clarke.vocab import Engine, Isolation

CONTEXT = BrowserSettings(http="2", isolation=Isolation.context)


class FakeDriver:
    def __init__(self) -> None:
        self.quit_calls = 0

    def quit(self) -> None:
        self.quit_calls += 1


def _browser(tmp_path: Path, contexts_served: int = 1) -> prestart.Started:
    profile = tmp_path / f"profile{contexts_served}"
    profile.mkdir()
    started = prestart.Started(FakeDriver(), profile, "template", "153.0")
    started.contexts = contexts_served
    return started


def test_the_next_load_takes_the_kept_browser_once_its_context_is_ready(tmp_path: Path) -> None:
    resident, gate, prepared = contexts.Resident(), threading.Event(), []

    def prepare(browser: prestart.Started) -> None:
        gate.wait(5)  # take() waits for the next context to be ready
        browser.context = contexts.Context("user-context", "window")
        prepared.append(browser)

    kept = _browser(tmp_path)
    resident.keep(kept, CONTEXT, prepare)
    threading.Timer(0.1, gate.set).start()
    browser, why = resident.take(CONTEXT, limit=50, new_browser=False)
    assert browser is kept and why == "" and prepared == [kept]
    assert browser.context == contexts.Context("user-context", "window")
    assert kept.driver.quit_calls == 0
    assert resident.take(CONTEXT, 50, False) == (None, "no browser kept for this load's settings")


@pytest.mark.parametrize(
    ("settings", "served", "new_browser", "why"),
    [
        (CONTEXT, 1, True, "the previous load failed"),
        (CONTEXT, 3, False, "served its 3 loads"),
    ],
)
def test_a_kept_browser_that_may_not_serve_the_load_is_quit_and_says_why(
    tmp_path: Path, settings: BrowserSettings, served: int, new_browser: bool, why: str
) -> None:
    resident = contexts.Resident()
    kept = _browser(tmp_path, served)
    resident.keep(kept, CONTEXT, lambda b: None)
    browser, reason = resident.take(settings, limit=3, new_browser=new_browser)
    assert browser is None and why in reason
    assert kept.driver.quit_calls == 1 and not kept.profile.exists()


def test_one_browser_kept_per_set_of_settings(tmp_path: Path) -> None:
    """Cells that alternate HTTP versions each find their browser; the longest-kept one
    makes room when the pool is full; a failed load quits them all."""
    h3 = BrowserSettings(http="3", isolation=Isolation.context)
    h1 = BrowserSettings(http="1.1", isolation=Isolation.context)
    resident = contexts.Resident(size=2)
    two, three = _browser(tmp_path, 1), _browser(tmp_path, 2)
    resident.keep(two, CONTEXT, lambda b: None)
    resident.keep(three, h3, lambda b: None)
    assert resident.has(CONTEXT) and resident.has(h3) and not resident.has(h1)
    assert resident.take(h3, 50, False) == (three, "")
    assert resident.take(h1, 50, False) == (
        None, "no browser kept for this load's settings (1 kept for other settings)"
    )  # fmt: skip
    assert two.driver.quit_calls == 0  # kept for its own settings meanwhile
    resident.keep(three, h3, lambda b: None)
    one = _browser(tmp_path, 3)
    resident.keep(one, h1, lambda b: None)  # the pool is full: the HTTP/2 one goes
    assert two.driver.quit_calls == 1 and not resident.has(CONTEXT)
    assert resident.has(h3) and resident.has(h1)
    assert resident.take(h1, 50, new_browser=True) == (None, "the previous load failed")
    assert three.driver.quit_calls == one.driver.quit_calls == 1
    assert not resident.has(h3) and not resident.has(h1)


def test_a_load_waits_for_every_kept_browser_to_have_its_next_context_ready(
    tmp_path: Path,
) -> None:
    """A load for other settings starts only once the browser kept for the previous
    load's settings is done opening its next context (that work would run beside the
    page otherwise); that browser stays kept for its own settings."""
    h3 = BrowserSettings(http="3", isolation=Isolation.context)
    resident, gate, prepared = contexts.Resident(), threading.Event(), []

    def prepare(browser: prestart.Started) -> None:
        gate.wait(5)
        prepared.append(browser)

    kept = _browser(tmp_path)
    resident.keep(kept, CONTEXT, prepare)
    threading.Timer(0.2, gate.set).start()
    assert resident.take(h3, 50, False) == (
        None, "no browser kept for this load's settings (1 kept for other settings)"
    )  # fmt: skip
    assert prepared == [kept] and resident.has(CONTEXT)
    assert kept.driver.quit_calls == 0


def test_a_next_context_that_could_not_be_opened_means_a_new_browser(tmp_path: Path) -> None:
    resident = contexts.Resident()
    kept = _browser(tmp_path)

    def prepare(browser: prestart.Started) -> None:
        raise RuntimeError("no such window")

    resident.keep(kept, CONTEXT, prepare)
    browser, reason = resident.take(CONTEXT, 50, False)
    assert browser is None and "RuntimeError: no such window" in reason
    assert kept.driver.quit_calls == 1


def _conn(**kw: Any) -> dict[str, Any]:
    handshake = {
        "kind": "full",
        "hello_read": True,
        "psk_offered": False,
        "ticket_offered": False,
        "early_data_offered": False,
        "early_data_accepted": False,
    }
    handshake |= kw.pop("handshake", {})
    return {
        "requests": 3,
        "tls": True,
        "opened_before_reset": False,
        "tls_handshake": handshake,
    } | kw


RAW = {"navigation": {"name": "https://x/p", "nextHopProtocol": "h2", "transferSize": 900}}


def verdict(stats: dict[str, Any], *asked: Any) -> IsolationCheck:
    """isolation_verdict of the server's /stats `stats`."""
    return isolation_verdict(ServerStats.model_validate(stats), *asked)


def test_new_connections_with_full_handshakes_pass_and_say_so() -> None:
    stats = {"connections": [_conn(), _conn(), _conn(requests=0, opened_before_reset=True)]}
    v = verdict(stats | {"lingering": [4]}, RAW, "2", Isolation.context)
    assert v.failure == ""
    assert (v.connections, v.full_handshakes, v.carried_over, v.lingering) == (
        2,
        2,
        0,
        1,
    )
    assert (v.first_protocol, v.new_profile_protocol) == ("h2", "h2")


@pytest.mark.parametrize(
    ("conn", "why"),
    [
        (_conn(opened_before_reset=True), "1 of 2 connections were carried over"),
        (_conn(handshake={"kind": "resumed", "psk_offered": True}), "resumed an earlier TLS"),
        (_conn(handshake={"psk_offered": True}), "offered an earlier TLS session"),
        (_conn(handshake={"ticket_offered": True}), "offered an earlier TLS session"),
        (_conn(handshake={"early_data_offered": True}), "tried early data (0-RTT)"),
    ],
)
def test_anything_carried_over_fails_the_load_in_either_isolation(
    conn: dict[str, Any], why: str
) -> None:
    for isolation in Isolation:
        v = verdict({"connections": [_conn(), conn]}, RAW, "2", isolation)
        assert why in v.failure, (isolation, v)


def test_a_session_of_the_loads_own_full_handshake_may_be_resumed_an_earlier_one_not() -> None:
    """As a new Chromium profile over HTTP/1.1: its later connections resume the session
    its first one's full handshake began; a session offered before any full handshake of
    the load (or at the same moment) is an earlier load's."""
    resumed = {"kind": "resumed", "psk_offered": True}
    own = [_conn(start_unix_ms=1000), _conn(start_unix_ms=1040, handshake=resumed)]
    for isolation in Isolation:
        v = verdict({"connections": own}, RAW, "1.1", isolation)
        assert v.failure == "" and (v.resumed, v.resumed_within_load) == (0, 1), v
    for start in (1000, 990):
        early = [_conn(start_unix_ms=1000), _conn(start_unix_ms=start, handshake=resumed)]
        v = verdict({"connections": early}, RAW, "1.1", Isolation.profile)
        assert "resumed an earlier TLS session on 1 of 2" in v.failure, v


def test_a_server_that_does_not_report_handshakes_fails_only_context_isolation() -> None:
    quiet = {"connections": [{"requests": 9, "tls": True, "opened_before_reset": False}]}
    assert verdict(quiet, RAW, "2", Isolation.profile).failure == ""
    failure = verdict(quiet, RAW, "2", Isolation.context).failure
    assert "does not say how 1 of 1 TLS handshakes went" in failure
    unread = {"connections": [_conn(handshake={"hello_read": False})]}
    assert "does not say" in verdict(unread, RAW, "2", Isolation.context).failure


def test_an_entry_from_the_cache_fails_the_load_with_its_name() -> None:
    raw = {
        "navigation": {
            "name": "https://x/p/",
            "nextHopProtocol": "h2",
            "transferSize": 900,
            "loadEventStart": 50,
        },
        "resources": [
            {"name": "https://x/p/o1.jpg", "nextHopProtocol": "h2", "transferSize": 0},
            {"name": "https://x/p/o2.jpg", "nextHopProtocol": "h2", "transferSize": 5000},
            {"name": "https://x/p/o3.jpg", "nextHopProtocol": "h2"},  # not reported: not judged
        ],
        "fcp": 10,
        "lcp": {"startTime": 20},
    }
    assert from_cache(raw) == ["https://x/p/o1.jpg"]
    status, reason, _, _ = judge(LoadRequest(url="https://x/p/", http="2"), raw)
    assert status is Status.failed
    assert reason.startswith("isolation: 1 of 4 entries came from the browser's cache")
    assert "p/o1.jpg" in reason
    assert verdict({"connections": [_conn()]}, raw, "2", Isolation.profile).from_cache == 1


def test_context_isolation_needs_selenium_and_a_bounded_browser() -> None:
    assert BrowserBlock(isolation=Isolation.context).loads_per_browser == 50
    with pytest.raises(ValueError, match="isolation context needs engine selenium"):
        BrowserBlock(isolation=Isolation.context, engine=Engine.browsertime)
    with pytest.raises(ValueError):
        BrowserBlock(isolation=Isolation.context, loads_per_browser=0)
    # The isolation is part of what a load asks of its browser: a browser started ahead
    # for one isolation is never taken by a load asking for the other.
    assert BrowserSettings(http="2") != CONTEXT


def test_a_campaign_in_context_isolation_on_a_server_that_cannot_show_it_is_refused(
    tmp_path: Path,
) -> None:
    """OpenLiteSpeed's records do not say how TLS handshakes went: no load could be
    shown to start from nothing, so the campaign is refused before anything runs."""
    f = tmp_path / "c.yaml"
    doc = {
        "name": "t",
        "matrix": {"profiles": ["lan"], "http": [2], "cc": ["bbr"], "models": ["uniform"]},
        "repetitions": 1,
        "browser": {"isolation": "context"},
    }
    f.write_text(yaml.safe_dump(doc | {"matrix": doc["matrix"] | {"sizes": ["100k"]}}))
    plan = plan_file(f)
    options = RunOptions(substrate="compose", server="openlitespeed")
    with pytest.raises(InputError, match=r"browser\.isolation: context needs a server whose"):
        preflight(plan, plan.runs, options)
