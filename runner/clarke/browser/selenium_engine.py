"""The Selenium engine: Python Selenium drives Firefox through geckodriver, or Chromium
through chromedriver. Profile isolation: one new browser process and profile per load.
Context isolation: a new isolated context per load in a browser kept between loads
(browser/contexts.py). Runs inside the client's network namespace (see the client
role's agent: browser/client.py)."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from clarke.browser import chromium, contexts, firefox, prestart
from clarke.browser import prefs as firefox_prefs
from clarke.browser.capture import BrowserCapture, with_captured
from clarke.browser.load import (
    MAX_NAVIGATION_WAIT_S,
    BrowserSettings,
    BrowserSetup,
    LoadRequest,
    LoadResult,
    judged,
    with_netlog,
)
from clarke.results.record import Status
from clarke.timing import Phases
from clarke.vocab import Browser, Engine, Isolation

if TYPE_CHECKING:
    from selenium.webdriver.chrome.options import Options as ChromeOptions
    from selenium.webdriver.firefox.options import Options as FirefoxOptions

NAME = Engine.selenium.value
BIDI_REPLY_POLL_S = 0.005
log = logging.getLogger(__name__)
COLLECT_JS = files("clarke.browser").joinpath("collect.js").read_text()


def load(req: LoadRequest, setup: BrowserSetup, workdir: Path | None = None) -> LoadResult:
    """Load `req` with the agent's `setup` (browser binary, CA, server name)."""
    # Selenium must not look for drivers or browsers on the network: SE_OFFLINE has to
    # be set before selenium is imported, hence the imports here.
    os.environ["SE_OFFLINE"] = "true"
    # A capture's browser starts with the capture's environment: always its own.
    if req.isolation is Isolation.context and not req.capture_max_bytes:
        return _load_in_context(req, setup, workdir)
    contexts.RESIDENT.discard()
    if req.browser is Browser.chromium:
        prestart.SPARES.discard()
        return _load_chromium(req, setup, workdir)
    from selenium.common.exceptions import WebDriverException

    phases = Phases()
    capture = BrowserCapture(workdir) if req.capture_max_bytes else None
    started = time.monotonic()
    # A capture's browser starts with the capture's environment: never one started ahead.
    with phases.phase("browser_start_wait"):
        ahead, why_not = (None, "") if capture else prestart.SPARES.take(req.settings())
    if capture:
        prestart.SPARES.discard()
    try:
        if ahead is not None:
            browser = ahead
            phases.ms |= {f"ahead_{name}": ms for name, ms in ahead.phases_ms.items()}
        else:
            try:
                browser = _start_firefox(req, setup, workdir, phases, capture)
            except WebDriverException as e:
                return LoadResult.failed(NAME, f"could not start Firefox: {e.msg or e}".strip())
        during = _during_page(req)
        try:
            result = _drive(
                req, browser, started, phases, _next_browser(req, setup, workdir, during), during
            )
        finally:
            with phases.phase("browser_exit"):
                browser.driver.quit()
            with phases.phase("cleanup"):
                shutil.rmtree(browser.profile, ignore_errors=True)
        result = with_captured(result, capture, req.capture_max_bytes, phases)
    finally:
        if capture is not None:
            capture.remove()
    if why_not:
        log.info("Firefox started on demand: %s", why_not)
    how = f"{browser.how}: {why_not}" if why_not else browser.how
    return result.model_copy(
        update={"phases_ms": phases.ms, "profile": browser.made_from, "started": how}
    )


def _next_browser(
    req: LoadRequest, setup: BrowserSetup, workdir: Path | None, during: bool
) -> Callable[[], None]:
    """What starts the next load's Firefox ahead, if the runner announced it."""

    def start_next() -> None:
        nxt = req.next_load
        if nxt is not None and nxt.browser is Browser.firefox and not req.capture_max_bytes:
            prestart.SPARES.prepare(
                nxt,
                lambda: _start_firefox(nxt, setup, workdir, Phases(), None, quiet=True),
                idle=during,
            )

    return start_next


