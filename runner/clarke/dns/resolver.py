"""Three resolvers on dnslib, each logging every query it answers as one JSON line:

- `Authoritative`: answers A queries for its zone's names, NXDOMAIN for any other name
  and an empty answer for other types of a known name (the testbed has no IPv6), so a
  browser never waits for a lookup nobody will answer. Negative answers carry an SOA in
  their authority section, as an authoritative server's do (RFC 2308, section 3), so a
  cache may keep them.
- `Caching`: a terminal's DNS cache. Forwards what it has not got (or what has expired)
  to an upstream resolver, sending from a chosen address (the terminal's LAN address,
  which the far side routes back through the link), and answers repeats from memory
  until their TTL runs out. Negative answers (NXDOMAIN, or no record of the type asked)
  are kept for the SOA's negative TTL, the lesser of its TTL and MINIMUM (RFC 2308,
  section 5); one without an SOA is not kept. A browser's HTTPS-record lookups, which
  the zone answers empty, so cross the link once per TTL, as with a terminal's real
  cache, not once per load.
- `Stub`: the client's own resolver during a recorded site's load. Forwards the site's
  names only, each query as it comes (no cache), and answers any other name NXDOMAIN
  itself, so what a browser asks besides the page (its own host name, Remote Settings,
  which release builds of Firefox poll whatever their preferences say) never crosses the
  link, as without a site no name but the test host resolves in the client.

Logging happens after the reply is built and before it is sent; a line's `at` is when
the resolver took the query up, its `answered_at` when the reply was ready (time.time(),
s): the difference is the resolver's own time, with the upstream's answer for a query it
forwarded (`upstream_ms`)."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from dnslib import QTYPE, RCODE, RR, SOA, A, DNSLabel, DNSRecord
from dnslib.server import BaseResolver, DNSHandler

from clarke.json_value import JsonObject
from clarke.sites.zone import Zone

UPSTREAM_TIMEOUT_S = 10.0


class QueryLog:
    """JSON lines, one per query, flushed as written (a crash loses none)."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._file: IO[str] = path.open("a", encoding="utf-8")

    def write(self, entry: JsonObject) -> None:
        with self._lock:
            self._file.write(json.dumps(entry, sort_keys=True) + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _question(request: DNSRecord) -> tuple[str, str]:
    q = request.q
    return str(q.qname).lower().rstrip("."), QTYPE.get(q.qtype, str(q.qtype))


def _client(handler: DNSHandler) -> str:
    return str(handler.client_address[0])


def _answers(reply: DNSRecord) -> list[str]:
    return [str(rr.rdata) for rr in reply.rr]


def _entry(
    at: float, handler: DNSHandler, question: tuple[str, str], reply: DNSRecord, **more: Any
) -> JsonObject:
    """One query's log line: when it came, from whom, what it asked, what it got."""
    name, qtype = question
    return {
        "at": at,
        "answered_at": time.time(),
        "client": _client(handler),
        "name": name,
        "type": qtype,
        "rcode": RCODE.get(reply.header.rcode),
        "answer": _answers(reply),
        **more,
    }


def _apex(name: str) -> str:
    """Where a name's SOA sits: its last two labels. A zone here is a set of host names
    from several domains, each served as its own; the apex only names the SOA."""
    return ".".join(name.split(".")[-2:]) or "."


def _soa(name: str, ttl: int) -> RR:
    apex = DNSLabel(_apex(name))
    record = SOA(
        mname=DNSLabel(f"ns.{apex}"),
        rname=DNSLabel(f"hostmaster.{apex}"),
        times=(1, 3600, 600, 86_400, ttl),  # serial, refresh, retry, expire, minimum
    )
    return RR(apex, QTYPE.SOA, rdata=record, ttl=ttl)


def negative_ttl(reply: DNSRecord) -> int:
    """How long a negative answer may be cached (RFC 2308, section 5): the lesser of the
    SOA's own TTL and its MINIMUM; 0 without an SOA in the authority section."""
    for rr in reply.auth:
        if rr.rtype == QTYPE.SOA:
            return min(int(rr.ttl), int(rr.rdata.times[4]))
    return 0


class Authoritative(BaseResolver):
    def __init__(self, zone: Zone, log: QueryLog) -> None:
        self.zone, self.log = zone, log

    def resolve(self, request: DNSRecord, handler: DNSHandler) -> DNSRecord:
        at = time.time()
        name, qtype = _question(request)
        reply = request.reply()  # sets QR, RA and copies the question
        reply.header.aa = 1
        address = self.zone.lookup(name)
        if address is None:
            reply.header.rcode = RCODE.NXDOMAIN
        elif qtype == "A":
            reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(address), ttl=self.zone.ttl))
        if not reply.rr:
            reply.add_auth(_soa(name, self.zone.ttl))
        self.log.write(_entry(at, handler, (name, qtype), reply))
        return reply


