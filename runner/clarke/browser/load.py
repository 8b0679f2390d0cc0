"""One page load: what is asked (LoadRequest), what the browser reported (the raw
timing entries), and the verdict with its reason (LoadResult). Both engines produce the
same raw shape, so metrics and verification are computed here once.

A LoadRequest crosses the management network to the client agent, so it carries values
only: the page's URL (https to the testbed's server, nothing else; or, for a recorded
site, to one of the site's hosts the request names, which resolve only through the
testbed's DNS), the protocol and the load's settings. Every path and program (the
browser binary, the testbed CA) and the server's name come from the agent's own
start-up options (BrowserSetup)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from clarke.browser import prefs as firefox_prefs
from clarke.browser.capture import CapturedFiles
from clarke.errors import ValidationFailed
from clarke.results.metric_families import object_metrics
from clarke.results.record import Status
from clarke.schema import problems_of
from clarke.vocab import (
    LOADS_PER_BROWSER,
    MAX_LOADS_PER_BROWSER,
    Browser,
    HttpVersion,
    Isolation,
    PrioritySignals,
    StartAhead,
    signals_refused,
)

# A host name of a recorded site (sites/archive.py's HostName).
_LABEL = r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?"
SiteHost = Annotated[str, Field(pattern=rf"^{_LABEL}(\.{_LABEL})*$", max_length=253)]
MAX_SITE_HOSTS = 2000
# Where a site's load may connect besides its hosts' port 443: the client's DNS stub
# (agent/names_slot.py).
SITE_DNS_STUB = "127.0.0.1:53"

# Only these characters (RFC 3986's unreserved, reserved and %) in a URL: no spaces,
# backslashes or controls a browser might read differently from this check.
URL_CHARS = re.compile(r"^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+$")
# Fields an older runner sent, or anyone might try: a request never names a file or a
# program, and never another server.
NOT_IN_A_REQUEST = {
    "firefox": "the browser binary is the client agent's start-up option (--firefox)",
    "ca_cert": "the testbed CA is the client agent's start-up option (--ca-cert)",
    "host": "the server's name is the client agent's start-up option (--server-name)",
    "port": "the server's port is the client agent's start-up option (--server-port)",
    "address": "every name resolves inside the client's network, not by request",
}


Pixels = Annotated[StrictInt, Field(ge=100, le=16384)]
MAX_NAVIGATION_WAIT_S = 120.0


class BrowserSetup(BaseModel):
    """The client agent's start-up options: what a request may never choose."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    firefox: str | None = None  # a name on PATH or a path; None: firefox.CANDIDATES
    chromium: str | None = None  # a name on PATH or a path; None: chromium.CANDIDATES
    ca_cert: Path | None = None  # PEM; trusted in every load's new profile
    server_name: str
    server_port: int = Field(default=443, ge=1, le=65535)
    # The server's address in the client's network: Chromium maps the server's name to
    # it itself (its resolver does not rely on the hosts file alone).
    server_address: str | None = None


