"""Both engines load a study page in a real Firefox from a real HTTP server on loopback.
(The testbed tests cover TLS, HTTP/2 and HTTP/3 through origin and the emulated link;
these check the engines' metrics and verification on their own.)"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clarke.browser import (
    browsertime_engine,
    firefox,
    prestart,
    profile_template,
    selenium_engine,
)
from clarke.browser.load import BrowserSetup, ExpectedObject, LoadRequest, LoadResult
from clarke.pages.build import build
from clarke.pages.models import Registry, Units
from clarke.results.record import Status
from conftest import need

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PAGE = "triangular-1m"


class _Http11Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Http10Handler(_Http11Handler):
    protocol_version = "HTTP/1.0"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    need(shutil.which("firefox-esr") is not None or shutil.which("firefox") is not None, "Firefox")
    out = tmp_path_factory.mktemp("site")
    manifest = json.loads(build([Registry.default().page_by_name(PAGE)], out, Units.si).read_text())
    return out, manifest["pages"][0]


def _serve(root: Path, handler: type) -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def http11(site: tuple[Path, dict]) -> Iterator[int]:
    yield from _serve(site[0], _Http11Handler)


@pytest.fixture(scope="module")
def http10(site: tuple[Path, dict]) -> Iterator[int]:
    yield from _serve(site[0], _Http10Handler)


def _request(page: dict, port: int) -> LoadRequest:
    return LoadRequest(
        url=f"http://127.0.0.1:{port}/{page['path']}",
        http="1.1",
        connections=1,
        expected_objects=[
            ExpectedObject(path=o["path"], bytes=o["bytes"]) for o in page["objects"]
        ],
        lcp_candidates=page["lcp_candidates"],
    )


def _setup(port: int) -> BrowserSetup:
    """The engines' start-up options: no CA (plain HTTP here), the loopback server."""
    return BrowserSetup(server_name="127.0.0.1", server_port=port)


ENGINES = [selenium_engine, browsertime_engine]


def _loaded(engine: Any, page: dict[str, Any], port: int) -> LoadResult:
    """`page` loaded by `engine` from the loopback server at `port` (Browsertime's tests
    skip where it is not installed, and fail in CI)."""
    if engine is browsertime_engine:
        try:
            browsertime_engine.find_browsertime()
        except Exception as e:
            need(False, str(e))
    return engine.load(_request(page, port), _setup(port))


@pytest.mark.parametrize("engine", ENGINES, ids=[e.NAME for e in ENGINES])
def test_load_over_http11_is_verified_with_every_metric(engine, site, http11: int) -> None:  # type: ignore[no-untyped-def]
    result = _loaded(engine, site[1], http11)
    assert result.status is Status.ok, result.reason
    m = result.metrics
    for key in ("plt_ms", "fcp_ms", "lcp_ms", "ttfb_ms"):
        assert m[key] > 0, key
    assert m["ttfb_ms"] <= m["fcp_ms"] <= m["lcp_ms"] and m["fcp_ms"] <= m["plt_ms"] + 50
    assert m["resources"] == 8
    assert m["transfer_bytes"] >= 1_000_000
    assert set(result.protocols.values()) == {"http/1.1"} and len(result.protocols) == 9
    assert result.lcp_element == f"{PAGE}/o5.jpg"
    assert result.browser_version
    assert result.profile == "template", result.profile


def test_loads_never_write_into_the_profile_template(site, http11: int) -> None:  # type: ignore[no-untyped-def]
    """The template Firefox made for this process holds only the kept files, and a load
    (in a copy of it) changes none of them."""
    binary = firefox.find_firefox()
    template = profile_template.TEMPLATES.get(binary, firefox.find_geckodriver())
    assert template is not None, profile_template.TEMPLATES.errors
    assert {p.name for p in template.iterdir()} <= set(profile_template.TEMPLATE_FILES)
    assert (template / "startupCache").is_dir()
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in template.rglob("*")}
    result = selenium_engine.load(_request(site[1], http11), _setup(http11))
    assert result.status is Status.ok, result.reason
    assert {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in template.rglob("*")} == before


@pytest.mark.parametrize("engine", ENGINES, ids=[e.NAME for e in ENGINES])
def test_protocol_mismatch_is_a_failed_load_with_reason(engine, site, http10: int) -> None:  # type: ignore[no-untyped-def]
    result = _loaded(engine, site[1], http10)
    assert result.status is Status.failed
    assert result.reason == "asked for http/1.1, fell back to http/1.0: 9 of 9 resources"


def test_the_next_load_takes_the_browser_started_for_it(site, http11: int) -> None:  # type: ignore[no-untyped-def]
    """Three Selenium loads: the first announces the second's settings, so the second
    takes a Firefox started while the first ended; the second announces other settings
    than the third asks for, so the third starts its own. Every load is verified and
    navigates only once its browser is quiet."""
    req = _request(site[1], http11)
    same = req.settings()
    other = same.model_copy(update={"connections": 2})
    first = selenium_engine.load(req.model_copy(update={"next_load": same}), _setup(http11))
    second = selenium_engine.load(req.model_copy(update={"next_load": other}), _setup(http11))
    third = selenium_engine.load(req, _setup(http11))
    for result in (first, second, third):
        assert result.status is Status.ok, result.reason
        assert "quiet_wait" in result.phases_ms
    assert "browser_start" in first.phases_ms and "start_next" in first.phases_ms
    assert "browser_start" not in second.phases_ms
    assert "ahead_browser_start" in second.phases_ms and second.profile == "template"
    assert "ahead_quiet_wait" in second.phases_ms
    assert "browser_start" in third.phases_ms and "ahead_browser_start" not in third.phases_ms
    assert prestart.SPARES.take(same) == (None, "")  # nothing left running


def _two_loads_during_page(page: dict, port: int) -> tuple[LoadResult, LoadResult]:  # type: ignore[type-arg]
    """Two verified loads with start_ahead during-page, the first announcing the second."""
    req = _request(page, port).model_copy(update={"start_ahead": "during-page"})
    first = selenium_engine.load(req.model_copy(update={"next_load": req.settings()}), _setup(port))
    second = selenium_engine.load(req, _setup(port))
    for result in (first, second):
        assert result.status is Status.ok, result.reason
    return first, second


def test_a_browser_started_during_the_page_is_taken_at_normal_priority(site, http11: int) -> None:  # type: ignore[no-untyped-def]
    """start_ahead during-page: the first load starts the second's Firefox just before
    it navigates, at idle priority; the second load takes it, and navigates with every
    task of it back at the normal policy."""
    first, second = _two_loads_during_page(site[1], http11)
    order = list(first.phases_ms)
    assert order.index("start_next") < order.index("navigation")
    assert first.started.startswith("on demand")
    assert second.started == "ahead, during the previous page, at idle priority"
    assert "ahead_browser_start" in second.phases_ms and "browser_start" not in second.phases_ms
    assert prestart.tasks_at_idle(os.getpid()) == []


def test_where_idle_priority_cannot_be_undone_the_next_browser_starts_after_the_page(
    site, http11: int, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """As in a container without SYS_NICE: during-page asked, the next browser starts
    once the page is measured, at normal priority, and its load says so."""
    monkeypatch.setattr(prestart, "idle_priority_problem", lambda: "no SYS_NICE (test)")
    first, second = _two_loads_during_page(site[1], http11)
    order = list(first.phases_ms)
    assert order.index("start_next") > order.index("settle_collect")
    assert second.started == "ahead, after the previous page"
    assert prestart.tasks_at_idle(os.getpid()) == []