@dataclass
class _Cached:
    reply: DNSRecord
    expires: float


@dataclass
class Caching(BaseResolver):
    upstream: str
    source: str
    log: QueryLog
    port: int = 53
    _cache: dict[tuple[str, str], _Cached] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def resolve(self, request: DNSRecord, handler: DNSHandler) -> DNSRecord:
        at = time.time()
        key = _question(request)
        with self._lock:
            cached = self._cache.get(key)
        hit = cached is not None and cached.expires > time.monotonic()
        more: dict[str, float] = {}
        if hit:
            assert cached is not None
            reply = DNSRecord.parse(cached.reply.pack())
            reply.header.id = request.header.id
        else:
            reply, more["upstream_ms"] = _forward(request, self.upstream, self.port, self.source)
            if reply.rr:
                ttl = min(rr.ttl for rr in reply.rr) if reply.header.rcode == RCODE.NOERROR else 0
            elif reply.header.rcode in (RCODE.NOERROR, RCODE.NXDOMAIN):
                ttl = negative_ttl(reply)
            else:  # a server failure or a refusal is never kept
                ttl = 0
            if ttl > 0:
                with self._lock:
                    self._cache[key] = _Cached(reply, time.monotonic() + ttl)
        self.log.write(_entry(at, handler, key, reply, hit=hit, **more))
        return reply


def _forward(request: DNSRecord, upstream: str, port: int, source: str) -> tuple[DNSRecord, float]:
    """(the upstream's reply, or SERVFAIL where it did not answer in time: said so, never
    hung on; how long it took in ms)."""
    asked = time.monotonic()
    try:
        reply = DNSRecord.parse(_send_from(request, upstream, port, source))
    except OSError:
        reply = request.reply()
        reply.header.rcode = RCODE.SERVFAIL
    return reply, (time.monotonic() - asked) * 1000


def _send_from(request: DNSRecord, upstream: str, port: int, source: str) -> bytes:
    """One UDP exchange with the upstream resolver from `source` ("" for any address:
    dnslib's own send cannot choose it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((source, 0))
        # Connected, so a refused port comes back as an error at once, and only the
        # upstream's datagrams reach this socket.
        s.connect((upstream, port))
        s.settimeout(UPSTREAM_TIMEOUT_S)
        s.send(request.pack())
        while True:
            data = s.recv(65535)
            if DNSRecord.parse(data).header.id == request.header.id:
                return data


@dataclass
class Stub(BaseResolver):
    names: frozenset[str]
    upstream: str
    source: str
    log: QueryLog
    port: int = 53

    def resolve(self, request: DNSRecord, handler: DNSHandler) -> DNSRecord:
        at = time.time()
        name, qtype = _question(request)
        forwarded = name in self.names
        more: dict[str, float] = {}
        if forwarded:
            reply, more["upstream_ms"] = _forward(request, self.upstream, self.port, self.source)
        else:
            reply = request.reply()
            reply.header.rcode = RCODE.NXDOMAIN
        self.log.write(_entry(at, handler, (name, qtype), reply, forwarded=forwarded, **more))
        return reply
