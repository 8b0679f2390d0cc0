"""Whether a load began from nothing, as the server and the browser saw it, whatever
the isolation (a new profile per load, or a new context in a running browser:
browser/contexts.py). The reason, when not, fails the load like a protocol fallback:

- every connection that served the page was opened for it: none carried over from an
  earlier load (origin: `opened_before_reset`);
- every TLS handshake was full: the server resumed no session, and no ClientHello
  offered one (a pre-shared key, a TLS 1.2 ticket) or early data (0-RTT), as a browser
  with no state of the server's never does (origin: `tls_handshake`, origin/README.md);
  except on a connection begun after a full handshake of the same load, whose session
  the browser may resume (a new profile does: Chromium over HTTP/1.1), counted as
  `resumed_within_load`. A browser holding an earlier load's session offers it on its
  first connection, which no full handshake of the load precedes;
- nothing came from the browser's HTTP cache (Resource Timing's transfer sizes: the
  client's judge already fails such a load, browser/load.py `from_cache`);
- the first request (the document) reached the server on the protocol a new profile
  reaches it on: with no Alt-Svc or HSTS state, Firefox's HTTP/3 testing mapping and
  Chromium's forced QUIC put HTTP/3 on the first request, and HTTP/1.1 and /2 are the
  only protocols offered otherwise (browser/prefs.py, browser/chromium.py). The
  protocol check fails a load on anything else; this records what the first request
  used.

A server whose records do not say how handshakes went (OpenLiteSpeed's) leaves the TLS
check unverified: recorded, and in context isolation a failed load, since nothing else
then shows that the context started from nothing."""

from __future__ import annotations

from clarke.browser.load import from_cache
from clarke.contract import ServerStats
from clarke.json_value import JsonObject, object_at
from clarke.results.details import IsolationCheck
from clarke.results.server_records import ServerConnection, TlsHandshake
from clarke.run.session.verdicts import served
from clarke.vocab import HttpVersion, Isolation

NO_HANDSHAKE = TlsHandshake()  # a connection whose handshake the server did not report


def _start(conn: ServerConnection) -> float | None:
    at = conn.start_unix_ms
    return float(at) if at is not None else None


def isolation_verdict(
    stats: ServerStats, raw: JsonObject, http: str, isolation: str
) -> IsolationCheck:
    """The load's isolation as the record keeps it (`isolation`): counts, the first
    request's protocol beside a new profile's, and `failure` ("" when the load began
    from nothing). `stats`: the server's /stats; `raw`: the browser's entries."""
    conns = served(stats)
    tls = [c for c in conns if c.tls]
    reported = [c for c in tls if c.tls_handshake is not None]

    def hs(c: ServerConnection) -> TlsHandshake:
        return c.tls_handshake or NO_HANDSHAKE

    # A session resumed or offered on a connection that began after a full handshake of
    # this load may be this load's own (Chromium over HTTP/1.1 resumes the first of its
    # six connections' session on later ones, in a new profile too); one offered with no
    # full handshake of this load before it can only be an earlier load's.
    fulls = [_start(c) for c in reported if hs(c).kind == "full"]
    first_full = min((t for t in fulls if t is not None), default=None)
    own = [c for c in reported if first_full is not None and first_full < (_start(c) or 0)]
    earlier = [c for c in reported if c not in own]
    kinds = [str(hs(c).kind or "unknown") for c in reported]
    nav = object_at(raw, "navigation")
    out = IsolationCheck(
        mode=isolation,
        connections=len(conns),
        carried_over=sum(1 for c in conns if c.opened_before_reset),
        lingering=len(stats.lingering),
        tls_reported=len(reported),
        full_handshakes=kinds.count("full"),
        # Resumed: a session of an earlier load (fails the load), or of this load's own.
        resumed=sum(1 for c in earlier if hs(c).kind == "resumed"),
        resumed_within_load=sum(1 for c in own if hs(c).kind == "resumed"),
        # Handshakes origin could not read whole: how they went is not known.
        unknown_handshakes=sum(
            1 for c in reported if hs(c).kind not in ("full", "resumed") or not hs(c).hello_read
        ),
        psk_offered=sum(1 for c in earlier if hs(c).psk_offered)
        + sum(1 for c in earlier if hs(c).ticket_offered),
        early_data=sum(1 for c in earlier if hs(c).early_data_offered or hs(c).early_data_accepted),
        from_cache=len(from_cache(raw)),
        first_protocol=str(nav.get("nextHopProtocol", "")),
        new_profile_protocol=HttpVersion(http).next_hop_protocol,
    )
    out.failure = _failure(out, len(tls), isolation)
    return out


def _failure(v: IsolationCheck, tls: int, isolation: str) -> str:
    n = v.connections
    if v.carried_over:
        return (
            f"isolation: {v.carried_over} of {n} connections were carried over from an earlier load"
        )
    if v.resumed:
        return (
            f"isolation: the server resumed an earlier TLS session on {v.resumed} of "
            f"{n} connections"
        )
    if v.psk_offered:
        return (
            f"isolation: {v.psk_offered} of {n} ClientHellos offered an earlier TLS "
            "session (a pre-shared key or ticket)"
        )
    if v.early_data:
        return f"isolation: {v.early_data} of {n} connections tried early data (0-RTT)"
    if v.from_cache:
        return f"isolation: {v.from_cache} entries came from the browser's cache"
    unverified = tls - v.tls_reported + v.unknown_handshakes
    if unverified and isolation == Isolation.context:
        return (
            f"isolation: the server does not say how {unverified} of {n} TLS handshakes "
            "went, so a new context cannot be shown to have started from nothing"
        )
    return ""
