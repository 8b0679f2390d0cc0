"""Per-connection rows of one page load (docs/metrics.md, "Connections"), joined from
what can be joined reliably: the server's per-connection records (which connection
carried which request, by path, and its bytes each way) and the browser's timing
entries (when each request was sent and its response ended, on the browser's clock in
ms from navigation start). Firefox's timing entries name no connection; the server's
`request_paths` do, and each path of a test page is asked for once per load.

Per connection, over the span from its first request to the end of its last response:

    busy_ms      the time with at least one request outstanding on it
    idle_ms      the span minus busy_ms: open, and nothing in flight
    max_streams  the most requests outstanding on it at once

and per load, from the same intervals, the most connections carrying the page at once
and the most requests outstanding at once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from clarke.results.metric_families import number

Interval = tuple[float, float]


def _timed(entry: Mapping[str, Any]) -> Interval | None:
    start, end = number(entry.get("requestStart")), number(entry.get("responseEnd"))
    if start is None or end is None or start <= 0 or end < start:
        return None
    return start, end


def busy_time(intervals: Iterable[Interval]) -> float:
    """The length of the union of `intervals`."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def max_overlap(intervals: Iterable[Interval]) -> int:
    """The most intervals open at one instant (one ending as another starts: not both)."""
    events = sorted(
        [(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals],
        key=lambda ev: (ev[0], ev[1]),  # ends before starts at the same instant
    )
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def _received(conn: Mapping[str, Any]) -> float | None:
    transport = conn.get("transport") or {}
    tcp, quic = transport.get("tcp") or {}, transport.get("quic") or {}
    return number(tcp.get("bytes_received")) or number(quic.get("udp_bytes_received"))


def connection_rows(
    server_connections: Iterable[Mapping[str, Any]], raw: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """(one row per connection that carried a request, the load's concurrency figures).
    Timing fields are None for a connection none of whose requests could be timed
    (an engine without resource timings)."""
    by_path: dict[str, Mapping[str, Any]] = {}
    nav = raw.get("navigation") or {}
    for entry in [nav, *(raw.get("resources") or [])]:
        if entry.get("name"):
            by_path.setdefault(urlsplit(str(entry["name"])).path, entry)
    rows: list[dict[str, Any]] = []
    spans: list[Interval] = []
    all_requests: list[Interval] = []
    for conn in server_connections:
        if int(conn.get("requests", 0) or 0) <= 0:
            continue
        entries = [by_path[p] for p in conn.get("request_paths") or [] if p in by_path]
        timed = [t for t in (_timed(e) for e in entries) if t is not None]
        row: dict[str, Any] = {
            "id": conn.get("id"),
            "protocol": conn.get("protocol"),
            "requests": conn.get("requests"),
            "requests_timed": len(timed),
            "bytes_sent": conn.get("wire_bytes_sent"),
            "bytes_received": _received(conn),
            "app_bytes_sent": conn.get("app_bytes_sent"),
            "open_unix_ms": conn.get("start_unix_ms"),
            "close_unix_ms": conn.get("end_unix_ms"),
            "handshake_ms": None,
            "first_request_ms": None,
            "last_response_end_ms": None,
            "busy_ms": None,
            "idle_ms": None,
            "max_streams": None,
        }
        for e in entries:  # the entry whose fetch opened the connection
            start, end = number(e.get("connectStart")), number(e.get("connectEnd"))
            if start is not None and end is not None and end > start:
                row["handshake_ms"] = end - start
                break
        if timed:
            first, last = min(s for s, _ in timed), max(e for _, e in timed)
            busy = busy_time(timed)
            row |= {
                "first_request_ms": first,
                "last_response_end_ms": last,
                "busy_ms": busy,
                "idle_ms": max(0.0, (last - first) - busy),
                "max_streams": max_overlap(timed),
            }
            spans.append((first, last))
            all_requests += timed
        rows.append(row)
    page: dict[str, float] = {}
    if spans:
        page["max_concurrent_connections"] = float(max_overlap(spans))
        page["max_concurrent_requests"] = float(max_overlap(all_requests))
        page["connections_idle_ms"] = float(sum(r["idle_ms"] or 0.0 for r in rows))
    return rows, page
