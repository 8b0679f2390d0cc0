"""The Browsertime engine: Browsertime 26.3.2 (npm, pinned in runner/browsertime/)
drives Firefox with the same geckodriver and the same preferences as the Selenium
engine, or Chromium (`-b chrome`) with the same chromedriver and switches (Browsertime
adds its own defaults before them: its lib/chrome/settings/chromeDesktopOptions.js);
results come from browsertime.json and its HAR, normalised to the raw shape that
load.judge and load.metrics_of read."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from clarke import paths, sh
from clarke.browser import chromium, firefox
from clarke.browser import prefs as firefox_prefs
from clarke.browser.capture import BrowserCapture, with_captured
from clarke.browser.load import BrowserSetup, LoadRequest, LoadResult, judged, with_netlog
from clarke.errors import EnvironmentProblem
from clarke.timing import Phases
from clarke.vocab import Browser, Engine, HttpVersion, Isolation

NAME = Engine.browsertime.value
VERSION = "26.3.2"

# Ends the iteration once the load event is 300 ms old, instead of Browsertime's fixed
# 2 s after loadEventEnd; LCP candidates are painted by then on the study's pages.
PAGE_COMPLETE = (
    "return (function(){const n=performance.getEntriesByType('navigation')[0];"
    "return !!n && n.loadEventEnd > 0 && performance.now() - n.loadEventEnd > 300;})()"
)

# What a HAR's httpVersion says -> the protocol as the browser reports it (nextHopProtocol).
_H1, _H2, _H3 = (v.next_hop_protocol for v in HttpVersion)
HAR_PROTOCOLS = {
    "http/1.0": "http/1.0",
    _H1: _H1,
    "http/2": _H2,
    "http/2.0": _H2,
    _H2: _H2,
    "http/3": _H3,
    _H3: _H3,
}


def find_browsertime() -> Path:
    root = paths.source_root()
    candidates = [root / "runner/browsertime/node_modules/.bin/browsertime"] if root else []
    for c in candidates:
        if c.is_file():
            return c
    found = shutil.which(NAME)
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


def transfer_size(response: dict[str, Any]) -> int | None:
    """A HAR response's bytes over the network as Resource Timing's transferSize: 0 for
    one served from the disk cache (Chromium's HAR says so); None where the HAR has no
    size (-1: chrome-har had no end of the response when Browsertime took the HAR, as
    for a fetch() still under way after the page's load), which is not judged."""
    if response.get("fromDiskCache") is True:
        return 0
    body, headers = response.get("bodySize", -1), response.get("headersSize", -1)
    if body < 0 and headers < 0:
        return None
    return max(0, body) + max(0, headers)


def har_timing(entry: dict[str, Any], time_origin: float | None) -> dict[str, float]:
    """A HAR entry's start, lookup and connection set-up as Resource Timing names them,
    in ms from `time_origin` (the page's, Unix ms): the HAR's phases follow one another
    from `startedDateTime` (blocked, dns, connect with TLS inside it), each -1 where it
    did not happen; {} without a time origin or a start. Not responseEnd: the HAR's
    receive phase ends where the browser's network stack saw the last byte, not where
    the page did, so the object metrics stay Selenium's (docs/metrics.md)."""
    try:
        started = datetime.fromisoformat(str(entry["startedDateTime"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return {}
    if not time_origin:
        return {}
    phases = entry.get("timings") or {}

    def took(name: str) -> float:
        value = phases.get(name)
        return float(value) if isinstance(value, int | float) and value > 0 else 0.0

    start = started.timestamp() * 1000 - float(time_origin)
    out = {"startTime": start}
    lookup_start = start + took("blocked")
    if took("dns"):
        out |= {"domainLookupStart": lookup_start, "domainLookupEnd": lookup_start + took("dns")}
    if took("connect"):
        connect_start = lookup_start + took("dns")
        out |= {"connectStart": connect_start, "connectEnd": connect_start + took("connect")}
    return out


def normalise(result: dict[str, Any], har: dict[str, Any], url: str) -> dict[str, Any]:
    """browsertime.json + HAR -> {navigation, fcp, lcp, resources} like collect.js gives."""
    timings = result["browserScripts"][0]["timings"]
    entries = har["log"]["entries"]

    def proto(e: dict[str, Any]) -> str:
        v = str(e["response"].get("httpVersion", "")).lower()
        return HAR_PROTOCOLS.get(v, v)

    page = next((e for e in entries if e["request"]["url"] == url), entries[0] if entries else None)
    # performance.timeOrigin to the millisecond (Browsertime's pageinfo script), as
    # collect.js gives it: where the resolvers' wall-clock times meet the page's, and
    # the HAR's entries are placed on the page's clock.
    time_origin = (result["browserScripts"][0].get("pageinfo") or {}).get("navigationStartTime")
    nav = dict(timings["navigationTiming"])
    # Browsertime's navigationTiming has no connectEnd: the page's connection set-up is
    # its HAR entry's connect phase, from the navigation's connectStart.
    set_up = har_timing(page, time_origin) if page else {}
    if "connectEnd" not in nav and "connectStart" in nav and "connectEnd" in set_up:
        nav["connectEnd"] = nav["connectStart"] + set_up["connectEnd"] - set_up["connectStart"]
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
                "transferSize": transfer_size(e["response"]),
                "encodedBodySize": int(length) if length and length.isdigit() else 0,
                "startTime": None,
                "responseEnd": None,
            }
            | har_timing(e, time_origin)
        )
    lcp = timings.get("largestContentfulPaint")
    return {
        "timeOrigin": time_origin,
        "navigation": nav,
        "fcp": (timings.get("paintTiming") or {}).get("first-contentful-paint"),
        "lcp": lcp,
        "resources": resources,
        NAME: {"pageTimings": timings.get("pageTimings")},
    }


def load(req: LoadRequest, setup: BrowserSetup, workdir: Path | None = None) -> LoadResult:
    """Load `req` with the agent's `setup` (browser binary, CA, server name)."""
    if req.navigate_at_unix_ms is not None:
        return LoadResult.failed(
            NAME, "Browsertime navigates as soon as its browser is up: no navigate_at_unix_ms"
        )
    if req.isolation is Isolation.context:
        return LoadResult.failed(
            NAME,
            f"isolation {Isolation.context}: Browsertime starts and quits its browser in "
            "every run, so it cannot keep one between loads",
        )
    if req.browser is Browser.chromium:
        return _load_chromium(req, setup, workdir)
    binary = firefox.find_firefox(setup.firefox)
    prefs = firefox_prefs.for_load(req, setup, capture=req.capture_max_bytes > 0)
    phases = Phases()
    template, made_from = firefox.profile_for_load(binary, setup.ca_cert, prefs, workdir, phases)
    result = _browsertime(
        req, _firefox_args(binary, template), workdir, phases, template, firefox_binary=binary
    )
    return result.model_copy(update={"phases_ms": phases.ms, "profile": made_from})


def _browsertime(
    req: LoadRequest,
    browser_args: list[str],
    workdir: Path | None,
    phases: Phases,
    profile: Path,
    netlog: Path | None = None,
    **binary: str,
) -> LoadResult:
    """One Browsertime run of `req` (it starts, loads, settles and exits the browser in
    one process: one phase), with Chromium's NetLog and the capture where asked; the
    browser's `profile` and Browsertime's output removed whatever happens. `binary`:
    firefox_binary or chromium_binary, the browser whose version the result names."""
    out = Path(tempfile.mkdtemp(prefix="clarke-browsertime-", dir=workdir))
    capture = BrowserCapture(workdir) if req.capture_max_bytes else None
    try:
        with phases.phase(NAME):
            result = _run(req, browser_args, out, capture, **binary)
        if netlog is not None:
            with phases.phase("netlog"):
                result = with_netlog(
                    result, chromium.netlog_summary(netlog), req.url, site=bool(req.site_hosts)
                )
        result = with_captured(result, capture, req.capture_max_bytes, phases)
    finally:
        with phases.phase("cleanup"):
            shutil.rmtree(profile, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            if capture is not None:
                capture.remove()
    return result


def _load_chromium(req: LoadRequest, setup: BrowserSetup, workdir: Path | None) -> LoadResult:
    binary = chromium.find_chromium(setup.chromium)
    phases = Phases()
    with phases.phase("profile"):
        profile = chromium.make_profile(workdir)
    netlog = profile / chromium.NETLOG
    switches = chromium.switches_in(setup, req.http, req.window, profile, req.site_hosts)
    browser_args = [
        "-b",
        "chrome",
        "--chrome.binaryPath",
        binary,
        "--chrome.chromedriverPath",
        chromium.find_chromedriver(),
        # One argument each, in the NAME=VALUE form: a separate value starting with
        # "--" would be read as one of Browsertime's own options.
        *(f"--chrome.args={s}" for s in switches),
    ]
    result = _browsertime(
        req, browser_args, workdir, phases, profile, chromium_binary=binary, netlog=netlog
    )
    return result.model_copy(update={"phases_ms": phases.ms, "browser": Browser.chromium})


def _firefox_args(binary: str, template: Path) -> list[str]:
    return [
        "-b",
        Browser.firefox.value,
        "--firefox.binaryPath",
        binary,
        "--firefox.geckodriverPath",
        firefox.find_geckodriver(),
        "--firefox.profileTemplate",
        str(template),
    ]


def _run(
    req: LoadRequest,
    browser_args: list[str],
    out: Path,
    capture: BrowserCapture | None,
    *,
    firefox_binary: str | None = None,
    chromium_binary: str | None = None,
) -> LoadResult:
    argv = [
        str(find_browsertime()),
        *browser_args,
        "--headless",
        "-n",
        "1",
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
        version = str(result["info"]["browser"].get("version", ""))
        if firefox_binary:
            # Browsertime reports no build id: the one beside the binary it was given.
            version = firefox.with_build(version, firefox.build_id(firefox_binary))
        elif chromium_binary and not version:
            version = chromium.version(chromium_binary)
        return judged(req, raw, NAME, version, wall)
    except subprocess.TimeoutExpired:
        return LoadResult.failed(NAME, "browsertime timed out")
