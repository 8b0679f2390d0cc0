"""The Selenium engine: Python Selenium drives Firefox through geckodriver, one new
browser process and profile per load. Runs inside the client's network namespace (see
the client role's agent: browser/client.py)."""

from __future__ import annotations

import os
import shutil
import time
from importlib.resources import files
from pathlib import Path
from typing import Any

from clarke.browser import firefox
from clarke.browser import prefs as firefox_prefs
from clarke.browser.capture import BrowserCapture
from clarke.browser.load import (
    MAX_NAVIGATION_WAIT_S,
    BrowserSetup,
    LoadRequest,
    LoadResult,
    judged,
)
from clarke.timing import Phases

NAME = "selenium"
COLLECT_JS = files("clarke.browser").joinpath("collect.js").read_text()


def load(req: LoadRequest, setup: BrowserSetup, workdir: Path | None = None) -> LoadResult:
    """Load `req` with the agent's `setup` (browser binary, CA, server name)."""
    # Selenium must not look for drivers or browsers on the network: SE_OFFLINE has to
    # be set before selenium is imported, hence the imports here.
    os.environ["SE_OFFLINE"] = "true"
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
        result = _drive(req, opts, service, started, phases)
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


def _drive(req: LoadRequest, opts: Any, service: Any, started: float, phases: Phases) -> LoadResult:
    """Start Firefox, load, collect the entries, quit (Firefox writes its qlog files as
    it closes the connections)."""
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from urllib3.exceptions import HTTPError as DriverConnectionError

    driver = None
    try:
        with phases.phase("browser_start"):
            driver = webdriver.Firefox(options=opts, service=service)
            driver.set_page_load_timeout(req.timeout_s)
            driver.set_script_timeout(60)
        version = firefox.with_build(
            str(driver.capabilities.get("browserVersion", "")),
            str(driver.capabilities.get("moz:buildID", "")),
        )
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
                f"Firefox: {e.msg or e}".strip(),
                browser_version=version,
                wall_ms=(time.monotonic() - started) * 1000,
            )
        except (DriverConnectionError, TimeoutError) as e:
            # geckodriver did not answer (its own read timeout): the page never ended.
            return LoadResult.failed(
                NAME,
                f"Firefox did not finish the load: {type(e).__name__}: {e}",
                browser_version=version,
                wall_ms=(time.monotonic() - started) * 1000,
            )
        with phases.phase("judge"):
            return judged(req, raw, NAME, version, (time.monotonic() - started) * 1000)
    except WebDriverException as e:
        return LoadResult.failed(NAME, f"could not start Firefox: {e.msg or e}".strip())
    finally:
        if driver is not None:
            with phases.phase("browser_exit"):
                driver.quit()
