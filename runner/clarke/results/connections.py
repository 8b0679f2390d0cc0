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
and the most requests outstanding at once, and over the load (navigation start to PLT)
the connection-usage study's [K] figures:

    load_idle_ms           the time no request of the page is outstanding on any
                           connection (handshakes and the browser's own work included)
    net_transfer_ms        PLT minus load_idle_ms
    effective_concurrency  the connections with a request outstanding, averaged over
                           net_transfer_ms (each connection weighted by its time busy)

and the parallel-connections study's [C] share of connection set-up in it:

    setup_wait_ms          the part of load_idle_ms in which a connection is being set
                           up (connectStart to connectEnd: TCP's and TLS's handshakes)"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from clarke.results.details import ConnectionRow
from clarke.results.metric_families import number, timing_entries
from clarke.results.server_records import ServerConnection

Interval = tuple[float, float]


def _timed(entry: Mapping[str, object]) -> Interval | None:
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


def overlap_steps(intervals: Iterable[Interval]) -> tuple[list[float], list[int]]:
    """How many of `intervals` are open over time, as steps: (times, how many from each
    time on), from 0 (one ending as another starts: not both)."""
    spans = list(intervals)
    events = sorted(
        [(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
        key=lambda ev: (ev[0], ev[1]),  # ends before starts at the same instant
    )
    times, counts, now = [0.0], [0], 0
    for t, step in events:
        now += step
        if times[-1] == t:
            counts[-1] = now
        else:
            times.append(t)
            counts.append(now)
    return times, counts


def max_overlap(intervals: Iterable[Interval]) -> int:
    """The most intervals open at one instant (one ending as another starts: not both)."""
    return max(overlap_steps(intervals)[1])


def load_activity(
    per_connection: list[list[Interval]], plt_ms: float, setups: list[Interval] | None = None
) -> dict[str, float]:
    """[K]'s idle time, net transfer time and effective concurrency of one load, from
    its requests' intervals per connection, over [0, plt_ms]; what a request has in
    flight after PLT is not the load's. With the connections' set-up intervals (none
    timed: no figure), [C]'s: the idle time in which one was being set up."""

    def within(spans: list[Interval]) -> list[Interval]:
        return [(max(0.0, s), min(e, plt_ms)) for s, e in spans if s < plt_ms and e > 0]

    requests = within([span for spans in per_connection for span in spans])
    net = busy_time(requests)
    figures = {"load_idle_ms": plt_ms - net, "net_transfer_ms": net}
    if net > 0:
        busy = sum(busy_time(within(spans)) for spans in per_connection)
        figures["effective_concurrency"] = busy / net
    if setups:
        # The set-ups' time outside every request's: the union of both less the requests'.
        figures["setup_wait_ms"] = busy_time(requests + within(setups)) - net
    return figures


def _received(conn: ServerConnection) -> float | None:
    transport = conn.transport
    tcp = transport.tcp if transport is not None else None
    quic = transport.quic if transport is not None else None
    return number(tcp.bytes_received if tcp else None) or number(
        quic.udp_bytes_received if quic else None
    )


def connection_rows(
    server_connections: Iterable[ServerConnection],
    raw: Mapping[str, object],
    plt_ms: float | None,
) -> tuple[list[ConnectionRow], dict[str, float]]:
    """(one row per connection that carried a request, the load's concurrency figures;
    [K]'s only with a PLT). Timing fields are None for a connection none of whose
    requests could be timed (an engine without resource timings)."""
    by_path: dict[str, Mapping[str, object]] = {}
    for entry in timing_entries(raw):
        if entry.get("name"):
            by_path.setdefault(urlsplit(str(entry["name"])).path, entry)
    rows: list[ConnectionRow] = []
    spans: list[Interval] = []
    per_connection: list[list[Interval]] = []
    setups: list[Interval] = []
    for conn in server_connections:
        if conn.requests <= 0:
            continue
        entries = [by_path[p] for p in conn.request_paths if p in by_path]
        timed = [t for t in (_timed(e) for e in entries) if t is not None]
        row = ConnectionRow(
            id=conn.id,
            protocol=conn.protocol,
            requests=conn.requests,
            requests_timed=len(timed),
            bytes_sent=conn.wire_bytes_sent,
            bytes_received=_received(conn),
            app_bytes_sent=conn.app_bytes_sent if conn.has("app_bytes_sent") else None,
            open_unix_ms=conn.start_unix_ms,
            close_unix_ms=conn.end_unix_ms,
            handshake_ms=None,
            first_request_ms=None,
            last_response_end_ms=None,
            busy_ms=None,
            idle_ms=None,
            max_streams=None,
        )
        for e in entries:  # the entry whose fetch opened the connection
            start, end = number(e.get("connectStart")), number(e.get("connectEnd"))
            if start is not None and end is not None and end > start:
                row.handshake_ms = end - start
                setups.append((start, end))
                break
        if timed:
            first, last = min(s for s, _ in timed), max(e for _, e in timed)
            busy = busy_time(timed)
            row.first_request_ms, row.last_response_end_ms = first, last
            row.busy_ms, row.idle_ms = busy, max(0.0, (last - first) - busy)
            row.max_streams = max_overlap(timed)
            spans.append((first, last))
            per_connection.append(timed)
        rows.append(row)
    page: dict[str, float] = {}
    if spans:
        page["max_concurrent_connections"] = float(max_overlap(spans))
        page["max_concurrent_requests"] = float(max_overlap(r for rs in per_connection for r in rs))
        page["connections_idle_ms"] = float(sum(r.idle_ms or 0.0 for r in rows))
        if plt_ms is not None:
            page |= load_activity(per_connection, plt_ms, setups)
    return rows, page
