"""One page load: what is asked (LoadRequest), what the browser reported (the raw
timing entries), and the verdict with its reason (LoadResult). Both engines produce the
same raw shape, so metrics and verification are computed here once."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from clarke.results.record import Status
from clarke.vocab import HttpVersion


class ExpectedObject(BaseModel):
    path: str  # page-relative path as in the manifest, e.g. uniform-1m/o3.jpg
    bytes: int


class LoadRequest(BaseModel):
    url: str
    http: str
    host: str
    port: int
    connections: int = 6
    ca_cert: str | None = None
    firefox: str | None = None
    window: tuple[int, int] = (1366, 768)
    timeout_s: float = 180.0
    settle_ms: int = 250
    expected_objects: list[ExpectedObject] = Field(default_factory=list)
    lcp_candidates: list[str] = Field(default_factory=list)
    prefs: dict[str, bool | int | str] = Field(default_factory=dict)


class LoadResult(BaseModel):
    status: Status
    reason: str = ""
    engine: str
    browser: str = "firefox"
    browser_version: str = ""
    metrics: dict[str, float] = Field(default_factory=dict)
    protocols: dict[str, str] = Field(default_factory=dict)  # URL -> nextHopProtocol
    lcp_element: str | None = None
    wall_ms: float = 0.0
    raw: dict[str, Any] = Field(default_factory=dict)

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
    ends = [
        r.get("responseEnd", 0) for r in resources if isinstance(r.get("responseEnd"), int | float)
    ]
    if ends:
        out["last_response_end_ms"] = max(ends)
    out["resources"] = float(len(resources))
    return {k: v for k, v in out.items() if v is not None}


def _path_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def judge(req: LoadRequest, raw: dict[str, Any]) -> tuple[Status, str, dict[str, str], str | None]:
    """(status, reason, protocol per URL, LCP element) for a load's raw entries."""
    nav = raw.get("navigation")
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
        browser_version=version,
        metrics=metrics_of(raw),
        protocols=protocols,
        lcp_element=lcp_element,
        wall_ms=wall_ms,
        raw=raw,
    )