def _start_firefox(
    settings: BrowserSettings,
    setup: BrowserSetup,
    workdir: Path | None,
    phases: Phases,
    capture: BrowserCapture | None,
    quiet: bool = False,
) -> prestart.Started:
    """Firefox with a new profile for `settings`, up and ready to navigate; `quiet`: and
    its processes quiet (a browser started ahead waits for that in the background, so
    the load that takes it mostly finds it quiet)."""
    from selenium import webdriver
    from selenium.webdriver.firefox.options import Options
    from selenium.webdriver.firefox.service import Service

    binary = firefox.find_firefox(setup.firefox)
    prefs = firefox_prefs.for_load(settings, setup, capture=capture is not None)
    profile, made_from = firefox.profile_for_load(binary, setup.ca_cert, prefs, workdir, phases)
    opts = _options(
        Options(),
        binary,
        settings,
        (
            "-headless",
            "-no-remote",
            "-profile",
            str(profile),
            f"--width={settings.window[0]}",
            f"--height={settings.window[1]}",
        ),
    )
    service = Service(**_service(firefox.find_geckodriver(), profile / "geckodriver.log", capture))
    driver = _driver_started(
        phases, profile, lambda: webdriver.Firefox(options=opts, service=service)
    )
    version = firefox.with_build(
        str(driver.capabilities.get("browserVersion", "")),
        str(driver.capabilities.get("moz:buildID", "")),
    )
    started = _started(settings, driver, profile, made_from, version)
    if quiet:
        pid = driver.service.process.pid
        with phases.phase("quiet_wait"):
            _, quiet_from = prestart.wait_quiet(pid)
        # Starved at idle priority, a browser looks quiet: only at normal priority it is,
        # so quiet from now on (not from the window's start, which may have been at idle).
        if quiet_from is not None and not prestart.tasks_at_idle(pid):
            started.quiet_since = prestart.QuietMark.now(pid)
    started.phases_ms = dict(phases.ms)
    return started


Opts = TypeVar("Opts", "FirefoxOptions", "ChromeOptions")


def _options(opts: Opts, binary: str, settings: BrowserSettings, args: Iterable[str]) -> Opts:
    opts.binary_location = binary
    for arg in args:
        opts.add_argument(arg)
    # Context isolation opens each load's context with WebDriver BiDi.
    opts.enable_bidi = settings.isolation is Isolation.context
    return opts


def _service(driver: str, log: Path, capture: BrowserCapture | None) -> dict[str, Any]:
    """A WebDriver service's arguments: its log, and the capture's environment (the
    browser inherits it)."""
    return {
        "executable_path": driver,
        "log_output": str(log),
        "env": capture.env() if capture else None,
    }


D = TypeVar("D")  # a WebDriver, Firefox's or Chromium's


def _driver_started(phases: Phases, profile: Path, start: Callable[[], D]) -> D:
    """The WebDriver `start` returns, timed as browser_start; the new profile removed
    where the browser did not start."""
    try:
        with phases.phase("browser_start"):
            return start()
    except BaseException:
        shutil.rmtree(profile, ignore_errors=True)
        raise


def _started(
    settings: BrowserSettings, driver: Any, profile: Path, made_from: str, version: str
) -> prestart.Started:
    """A browser just started; for context isolation, with its first window (each
    load's context opens in a window of that size)."""
    started = prestart.Started(driver, profile, made_from, version)
    if settings.isolation is not Isolation.context:
        return started
    # Selenium polls for each BiDi reply every 100 ms by default, which put 0.2 s on
    # opening a context and 0.2 s on closing one (two commands each): poll finer.
    driver.command_executor.client_config.websocket_interval = BIDI_REPLY_POLL_S
    size: dict[str, int] = driver.get_window_size()
    started.home = str(driver.current_window_handle)
    started.home_size = (int(size["width"]), int(size["height"]))
    return started


