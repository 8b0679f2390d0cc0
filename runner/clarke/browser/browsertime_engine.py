"""The Browsertime engine: Browsertime 26.3.2 (npm, pinned in runner/browsertime/)
drives Firefox with the same geckodriver and the same preferences as the Selenium
engine; results come from browsertime.json and its HAR, normalised to the raw shape
that load.judge and load.metrics_of read."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from clarke import paths, sh
from clarke.browser import firefox
from clarke.browser import prefs as firefox_prefs
from clarke.browser.capture import BrowserCapture
from clarke.browser.load import BrowserSetup, LoadRequest, LoadResult, judged
from clarke.errors import EnvironmentProblem
from clarke.timing import Phases

NAME = "browsertime"
VERSION = "26.3.2"

# Ends the iteration once the load event is 300 ms old, instead of Browsertime's fixed
# 2 s after loadEventEnd; LCP candidates are painted by then on the study's pages.
PAGE_COMPLETE = (
    "return (function(){const n=performance.getEntriesByType('navigation')[0];"
    "return !!n && n.loadEventEnd > 0 && performance.now() - n.loadEventEnd > 300;})()"
)

HAR_PROTOCOLS = {
    "http/1.0": "http/1.0",
    "http/1.1": "http/1.1",
    "http/2": "h2",
    "http/2.0": "h2",
    "h2": "h2",
    "http/3": "h3",
    "h3": "h3",
}


def find_browsertime() -> Path:
    root = paths.source_root()
    candidates = [root / "runner/browsertime/node_modules/.bin/browsertime"] if root else []
    for c in candidates:
        if c.is_file():
            return c
    found = shutil.which("browsertime")
    if found:
        return Path(found)
    raise EnvironmentProblem(
        f"Browsertime {VERSION} is not installed (ci/setup.sh installs it in runner/browsertime/)"
    )


def _header(entry: dict[str, Any], name: str) -> str | None:
    for h in entry.get("headers", []):
        if h.get("name", "").lower() == name:
            return h.get("value")
    return None


def normalise(result: dict[str, Any], har: dict[str, Any], url: str) -> dict[str, Any]:
    """browsertime.json + HAR -> {navigation, fcp, lcp, resources} like collect.js gives."""
    timings = result["browserScripts"][0]["timings"]
    entries = har["log"]["entries"]

    def proto(e: dict[str, Any]) -> str:
        v = str(e["response"].get("httpVersion", "")).lower()
        return HAR_PROTOCOLS.get(v, v)

    page = next((e for e in entries if e["request"]["url"] == url), entries[0] if entries else None)
    nav = dict(timings["navigationTiming"])
    nav["name"] = url
    nav["nextHopProtocol"] = proto(page) if page else ""
    resources = []
    for e in entries:
        if e is page:
            continue
        length = _header(e["response"], "content-length")
        resources.append(
            {
                "name": e["request"]["url"],
                "nextHopProtocol": proto(e),
                "transferSize": max(0, e["response"].get("bodySize", 0))
                + max(0, e["response"].get("headersSize", 0)),
                "encodedBodySize": int(length) if length and length.isdigit() else 0,
                "startTime": None,
                "responseEnd": None,
            }
        )
    lcp = timings.get("largestContentfulPaint")
    return {
        "navigation": nav,
        "fcp": (timings.get("paintTiming") or {}).get("first-contentful-paint"),
        "lcp": lcp,
        "resources": resources,
        "browsertime": {"pageTimings": timings.get("pageTimings")},
    }


def load(req: LoadRequest, setup: BrowserSetup, workdir: Path | None = None) -> LoadResult:
    """Load `req` with the agent's `setup` (browser binary, CA, server name)."""
    binary = firefox.find_firefox(setup.firefox)
    prefs = firefox_prefs.layered(
        req.http,
        setup.server_name,
        setup.server_port,
        req.connections,
        req.prefs,
        capture=req.capture_max_bytes > 0,
    )
    if req.navigate_at_unix_ms is not None:
        return LoadResult.failed(
            NAME, "Browsertime navigates as soon as its browser is up: no navigate_at_unix_ms"
        )
    phases = Phases()
    with phases.phase("profile"):
        template = firefox.make_profile(setup.ca_cert, prefs, workdir)
    out = Path(tempfile.mkdtemp(prefix="clarke-browsertime-", dir=workdir))
    capture = BrowserCapture(workdir) if req.capture_max_bytes else None
    try:
        # Browsertime starts, loads, settles and exits Firefox in one process: one phase.
        with phases.phase("browsertime"):
            result = _run(req, binary, template, out, capture)
        if capture is not None:
            with phases.phase("capture"):
                files = capture.collect(req.capture_max_bytes)
            result = result.model_copy(update={"captured": files})
    finally:
        with phases.phase("cleanup"):
            shutil.rmtree(template, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            if capture is not None:
                capture.remove()
    return result.model_copy(update={"phases_ms": phases.ms})


def _run(
    req: LoadRequest, binary: str, template: Path, out: Path, capture: BrowserCapture | None
) -> LoadResult:
    argv = [
        str(find_browsertime()),
        "-b",
        "firefox",
        "--headless",
        "-n",
        "1",
        "--firefox.binaryPath",
        binary,
        "--firefox.geckodriverPath",
        firefox.find_geckodriver(),
        "--firefox.profileTemplate",
        str(template),
        "--visualMetrics",
        "false",
        "--video",
        "false",
        "--pageLoadStrategy",
        "normal",
        "--pageCompleteCheck",
        PAGE_COMPLETE,
        "--pageCompleteCheckStartWait",
        "0",
        "--pageCompleteCheckPollTimeout",
        "100",
        "--timeouts.pageLoad",
        str(int(req.timeout_s * 1000)),
        "--viewPort",
        f"{req.window[0]}x{req.window[1]}",
        "--resultDir",
        str(out),
        req.url,
    ]
    started = time.monotonic()
    try:
        proc = sh.run(
            argv,
            check=False,
            timeout=req.timeout_s + 120,
            env=capture.env() if capture else None,
        )
        wall = (time.monotonic() - started) * 1000
        result_file, har_file = out / "browsertime.json", out / "browsertime.har"
        if proc.returncode != 0 or not result_file.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return LoadResult.failed(
                NAME, f"browsertime exited {proc.returncode}: {' | '.join(tail)}", wall_ms=wall
            )
        result = json.loads(result_file.read_text())[0]
        if result.get("markedAsFailure") or (result.get("errors") and any(result["errors"])):
            return LoadResult.failed(
                NAME,
                f"browsertime: {result.get('failureMessages') or result.get('errors')}",
                wall_ms=wall,
            )
        raw = normalise(result, json.loads(har_file.read_text()), req.url)
        # Browsertime reports no build id: the one beside the binary it was given.
        version = firefox.with_build(
            str(result["info"]["browser"].get("version", "")), firefox.build_id(binary)
        )
        return judged(req, raw, NAME, version, wall)
    except subprocess.TimeoutExpired:
        return LoadResult.failed(NAME, "browsertime timed out")