class ExpectedObject(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Annotated[StrictStr, Field(max_length=1024)]  # page-relative, e.g. uniform-1m/o3.jpg
    bytes: Annotated[StrictInt, Field(ge=0)]


def check_url(url: str, setup: BrowserSetup | None, site_hosts: tuple[str, ...] = ()) -> str:
    """With the agent's setup: https to the testbed's server name and port, or for a
    recorded site's load to one of `site_hosts` on 443. Without (a load started
    in-process): http or https. ValueError saying what is wrong."""
    if not URL_CHARS.fullmatch(url):
        raise ValueError("must be a plain https URL (no spaces, backslashes or controls)")
    parts = urlsplit(url)
    # An agent takes https only; a load started in-process (no setup) may be http too.
    schemes = ("https",) if setup is not None else ("https", "http")
    if parts.scheme not in schemes:
        raise ValueError(f"must be https, not {parts.scheme or 'a relative URL'!r}")
    if "@" in parts.netloc:
        raise ValueError("must not carry a user name or password")
    port = parts.port or 443  # ValueError for a bad port
    if setup is not None and site_hosts:
        if (parts.hostname or "") not in site_hosts or port != 443:
            raise ValueError("must be a page of the recorded site: one of its site_hosts, port 443")
        return url
    if setup is not None and (
        (parts.hostname or "") != setup.server_name.lower() or port != setup.server_port
    ):
        want = setup.server_name + ("" if setup.server_port == 443 else f":{setup.server_port}")
        raise ValueError(f"must be a page of the testbed's server https://{want}/")
    return url


# Chromium opens at most 6 connections per host for HTTP/1.1 and has no setting for it.
CHROMIUM_CONNECTIONS = 6


class BrowserSettings(BaseModel):
    """What a load asks of its browser before it starts: two loads with equal settings
    can use browsers started alike (browser/prestart.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    http: HttpVersion
    browser: Browser = Browser.firefox
    connections: Annotated[StrictInt, Field(ge=1, le=256)] = 6
    window: tuple[Pixels, Pixels] = (1366, 768)
    # Overrides of Firefox preferences, prefs.OVERRIDABLE_PREFIXES only (no strings: no
    # file, no URL, no program).
    prefs: Annotated[dict[str, StrictBool | StrictInt], Field(max_length=64)] = Field(
        default_factory=dict
    )
    # A new browser and profile for the load, or a new isolated context in a browser the
    # client keeps between loads (browser/contexts.py; started with WebDriver BiDi).
    isolation: Isolation = Isolation.profile
    # The HTTP priority signals it sends (prefs.priority_signals).
    priority_signals: PrioritySignals = "default"
    # A recorded site's load: the hosts of its origins (the browser maps each to the
    # protocol asked for, and resolves them through the testbed's DNS); empty: the
    # testbed's server only.
    site_hosts: Annotated[tuple[SiteHost, ...], Field(max_length=MAX_SITE_HOSTS)] = ()

    def hosts(self, setup: BrowserSetup) -> tuple[str, ...]:
        """The names this load reaches: a site's hosts, else the testbed's server."""
        return self.site_hosts or (setup.server_name,)

    @model_validator(mode="after")
    def _what_chromium_honours(self) -> BrowserSettings:
        refused = signals_refused(self.priority_signals, self.http, self.browser)
        if refused:
            raise ValueError(f"priority_signals: {refused}")
        if self.browser is Browser.chromium:
            if self.connections != CHROMIUM_CONNECTIONS:
                raise ValueError(
                    f"connections: Chromium opens {CHROMIUM_CONNECTIONS} connections per "
                    f"server and has no setting for it, not {self.connections}"
                )
            if self.prefs:
                raise ValueError("prefs: Firefox preferences; Chromium takes none")
        return self

    @field_validator("prefs")
    @classmethod
    def _prefs(cls, prefs: dict[str, bool | int]) -> dict[str, bool | int]:
        for name, value in prefs.items():
            firefox_prefs.check_override(name, value)
        return prefs


class LoadRequest(BrowserSettings):
    """POST /load's body. Validated against the agent's setup with
    `LoadRequest.for_agent`; unknown fields are refused."""

    url: Annotated[StrictStr, Field(max_length=2048)]
    timeout_s: Annotated[float, Field(strict=True, gt=0, le=3600)] = 180.0
    settle_ms: Annotated[StrictInt, Field(ge=0, le=60_000)] = 250
    expected_objects: Annotated[list[ExpectedObject], Field(max_length=10_000)] = Field(
        default_factory=list
    )
    lcp_candidates: Annotated[
        list[Annotated[StrictStr, Field(max_length=1024)]], Field(max_length=10_000)
    ] = Field(default_factory=list)
    # Bytes of key log and qlog files to send back (browser/capture.py); 0: no capture.
    capture_max_bytes: Annotated[StrictInt, Field(ge=0, le=512_000_000)] = 0
    # Navigate at this wall-clock time (Unix ms), once the browser is up, so that the
    # load starts at a chosen point of the link's schedule; at once when it has passed.
    # The client waits at most MAX_NAVIGATION_WAIT_S.
    navigate_at_unix_ms: Annotated[float, Field(strict=False, gt=0, allow_inf_nan=False)] | None = (
        None
    )
    # What the runner's next load will ask of its browser, if it knows: the client may
    # start that browser ahead (browser/prestart.py), once this load's page is measured
    # ("after-page") or at idle priority just before it navigates ("during-page").
    next_load: BrowserSettings | None = None
    start_ahead: StartAhead = "after-page"
    # With context isolation, a browser serves at most `loads_per_browser` loads;
    # `new_browser`: the runner saw the previous load fail, so this one does not run in
    # the browser that served it.
    loads_per_browser: Annotated[StrictInt, Field(ge=1, le=MAX_LOADS_PER_BROWSER)] = (
        LOADS_PER_BROWSER
    )
    new_browser: StrictBool = False

    @model_validator(mode="before")
    @classmethod
    def _no_paths(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, why in NOT_IN_A_REQUEST.items():
                if key in data:
                    raise ValueError(f"{key}: not accepted in a load request: {why}")
        return data

    @field_validator("url")
    @classmethod
    def _url(cls, url: str, info: ValidationInfo) -> str:
        setup = (info.context or {}).get("setup")
        site_hosts = tuple(info.data.get("site_hosts") or ())
        return check_url(url, setup if isinstance(setup, BrowserSetup) else None, site_hosts)

    def settings(self) -> BrowserSettings:
        """What this load asks of its browser (BrowserSettings' fields)."""
        return BrowserSettings(**{k: getattr(self, k) for k in BrowserSettings.model_fields})

    @classmethod
    def for_agent(cls, body: object, setup: BrowserSetup) -> LoadRequest:
        """The request in `body`, checked against the agent's setup; ValidationFailed
        (exit 2, a 400 from the agent) naming every bad field."""
        try:
            return cls.model_validate(body, context={"setup": setup})
        except ValidationError as e:
            raise ValidationFailed("load request", problems_of(e)) from None


class LoadResult(BaseModel):
    status: Status
    reason: str = ""
    engine: str
    browser: Browser = Browser.firefox
    browser_version: str = ""
    metrics: dict[str, float] = Field(default_factory=dict)
    protocols: dict[str, str] = Field(default_factory=dict)  # URL -> nextHopProtocol
    lcp_element: str | None = None
    wall_ms: float = 0.0
    raw: dict[str, Any] = Field(default_factory=dict)
    captured: CapturedFiles | None = None  # with a request's capture_max_bytes
    phases_ms: dict[str, float] = Field(default_factory=dict)  # where the client's time went
    # Firefox's profile: "template" (start-up caches copied in: browser/profile_template.py)
    # or "empty: <why not>"; "" for Chromium, whose profile is always empty.
    profile: str = ""
    # How the browser was started: "on demand[: why not ahead]" or "ahead, ..." (prestart).
    started: str = ""
    # With context isolation, which of its browser's loads this was (1: the browser's
    # first); 0: a browser of its own (profile isolation).
    context: int = 0

    @classmethod
    def failed(cls, engine: str, reason: str, **kw: Any) -> LoadResult:
        return cls(status=Status.failed, reason=reason, engine=engine, **kw)


def _num(d: dict[str, Any] | None, key: str) -> float | None:
    if not d:
        return None
    v = d.get(key)
    return float(v) if isinstance(v, int | float) and v > 0 else None


def metrics_of(raw: dict[str, Any]) -> dict[str, float]:
    """Metrics from the browser's entries; docs/metrics.md defines each one."""
    nav = raw.get("navigation") or {}
    out: dict[str, float | None] = {
        "plt_ms": _num(nav, "loadEventStart"),
        "dom_content_loaded_ms": _num(nav, "domContentLoadedEventStart"),
        "ttfb_ms": _num(nav, "responseStart"),
        "fcp_ms": float(raw["fcp"]) if isinstance(raw.get("fcp"), int | float) else None,
    }
    lcp = raw.get("lcp") or {}
    out["lcp_ms"] = _num(lcp, "startTime")
    start, end, tls = (
        _num(nav, k) for k in ("connectStart", "connectEnd", "secureConnectionStart")
    )
    if start is not None and end is not None:
        out["connect_ms"] = end - start
    if tls is not None and end is not None:
        out["tls_ms"] = end - tls
    resources = raw.get("resources") or []
    sizes = [nav.get("transferSize", 0)] + [r.get("transferSize", 0) for r in resources]
    out["transfer_bytes"] = float(sum(s for s in sizes if isinstance(s, int | float)))
    out.update(object_metrics(resources))
    out["resources"] = float(len(resources))
    return {k: v for k, v in out.items() if v is not None}


def _path_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def from_cache(raw: dict[str, Any]) -> list[str]:
    """The page's entries (the document and its resources) that did not come over the
    network: a transfer size of 0 in Resource Timing, which a response served from the
    browser's HTTP cache has (and a cross-origin one hiding its sizes, which a test
    page's same-origin objects never are). Entries without a transfer size (an engine
    that does not report it) are not judged."""
    entries = [raw.get("navigation") or {}, *(raw.get("resources") or [])]
    return [
        str(e.get("name", "?"))
        for e in entries
        if isinstance(e.get("transferSize"), int | float) and e["transferSize"] == 0
    ]


def judge(req: LoadRequest, raw: dict[str, Any]) -> tuple[Status, str, dict[str, str], str | None]:
    """(status, reason, protocol per URL, LCP element) for a load's raw entries."""
    nav = raw.get("navigation")
    if raw.get("errorPage"):
        return Status.failed, f"the browser showed its error page: {raw['errorPage']}", {}, None
    if not nav or not _num(nav, "loadEventStart"):
        return Status.failed, "the page did not finish loading (no load event)", {}, None
    protocols = {nav.get("name", req.url): nav.get("nextHopProtocol", "")}
    for r in raw.get("resources") or []:
        protocols[r.get("name", "?")] = r.get("nextHopProtocol", "")
    want = HttpVersion(req.http).next_hop_protocol
    wrong: dict[str, int] = {}
    for proto in protocols.values():
        if proto != want:
            wrong[proto or "unknown"] = wrong.get(proto or "unknown", 0) + 1
    lcp = raw.get("lcp") or {}
    lcp_element = _path_of(lcp["url"]) if lcp.get("url") else lcp.get("element")
    if wrong:
        got = ", ".join(f"{p}: {n} of {len(protocols)} resources" for p, n in sorted(wrong.items()))
        return Status.failed, f"asked for {want}, fell back to {got}", protocols, lcp_element
    cached = from_cache(raw)
    if cached:
        names = ", ".join(_path_of(n) or n for n in cached[:3])
        return (
            Status.failed,
            f"isolation: {len(cached)} of {len(protocols)} entries came from the browser's "
            f"cache (transfer size 0: {names}), not over the link",
            protocols,
            lcp_element,
        )
    loaded = {_path_of(r.get("name", "")): r for r in raw.get("resources") or []}
    for obj in req.expected_objects:
        entry = loaded.get(obj.path)
        if entry is None:
            return Status.failed, f"object {obj.path} was not loaded", protocols, lcp_element
        size = entry.get("decodedBodySize") or entry.get("encodedBodySize")
        if size and int(size) != obj.bytes:
            return (
                Status.failed,
                f"object {obj.path}: {size} bytes received, {obj.bytes} expected",
                protocols,
                lcp_element,
            )
    if raw.get("fcp") is None:
        return Status.failed, "no first-contentful-paint entry", protocols, lcp_element
    if not lcp or lcp.get("error") or not _num(lcp, "startTime"):
        return (
            Status.failed,
            f"no largest-contentful-paint entry ({lcp.get('error', 'none')})",
            protocols,
            lcp_element,
        )
    if req.lcp_candidates and lcp_element not in req.lcp_candidates:
        return (
            Status.failed,
            f"LCP element was {lcp_element}, expected one of {', '.join(req.lcp_candidates)}",
            protocols,
            lcp_element,
        )
    return Status.ok, "", protocols, lcp_element


def judged(
    req: LoadRequest, raw: dict[str, Any], engine: str, version: str, wall_ms: float
) -> LoadResult:
    """The result of a load whose raw entries an engine collected: metrics and verdict."""
    status, reason, protocols, lcp_element = judge(req, raw)
    return LoadResult(
        status=status,
        reason=reason,
        engine=engine,
        browser=req.browser,
        browser_version=version,
        metrics=metrics_of(raw),
        protocols=protocols,
        lcp_element=lcp_element,
        wall_ms=wall_ms,
        raw=raw,
    )


def with_netlog(
    result: LoadResult, summary: dict[str, Any], url: str, site: bool = False
) -> LoadResult:
    """A Chromium load's result with what its NetLog says (chromium.netlog_summary):
    kept in raw["netlog"]; a load that connected elsewhere than the server (`site`: than
    the site's origins and the client's DNS stub) fails."""
    if not summary:
        return result
    update: dict[str, Any] = {"raw": {**result.raw, "netlog": summary}}
    reached = summary.get("reached") or []
    reason = elsewhere_than_site(reached) if site else elsewhere(reached, url)
    if result.status is Status.ok and reason:
        update |= {"status": Status.failed, "reason": reason}
    return result.model_copy(update=update)


def elsewhere(reached: list[str], url: str) -> str:
    """Why a load whose browser connected to `reached` (address:port) crossed the link
    with more than the page, or "" when every connection went to the page's port."""
    port = urlsplit(url).port or 443
    others = [a for a in reached if not a.endswith(f":{port}")]
    servers = {a for a in reached if a.endswith(f":{port}")}
    if others or len(servers) > 1:
        return f"the browser connected elsewhere than the server: {', '.join(reached)}"
    return ""


def elsewhere_than_site(reached: list[str]) -> str:
    """Why a recorded site's load crossed the link with more than the site: a connection
    to anything but port 443 (the site's origins, at the addresses its DNS gave) and the
    client's DNS stub; "" when it did not."""
    others = [a for a in reached if not a.endswith(":443") and a != SITE_DNS_STUB]
    if others:
        return f"the browser connected elsewhere than the site: {', '.join(others)}"
    return ""