def _start_chromium(
    settings: BrowserSettings,
    setup: BrowserSetup,
    workdir: Path | None,
    phases: Phases,
    capture: BrowserCapture | None,
) -> prestart.Started:
    """Chromium with a new user-data-dir for `settings`, up and ready to navigate; its
    NetLog in the profile directory (removed with it)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary = chromium.find_chromium(setup.chromium)
    with phases.phase("profile"):
        profile = chromium.make_profile(workdir)
    netlog = profile / chromium.NETLOG
    opts = _options(
        Options(),
        binary,
        settings,
        chromium.switches_in(setup, settings.http, settings.window, profile, settings.site_hosts),
    )
    service = Service(
        **_service(chromium.find_chromedriver(), profile / "chromedriver.log", capture)
    )
    driver = _driver_started(
        phases, profile, lambda: webdriver.Chrome(options=opts, service=service)
    )
    version = str(driver.capabilities.get("browserVersion", ""))
    started = _started(settings, driver, profile, "", version)
    started.netlog = chromium.NetlogTail(netlog)
    return started


def _load_chromium(req: LoadRequest, setup: BrowserSetup, workdir: Path | None) -> LoadResult:
    from selenium.common.exceptions import WebDriverException

    phases = Phases()
    capture = BrowserCapture(workdir) if req.capture_max_bytes else None
    started = time.monotonic()
    browser = None
    try:
        try:
            browser = _start_chromium(req, setup, workdir, phases, capture)
        except WebDriverException as e:
            return LoadResult.failed(NAME, f"could not start Chromium: {e.msg or e}".strip())
        try:
            result = _drive(req, browser, started, phases, lambda: None, False, label="Chromium")
        finally:
            with phases.phase("browser_exit"):
                browser.driver.quit()
        with phases.phase("netlog"):
            summary = chromium.netlog_summary(browser.profile / chromium.NETLOG)
            result = with_netlog(result, summary, req.url, site=bool(req.site_hosts))
        result = with_captured(result, capture, req.capture_max_bytes, phases)
    finally:
        with phases.phase("cleanup"):
            if browser is not None:
                shutil.rmtree(browser.profile, ignore_errors=True)
            if capture is not None:
                capture.remove()
    return result.model_copy(update={"phases_ms": phases.ms, "browser": Browser.chromium})


def _load_in_context(req: LoadRequest, setup: BrowserSetup, workdir: Path | None) -> LoadResult:
    """One load in a new context of a browser kept between loads (browser/contexts.py):
    the kept one, else one started ahead for these settings, else a new one."""
    from selenium.common.exceptions import WebDriverException
    from urllib3.exceptions import HTTPError as DriverConnectionError

    phases, started, settings = Phases(), time.monotonic(), req.settings()
    label = "Chromium" if req.browser is Browser.chromium else "Firefox"
    with phases.phase("browser_start_wait"):
        browser, why_new = contexts.RESIDENT.take(settings, req.loads_per_browser, req.new_browser)
        if browser is None:
            browser, why_not = prestart.SPARES.take(settings)
            why_new = f"{why_new}; {why_not}" if why_not else why_new
            if browser is not None:
                phases.ms |= {f"ahead_{name}": ms for name, ms in browser.phases_ms.items()}
        else:
            prestart.SPARES.discard()
            phases.ms |= browser.phases_ms  # how its context was made ready
    if browser is None:
        start = _start_chromium if req.browser is Browser.chromium else _start_firefox
        try:
            browser = start(settings, setup, workdir, phases, None)
        except WebDriverException as e:
            return LoadResult.failed(NAME, f"could not start {label}: {e.msg or e}".strip())
    if not browser.contexts:  # a browser's first load says why it was started
        browser.how = f"{browser.how}: {why_new}" if why_new else browser.how
    n = browser.contexts + 1
    # Kept for a later load with these settings while it has loads left, unless no load
    # follows (the runner announces each next one); the next load needs no browser
    # started ahead when one is kept for its settings.
    keep = req.next_load is not None and n < req.loads_per_browser
    next_served = req.next_load is not None and (
        (keep and req.next_load == settings) or contexts.RESIDENT.has(req.next_load)
    )
    during = _during_page(req) and not next_served
    result: LoadResult | None = None
    try:
        if browser.context is None:
            with phases.phase("context_open"):
                browser.context = contexts.open_context(browser.driver, browser.home_size)
        began_unix_ms = time.time() * 1000
        start_next = (lambda: None) if next_served else _next_browser(req, setup, workdir, during)
        result = _drive(req, browser, started, phases, start_next, during, label)
        if browser.netlog is not None:
            with phases.phase("netlog"):
                summary = browser.netlog.since(began_unix_ms)
                result = with_netlog(result, summary, req.url, site=bool(req.site_hosts))
    except (WebDriverException, DriverConnectionError, TimeoutError) as e:
        msg = getattr(e, "msg", None) or e
        result = LoadResult.failed(NAME, f"{label}: its context: {msg}".strip())
    finally:
        browser.contexts = n
        if keep and result is not None and result.status is Status.ok:
            contexts.RESIDENT.keep(browser, settings, _prepare_next_context)
        else:
            with phases.phase("browser_exit"):
                prestart.quit_browser(browser)
    return result.model_copy(
        update={
            "phases_ms": phases.ms,
            "profile": browser.made_from,
            "started": browser.how,
            "context": n,
            "browser": req.browser,
        }
    )


def _prepare_next_context(browser: prestart.Started) -> None:
    """In the background, once a load is measured: closes its context, opens the next
    load's, and marks the browser quiet once it is (the next load then skips the wait)."""
    browser.quiet_since = None
    # Timed as the next load's `next_context_*` phases (clarke bench load --breakdown).
    phases = Phases()
    if browser.context is not None:
        with phases.phase("close"):
            contexts.close_context(browser.driver, browser.context, browser.home)
        browser.context = None
    with phases.phase("open"):
        browser.context = contexts.open_context(browser.driver, browser.home_size)
    pid = browser.driver.service.process.pid
    with phases.phase("quiet_wait"):
        # Quiet from where its quiet window began: the next load judges the time from
        # there, and waits for no window of its own when the browser stayed quiet.
        _, browser.quiet_since = prestart.wait_quiet(pid)
    browser.phases_ms = {f"next_context_{name}": ms for name, ms in phases.ms.items()}


