"""The Selenium engine: Python Selenium drives Firefox through geckodriver, or Chromium
through chromedriver, one new browser process and profile per load. Runs inside the
client's network namespace (see the client role's agent: browser/client.py)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

from clarke.browser import chromium, firefox
from clarke.browser import prefs as firefox_prefs
from clarke.browser.capture import BrowserCapture
from clarke.browser.load import (
    MAX_NAVIGATION_WAIT_S,
    BrowserSetup,
    LoadRequest,
    LoadResult,
    judged,
    with_netlog,
)
from clarke.timing import Phases

NAME = "selenium"
COLLECT_JS = files("clarke.browser").joinpath("collect.js").read_text()


def load(req: LoadRequest, setup: BrowserSetup, workdir: Path | None = None) -> LoadResult:
    """Load `req` with the agent's `setup` (browser binary, CA, server name)."""
    # Selenium must not look for drivers or browsers on the network: SE_OFFLINE has to
    # be set before selenium is imported, hence the imports here.
    os.environ["SE_OFFLINE"] = "true"
    if req.browser == "chromium":
        return _load_chromium(req, setup, workdir)
    from selenium.webdriver.firefox.options import Options
    from selenium.webdriver.firefox.service import Service

    phases = Phases()
    binary = firefox.find_firefox(setup.firefox)
    prefs = firefox_prefs.layered(
        req.http,
        setup.server_name,
        setup.server_port,
        req.connections,
        req.prefs,
        capture=req.capture_max_bytes > 0,
    )
    with phases.phase("profile"):
        profile = firefox.make_profile(setup.ca_cert, prefs, workdir)
    capture = BrowserCapture(workdir) if req.capture_max_bytes else None
    opts = Options()
    opts.binary_location = binary
    for arg in (
        "-headless",
        "-no-remote",
        "-profile",
        str(profile),
        f"--width={req.window[0]}",
        f"--height={req.window[1]}",
    ):
        opts.add_argument(arg)
    service = Service(
        executable_path=firefox.find_geckodriver(),
        log_output=str(profile / "geckodriver.log"),
        env=capture.env() if capture else None,
    )
    started = time.monotonic()
    try:
        result = _drive(req, _firefox_starter(opts, service), started, phases)
        if capture is not None:
            with phases.phase("capture"):
                files = capture.collect(req.capture_max_bytes)
            result = result.model_copy(update={"captured": files})
    finally:
        with phases.phase("cleanup"):
            shutil.rmtree(profile, ignore_errors=True)
            if capture is not None:
                capture.remove()
    return result.model_copy(update={"phases_ms": phases.ms})


def _load_chromium(req: LoadRequest, setup: BrowserSetup, workdir: Path | None) -> LoadResult:
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
        result = _drive(req, _chromium_starter(opts, service), started, phases)
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
    return result.model_copy(update={"phases_ms": phases.ms, "browser": "chromium"})


Starter = tuple[str, Callable[[], Any], Callable[[Any], str]]


def _firefox_starter(opts: Any, service: Any) -> Starter:
    from selenium import webdriver

    def version(driver: Any) -> str:
        return firefox.with_build(
            str(driver.capabilities.get("browserVersion", "")),
            str(driver.capabilities.get("moz:buildID", "")),
        )

    return "Firefox", lambda: webdriver.Firefox(options=opts, service=service), version


def _chromium_starter(opts: Any, service: Any) -> Starter:
    from selenium import webdriver

    def version(driver: Any) -> str:
        return str(driver.capabilities.get("browserVersion", ""))

    return "Chromium", lambda: webdriver.Chrome(options=opts, service=service), version


def _drive(req: LoadRequest, starter: Starter, started: float, phases: Phases) -> LoadResult:
    """Start the browser, load, collect the entries, quit (Firefox writes its qlog
    files, Chromium its NetLog, as they close)."""
    from selenium.common.exceptions import WebDriverException
    from urllib3.exceptions import HTTPError as DriverConnectionError

    label, start, version_of = starter
    driver = None
    try:
        with phases.phase("browser_start"):
            driver = start()
            driver.set_page_load_timeout(req.timeout_s)
            driver.set_script_timeout(60)
        version = version_of(driver)
        if req.navigate_at_unix_ms is not None:
            wait_s = req.navigate_at_unix_ms / 1000 - time.time()
            if wait_s > 0:
                with phases.phase("wait_to_navigate"):
                    time.sleep(min(wait_s, MAX_NAVIGATION_WAIT_S))
        try:
            with phases.phase("navigation"):
                driver.get(req.url)
            with phases.phase("settle_collect"):
                raw = driver.execute_async_script(COLLECT_JS, req.settle_ms)
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
        with phases.phase("judge"):
            return judged(req, raw, NAME, version, (time.monotonic() - started) * 1000)
    except WebDriverException as e:
        return LoadResult.failed(NAME, f"could not start {label}: {e.msg or e}".strip())
    finally:
        if driver is not None:
            with phases.phase("browser_exit"):
                driver.quit()
