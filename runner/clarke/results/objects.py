"""The order a page's objects were asked for and completed in, per load
(docs/scheduling.md): one row per request, joined from the server's record of each
exchange (origin: its stream, the order it arrived in, the priority it received, when its
last byte left; exchanges.rs) and the browser's resource timing of the same request:
the same path (each path of a test page is asked for once per load) on the same host,
where the server records the origin asked (a replayed site's exchanges carry their
`authority`: two origins of a site may serve one path).

    request_order             1.. in the order the server received the requests (the
                              browser's requestStart where the server keeps no record)
    completion_order          1.. in the order the browser received them whole
                              (responseEnd)
    server_start_ms           when the server handed its first body bytes to the protocol
                              stack (from the navigation's start)
    server_completion_order   1.. in the order their last bytes left the server: HTTP/2 the
                              DATA frame with END_STREAM written, HTTP/3 the STREAM frame
                              with FIN first sent (the last byte acknowledged where origin
                              did not note that), HTTP/1.1 the last byte handed to hyper

and, per load, `completion_order_tau`: Kendall's tau-b between the objects' request and
completion orders (1: every object completed in the order asked; the page's HTML left out,
as it is asked for before its objects exist)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlsplit

from clarke.results.details import ObjectRow, PrioritySignals
from clarke.results.metric_families import number, timing_entries
from clarke.results.server_records import Exchange, ServerConnection


def _server_done(x: Exchange) -> float | None:
    """When a response's last bytes left the server, by what the server records for it."""
    for v in (x.written_last_unix_ms, x.fin_sent_unix_ms, x.acked_unix_ms, x.handed_last_unix_ms):
        if v is not None:
            return number(v)
    return None


def _host(authority: str | None) -> str | None:
    """The host of an exchange's `authority` (host[:port], an IPv6 literal in brackets),
    lowercased; None when the server did not record one."""
    if not authority:
        return None
    return (urlsplit(f"//{authority}").hostname or str(authority)).lower()


def _ranks(values: Sequence[float | None]) -> list[int | None]:
    """1-based ranks of the values given (ties by position); None stays None."""
    order = sorted((v, i) for i, v in enumerate(values) if v is not None)
    ranks: list[int | None] = [None] * len(values)
    for rank, (_, i) in enumerate(order, start=1):
        ranks[i] = rank
    return ranks


def kendall_tau_b(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Kendall's tau-b of paired values; None for fewer than two pairs or a constant side."""
    n = len(xs)
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + ties_x) * (concordant + discordant + ties_y)) ** 0.5
    if n < 2 or denominator == 0:
        return None
    return (concordant - discordant) / denominator