def _drive(
    req: LoadRequest,
    browser: prestart.Started,
    started: float,
    phases: Phases,
    start_next: Callable[[], None],
    during: bool,
    label: str = "Firefox",
) -> LoadResult:
    """Wait until the browser is quiet, load, collect the entries (the caller quits
    the browser, or keeps it: context isolation). `start_next` starts the next load's
    browser: just before navigating when `during` (_during_page), else once the entries
    are collected."""
    from selenium.common.exceptions import WebDriverException
    from urllib3.exceptions import HTTPError as DriverConnectionError

    driver, version = browser.driver, browser.version
    with phases.phase("quiet_wait"):
        prestart.wait_quiet(driver.service.process.pid, browser.quiet_since)
    if prestart.tasks_at_idle(driver.service.process.pid):
        # A process forked while take() moved its parent escapes that scan: moved now,
        # and quiet again at normal priority (starved, it only looked quiet).
        prestart.to_normal_priority(driver.service.process.pid)
        with phases.phase("quiet_wait_again"):
            prestart.wait_quiet(driver.service.process.pid)
    idle = prestart.tasks_at_idle(driver.service.process.pid)
    if idle:  # a browser measured at idle priority is no load
        return LoadResult.failed(
            NAME, f"{label}: {len(idle)} of its tasks still at idle priority, not loaded"
        )
    if during:
        with phases.phase("start_next"):
            start_next()
    if req.navigate_at_unix_ms is not None:
        wait_s = req.navigate_at_unix_ms / 1000 - time.time()
        if wait_s > 0:
            with phases.phase("wait_to_navigate"):
                time.sleep(min(wait_s, MAX_NAVIGATION_WAIT_S))
    try:
        driver.set_page_load_timeout(req.timeout_s)
        driver.set_script_timeout(60)
        with phases.phase("navigation"):
            driver.get(req.url)
        with phases.phase("settle_collect"):
            raw = driver.execute_async_script(COLLECT_JS, req.settle_ms, req.lcp_candidates)
        if during:  # measured: the next browser may take a core while this one quits
            prestart.SPARES.promote()
    except WebDriverException as e:
        return LoadResult.failed(
            NAME,
            f"{label}: {e.msg or e}".strip(),
            browser_version=version,
            wall_ms=(time.monotonic() - started) * 1000,
        )
    except (DriverConnectionError, TimeoutError) as e:
        # The driver did not answer (its own read timeout): the page never ended.
        return LoadResult.failed(
            NAME,
            f"{label} did not finish the load: {type(e).__name__}: {e}",
            browser_version=version,
            wall_ms=(time.monotonic() - started) * 1000,
        )
    if not during:
        with phases.phase("start_next"):
            start_next()
    with phases.phase("judge"):
        return judged(req, raw, NAME, version, (time.monotonic() - started) * 1000)


def _during_page(req: LoadRequest) -> bool:
    """Whether the next load's browser starts during this page, at idle priority: asked
    for (start_ahead), and possible here; where a thread cannot be moved back from idle
    priority, it starts once the page is measured instead."""
    if req.start_ahead != "during-page" or req.next_load is None:
        return False
    problem = prestart.idle_priority_problem()
    if problem:
        log.warning("the next browser starts after the page: %s", problem)
    return not problem
