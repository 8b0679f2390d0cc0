"""The Selenium engine: Python Selenium drives Firefox through geckodriver, or Chromium
through chromedriver, one new browser process and profile per load. Runs inside the
client's network namespace (see the client role's agent: browser/client.py)."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

from clarke.browser import chromium, firefox, prestart
from clarke.browser import prefs as firefox_prefs
from clarke.browser.capture import BrowserCapture
from clarke.browser.load import (
    MAX_NAVIGATION_WAIT_S,
    BrowserSettings,
    BrowserSetup,
    LoadRequest,
    LoadResult,
    judged,
    with_netlog,
)
from clarke.timing import Phases
from clarke.vocab import Browser, Engine

NAME = Engine.selenium.value
log = logging.getLogger(__name__)
COLLECT_JS = files("clarke.browser").joinpath("collect.js").read_text()


def load(req: LoadRequest, setup: BrowserSetup, workdir: Path | None = None) -> LoadResult:
    """Load `req` with the agent's `setup` (browser binary, CA, server name)."""
    # Selenium must not look for drivers or browsers on the network: SE_OFFLINE has to
    # be set before selenium is imported, hence the imports here.
    os.environ["SE_OFFLINE"] = "true"
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

        def start_next() -> None:
            nxt = req.next_load
            if nxt is not None and nxt.browser is Browser.firefox and not capture:
                prestart.SPARES.prepare(
                    nxt,
                    lambda: _start_firefox(nxt, setup, workdir, Phases(), None, quiet=True),
                    idle=during,
                )

        try:
            result = _drive(req, browser, started, phases, start_next, during)
        finally:
            with phases.phase("cleanup"):
                shutil.rmtree(browser.profile, ignore_errors=True)
        if capture is not None:
            with phases.phase("capture"):
                files = capture.collect(req.capture_max_bytes)
            result = result.model_copy(update={"captured": files})
    finally:
        if capture is not None:
            capture.remove()
    if why_not:
        log.info("Firefox started on demand: %s", why_not)
    how = f"{browser.how}: {why_not}" if why_not else browser.how
    return result.model_copy(
        update={"phases_ms": phases.ms, "profile": browser.made_from, "started": how}
    )


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
    prefs = firefox_prefs.layered(
        settings.http,
        setup.server_name,
        setup.server_port,
        settings.connections,
        settings.prefs,
        capture=capture is not None,
        signals=settings.priority_signals,
    )
    profile, made_from = firefox.profile_for_load(binary, setup.ca_cert, prefs, workdir, phases)
    opts = Options()
    opts.binary_location = binary
    for arg in (
        "-headless",
        "-no-remote",
        "-profile",
        str(profile),
        f"--width={settings.window[0]}",
        f"--height={settings.window[1]}",
    ):
        opts.add_argument(arg)
    service = Service(
        executable_path=firefox.find_geckodriver(),
        log_output=str(profile / "geckodriver.log"),
        env=capture.env() if capture else None,
    )
    try:
        with phases.phase("browser_start"):
            driver = webdriver.Firefox(options=opts, service=service)
    except BaseException:
        shutil.rmtree(profile, ignore_errors=True)
        raise
    version = firefox.with_build(
        str(driver.capabilities.get("browserVersion", "")),
        str(driver.capabilities.get("moz:buildID", "")),
    )
    started = prestart.Started(driver, profile, made_from, version)
    if quiet:
        pid = driver.service.process.pid
        with phases.phase("quiet_wait"):
            _, was_quiet = prestart.wait_quiet(pid)
        # Starved at idle priority, a browser looks quiet: only at normal priority it is.
        if was_quiet and not prestart.tasks_at_idle(pid):
            started.quiet_since = prestart.QuietMark.now(pid)
    started.phases_ms = dict(phases.ms)
    return started


def _load_chromium(req: LoadRequest, setup: BrowserSetup, workdir: Path | None) -> LoadResult:
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    phases = Phases()
    binary = chromium.find_chromium(setup.chromium)
    with phases.phase("profile"):
        profile = chromium.make_profile(workdir)
    netlog = profile / chromium.NETLOG
    capture = BrowserCapture(workdir) if req.capture_max_bytes else None
    opts = Options()
    opts.binary_location = binary
    for arg in chromium.switches(
        req.http,
        setup.server_port,
        user_data_dir=profile / "data",
        window=req.window,
        host=setup.server_name,
        address=setup.server_address,
        ca_spki=chromium.spki_sha256(setup.ca_cert) if setup.ca_cert else None,
        netlog=netlog,
    ):
        opts.add_argument(arg)
    service = Service(
        executable_path=chromium.find_chromedriver(),
        log_output=str(profile / "chromedriver.log"),
        env=capture.env() if capture else None,
    )
    started = time.monotonic()
    try:
        try:
            with phases.phase("browser_start"):
                driver = webdriver.Chrome(options=opts, service=service)
        except WebDriverException as e:
            return LoadResult.failed(NAME, f"could not start Chromium: {e.msg or e}".strip())
        version = str(driver.capabilities.get("browserVersion", ""))
        browser = prestart.Started(driver, profile, "", version)
        result = _drive(req, browser, started, phases, lambda: None, False, label="Chromium")
        with phases.phase("netlog"):
            result = with_netlog(result, chromium.netlog_summary(netlog), req.url)
        if capture is not None:
            with phases.phase("capture"):
                files = capture.collect(req.capture_max_bytes)
            result = result.model_copy(update={"captured": files})
    finally:
        with phases.phase("cleanup"):
            shutil.rmtree(profile, ignore_errors=True)
            if capture is not None:
                capture.remove()
    return result.model_copy(update={"phases_ms": phases.ms, "browser": Browser.chromium})


def _drive(
    req: LoadRequest,
    browser: prestart.Started,
    started: float,
    phases: Phases,
    start_next: Callable[[], None],
    during: bool,
    label: str = "Firefox",
) -> LoadResult:
    """Wait until the browser is quiet, load, collect the entries, quit (Firefox writes
    its qlog files, Chromium its NetLog, as they close). `start_next` starts the next
    load's browser: just before navigating when `during` (_during_page), else once the
    entries are collected."""
    from selenium.common.exceptions import WebDriverException
    from urllib3.exceptions import HTTPError as DriverConnectionError

    driver, version = browser.driver, browser.version
    try:
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
                raw = driver.execute_async_script(COLLECT_JS, req.settle_ms)
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
    finally:
        with phases.phase("browser_exit"):
            driver.quit()


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