def object_rows(
    server_connections: Iterable[ServerConnection],
    raw: Mapping[str, object],
    page_path: str,
    page_host: str | None = None,
) -> tuple[list[ObjectRow], dict[str, float]]:
    """(one row per request of the page, the load's order metric). `page_path`: the
    page's HTML (e.g. /triangular-1m/), left out of the metric; on `page_host` only,
    where given (a site's start page: another origin may serve the same path)."""
    origin = number(raw.get("timeOrigin"))
    timing: dict[str, Mapping[str, object]] = {}  # by path: a test page's only host
    on_host: dict[tuple[str, str], Mapping[str, object]] = {}  # by host and path: a site's
    for entry in timing_entries(raw):
        if entry.get("name"):
            url = urlsplit(str(entry["name"]))
            timing.setdefault(url.path, entry)
            on_host.setdefault(((url.hostname or "").lower(), url.path), entry)
    rows: list[ObjectRow] = []
    for conn in server_connections:
        for x in conn.exchanges:
            host = _host(x.authority)
            if host is None:
                entry = timing.get(str(x.path), {})
            else:
                entry = on_host.get((host, str(x.path)), {})
            done = _server_done(x)
            began = number(x.handed_first_unix_ms)
            row = ObjectRow(path=x.path)
            if host is not None:
                row.host = host
            row.connection, row.protocol = conn.id, conn.protocol
            row.stream, row.priority = x.stream, x.priority
            row.urgency, row.incremental, row.rfc7540 = x.urgency, x.incremental, x.rfc7540
            row.priority_updates = [u.value for u in x.priority_updates]
            row.bytes, row.request_unix_ms = x.bytes, number(x.request_unix_ms)
            row.server_start_ms = began - origin if began is not None and origin else None
            row.server_done_ms = done - origin if done is not None and origin else None
            row.request_start_ms = number(entry.get("requestStart"))
            row.response_end_ms = number(entry.get("responseEnd"))
            # origin, HTTP/2: its end was not written in time and the next response went
            # first (docs/scheduling.md)
            row.turn_released_unwritten = x.turn_released_unwritten
            rows.append(row)
    if not rows:  # a server that keeps no exchanges: the browser's own order
        for path, entry in timing.items():
            if entry is raw.get("navigation"):
                continue
            rows.append(
                ObjectRow(
                    path=path,
                    request_unix_ms=None,
                    server_start_ms=None,
                    server_done_ms=None,
                    request_start_ms=number(entry.get("requestStart")),
                    response_end_ms=number(entry.get("responseEnd")),
                )
            )
    by_server = all(r.request_unix_ms is not None for r in rows)
    asked = _ranks([r.request_unix_ms if by_server else r.request_start_ms for r in rows])
    # Rows in request order; ranks computed over those in the same order.
    for r, rank in zip(rows, asked, strict=True):
        r.request_order = rank
    rows.sort(key=lambda r: (r.request_order is None, r.request_order or 0))
    for r, rank in zip(rows, _ranks([r.response_end_ms for r in rows]), strict=True):
        r.completion_order = rank
    for r, rank in zip(rows, _ranks([r.server_done_ms for r in rows]), strict=True):
        r.server_completion_order = rank
    objects = [
        r
        for r in rows
        if not (r.path == page_path and (r.host if r.has("host") else page_host) == page_host)
        and r.request_order is not None
        and r.completion_order is not None
    ]
    tau = kendall_tau_b(
        [float(r.request_order or 0) for r in objects],
        [float(r.completion_order or 0) for r in objects],
    )
    return rows, ({} if tau is None else {"completion_order_tau": tau})


def signals_received(
    server_connections: Iterable[ServerConnection], asked: str = "default"
) -> PrioritySignals:
    """What the load's browser told the server about priorities, as the server saw it:
    the Priority header values, the number of each kind of priority frame, the client's
    settings (per connection, HTTP/2 and HTTP/3 identifiers as hex); `asked`: the
    browser's priority signals setting; `observed`: whether the server records signals
    (origin does, OpenLiteSpeed does not)."""
    headers: dict[str, int] = {}
    rfc7540_headers = rfc7540_frames = priority_updates = 0
    settings: list[dict[str, int]] = []
    observed = False
    for conn in server_connections:
        observed = observed or conn.has("signals")
        signals = conn.signals
        if signals is not None:
            rfc7540_headers += signals.rfc7540_headers
            rfc7540_frames += signals.rfc7540_frames
            priority_updates += signals.priority_updates
            if signals.settings:
                settings.append(signals.settings)
        for x in conn.exchanges:
            label = "(none)" if x.priority is None else str(x.priority)
            headers[label] = headers.get(label, 0) + 1
    return PrioritySignals(
        asked=asked,
        observed=observed,
        priority_headers=headers,
        rfc7540_headers=rfc7540_headers,
        rfc7540_frames=rfc7540_frames,
        priority_updates=priority_updates,
        settings=settings,
    )


def signals_verdict(asked: str, received: PrioritySignals) -> str:
    """Why the signals the server saw are not the ones the browser was set to send, or
    "" (also when the server records none: nothing to judge)."""
    if asked == "default" or not received.observed:
        return ""
    headers = {k: v for k, v in received.priority_headers.items() if k != "(none)"}
    sent = []
    if headers:
        sent.append(f"Priority headers {headers}")
    if received.priority_updates:
        sent.append(f"{received.priority_updates} PRIORITY_UPDATE frames")
    if asked == "rfc7540-tree" and not received.rfc7540_frames:
        sent.append("no RFC 7540 PRIORITY frame")
    if not sent:
        return ""
    return f"priority signals {asked}: the server saw {'; '.join(sent)}"
