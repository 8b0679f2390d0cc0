"""A recorded site on a session's testbed (the campaign's `sites` and `dns_cache`
dimensions): put in force, loaded and judged.

`SiteReplay.ensure(site, cache)` stages the archive where the server reads it
(sites/staging.py), has the server serve it (its agent: placement, certificates,
origin with --site) and starts its names on the testbed through the agents
(run/session/names.py: the gateway's resolver, the terminal's cache if asked, the
client's stub), on either substrate; only what changed is redone, and `none` stops the
names and takes the site off the server. `close()` stops the names and takes the site
off the server whatever happened (the names are the agents' children, so a testbed's
teardown stops them after a crash).

A site's load asks for the archive's start URL on the archive's hosts. It is judged on
what the server saw (`verdict`): every connection of the load over the protocol and
congestion control asked (whichever origin it served), at most the connections per
server to each origin (by the name the client asked for in TLS), origin's replay
counters for the load without a miss (each missed URL named), and nothing but the site
asked of the server. The record gets the load's DNS queries as the gateway side's
resolver (and the terminal's cache) answered them, and per origin what the browser's
Resource Timing says of its lookup and connection (`origins`)."""

from __future__ import annotations

import logging
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urljoin, urlsplit

from clarke import sh
from clarke.agent.agents import Agents, Applied
from clarke.browser.load import LoadResult
from clarke.campaign.dimensions import SITE_NONE
from clarke.campaign.sites import PlannedSite
from clarke.contract import ServerStats
from clarke.errors import ClarkeError, InputError
from clarke.results.details import DnsInLoad, DnsQuery, LoadDetails, OriginRow, Replay, SiteInForce
from clarke.results.metric_families import number, timing_entries
from clarke.results.record import Status
from clarke.results.server_records import ReplayCounters, ReplayMiss, ServerConnection
from clarke.run.session.names import Mark, SiteNames
from clarke.run.session.verdicts import ServerVerdict, served, server_verdict
from clarke.sites import archive, staging
from clarke.sites.placement import place
from clarke.vocab import DnsCache

log = logging.getLogger(__name__)

# Warming a terminal's cache: a floor, and per name two record types, each at most two
# attempts of 5 s (clarke.dns ask).
WARM_TIMEOUT_S = 30.0
WARM_PER_NAME_S = 20.0
MISSES_NAMED = 5  # missed URLs named in a failed load's reason (all are in the record)
NO_LIMIT = 1_000_000
POOLS_PER_HOST = 2  # credentialed and anonymous connections (_site_failure)


@dataclass(frozen=True)
class InForce:
    """The site the testbed serves and names now."""

    given: str  # as the campaign names it
    site: PlannedSite
    staged: str  # its name under the pages directory's sites/
    cache: DnsCache
    nameserver: str  # where the client's stub sends the site's lookups

    def describe(self) -> SiteInForce:
        """The site and its DNS cache as a record keeps them."""
        return SiteInForce.model_validate({**self.site.describe(), "dns_cache": self.cache.value})


class SiteReplay:
    def __init__(self, sites: Mapping[str, PlannedSite]) -> None:
        self.sites = sites
        self.in_force: InForce | None = None
        self.names: SiteNames | None = None
        self._served = False  # whether this session had the server serve a site
        self._agents: Agents | None = None  # the agents it asked (close() asks them again)

    def ensure(
        self,
        given: str,
        cache: DnsCache,
        substrate: Any,
        agents: Agents,
        plan: Any,
    ) -> Applied | None:
        """`given` (a campaign's site, or none) served and named, its lookups cached as
        `cache` says; nothing done where that is in force."""
        if given == SITE_NONE:
            self.stop_names()
            self.in_force = None
            if not self._served:
                return None  # a campaign without sites never asks the server about them
            return agents.ensure_site(None)
        planned = self.sites.get(given)
        if planned is None:
            raise ClarkeError(f"site {given}: not among the sites the campaign was read with")
        now = self.in_force
        if now is not None and (now.given, now.cache) == (given, cache):
            return None
        staged = staging.stage(planned.path, substrate.pages_dir)
        if staged != f"{planned.name}-{planned.digest[: staging.DIGEST_CHARS]}":
            raise InputError(
                f"site {given}: the archive changed since the campaign was read (site.json "
                f"was {planned.digest[:12]}, now staged as {staged}); a campaign replays the "
                "archive it was planned with"
            )
        self._served, self._agents = True, agents
        applied = agents.ensure_site(staged)
        placed = place(archive.read(planned.path).archive, plan.gw_lan.prefix, given)
        if self.names is None:
            self.names = SiteNames(agents)
        self.in_force = None  # until its names answer
        nameserver = self.names.start(placed.zone_names(), cache=cache is DnsCache.terminal)
        self.in_force = InForce(given, planned, staged, cache, nameserver)
        return applied

    def for_load(self, given: str) -> InForce:
        """The site a load of `given` runs on: the one in force (ClarkeError otherwise:
        run/loop/apply.py puts a cell's site in force before its load)."""
        now = self.in_force
        if now is None or now.given != given:
            raise ClarkeError(
                f"site {given}: not in force on the testbed (in force: "
                f"{now.given if now else 'none'})"
            )
        return now

    def warm(self, at_client: Callable[[list[str]], list[str]]) -> None:
        """With the terminal's cache: the site's names looked up there from the client
        first (not part of the load; their A and HTTPS records, as browsers ask), so the
        load starts with them cached, as a terminal that has served them before would
        (for the zone's TTL, 300 s, negative answers too). The first warming after the
        names started crosses the link; later ones are hits."""
        now = self.in_force
        if now is None or now.cache is not DnsCache.terminal:
            return
        ask = [sys.executable, "-m", "clarke.dns", "ask", "--server", now.nameserver]
        ask += ["--type", "A", "--type", "HTTPS"]  # what browsers ask (an HTTPS NODATA too)
        limit = WARM_TIMEOUT_S + WARM_PER_NAME_S * len(now.site.hosts)
        proc = sh.run(at_client([*ask, *now.site.hosts]), check=False, timeout=limit)
        if proc.returncode != 0:
            raise ClarkeError(
                f"site {now.given}: the terminal's DNS cache did not answer every name: "
                f"{(proc.stderr or proc.stdout).strip()[-500:]}"
            )

    def mark(self) -> Mark | None:
        return self.names.mark() if self.names is not None and self.in_force else None

    def after_load(
        self, since: Mark | None, result: LoadResult, failure: str, d: LoadDetails
    ) -> LoadResult:
        """The load after the client: the lookups it made (on each side of the link) and
        a first request the archive missed."""
        d.dns = dns = self.dns(since)
        d.origins = resolver_side(
            d.origins, dns.client_resolver_queries, (result.raw or {}).get("timeOrigin")
        )
        if dns.gateway_queries is not None:  # the lookups that crossed the link
            d.metrics["dns_queries_crossed"] = float(dns.gateway_queries)
        return missed_first(result, failure, d)

    def dns(self, since: Mark | None) -> DnsInLoad:
        """The load's own queries at the gateway side's resolver (and at the terminal's
        cache, with its hits), for the record."""
        if self.names is None or since is None:
            return DnsInLoad()
        crossed = self._queries("gateway", since)
        out = DnsInLoad(
            gateway_queries=len(crossed),
            gateway_names=sorted({f"{q.type} {q.name}" for q in crossed}),
            queries=crossed,
        )
        # The client's own resolver, every query the browser made: with each resolver's
        # own times (`at`, `answered_at`, `upstream_ms`), where a lookup's time went.
        out.client_resolver_queries = self._queries("client", since)
        if self.in_force is not None and self.in_force.cache is DnsCache.terminal:
            cached = self._queries("terminal", since)
            out.terminal_queries = len(cached)
            out.terminal_hits = sum(1 for q in cached if q.hit)
            out.terminal_cache_queries = cached
        return out

    def _queries(self, role: str, since: Mark) -> list[DnsQuery]:
        assert self.names is not None
        return [DnsQuery.model_validate(q) for q in self.names.queries(role, since)]

    def stop_names(self) -> None:
        if self.names is not None:
            self.names.stop()

    def close(self) -> None:
        """The names stopped and, where this session had the server serve a site, the
        site taken off it: a compose stack's server (or an attached netns testbed's)
        outlives the session, and the next campaign finds it serving pages only. A
        server that cannot be reached is said in the log, not raised: closing goes on."""
        self.in_force = None
        try:
            self.stop_names()
        finally:
            agents, self._agents = self._agents, None
            if self._served and agents is not None:
                self._served = False
                try:
                    agents.ensure_site(None)
                except ClarkeError as e:
                    log.warning("the site stays on the server: %s", e)


def browser_own(misses: list[ReplayMiss], start_url: str) -> list[ReplayMiss]:
    """The misses that are the browser's own requests, not the page's: the page's
    origin's /favicon.ico, which Chromium asks for when the page names no icon (an
    archive recorded in Firefox, which does not, lacks it)."""
    favicon = urljoin(start_url, "/favicon.ico")
    return [m for m in misses if m.method == "GET" and m.url == favicon]


@dataclass(frozen=True)
class SiteVerdict:
    """What the server saw of a site's load (verdict)."""

    server: ServerVerdict
    replay: Replay
    connections_per_origin: dict[str, int]

    def into(self, details: LoadDetails) -> None:
        """Into the load's details, in the order a record has them."""
        self.server.into(details)
        details.replay, details.connections_per_origin = self.replay, self.connections_per_origin


def verdict(
    stats: ServerStats, http: str, cc: str, connections_per_server: int, start_url: str
) -> SiteVerdict:
    """What the server saw of a site's load (as run/session/verdicts.server_verdict says
    it for a page, per origin), with `replay`: origin's replay counters for the load, and
    `browser_own`: which of its misses were the browser's own requests (not judged)."""
    conns = served(stats)
    requests = sum(c.requests for c in conns)
    out = server_verdict(stats, http, cc, 0, requests, NO_LIMIT)
    counters = stats.site or ReplayCounters()
    replay = Replay(
        requests=counters.requests,
        exact=counters.exact,
        query=counters.query,
        prefix=counters.prefix,
        missed=counters.missed,
    )
    replay.misses = misses = counters.misses
    replay.browser_own = own = browser_own(misses, start_url)
    missed = counters.missed or 0
    if own:  # judged without them
        missed -= len(own)
        misses = [m for m in misses if m not in own]
    by_origin: dict[str, int] = defaultdict(int)
    for c in conns:
        by_origin[str(c.server_name or "?")] += 1
    app = sum(c.app_bytes_sent for c in conns)
    metrics = out.metrics
    metrics["overhead"] = None  # against what the site sent: below
    wire = metrics.get("wire_bytes")
    if wire is not None and app:
        metrics["overhead"] = (wire - app) / app
    metrics |= {
        "site_requests": float(counters.requests or 0),
        "site_missed": float(missed),
        "origins_reached": float(len(by_origin)),
    }
    # A server that reports no counters for the load (none, or nothing in them) is not
    # judged on them.
    reported = bool(counters.written()) or bool(own)
    judged = (missed, counters.requests, misses) if reported else None
    failure = out.failure or _site_failure(conns, judged, by_origin, connections_per_server)
    return SiteVerdict(replace(out, failure=failure), replay, dict(sorted(by_origin.items())))


def missed_first(result: LoadResult, failure: str, details: LoadDetails) -> LoadResult:
    """A load whose replay missed fails for that reason first: what the browser made of
    a 404 (a resource without a protocol, a broken image) follows from it."""
    replay = details.replay or Replay()
    page_missed = (replay.missed or 0) - len(replay.browser_own)
    if not page_missed or result.status is Status.ok:
        return result
    said = f"{failure}; the browser: {result.reason}" if result.reason else failure
    return result.model_copy(update={"reason": said})


def _site_failure(
    conns: list[ServerConnection],
    counters: tuple[int, int | None, list[ReplayMiss]] | None,
    by_origin: Mapping[str, int],
    connections_per_server: int,
) -> str:
    """`counters`: the replay's misses judged (count, requests, the misses), None when
    the server reports none."""
    elsewhere = [c for c in conns if not c.site]
    if elsewhere:
        n = sum(c.requests for c in elsewhere)
        return f"the server answered {n} requests beside the site's (not on its listeners)"
    if counters is None:
        return "the server reports no replay counters (site) for the load"
    missed, requests, misses = counters
    if missed:
        named = ", ".join(
            f"{m.method if m.has('method') else '?'} {m.url if m.has('url') else '?'}"
            for m in misses[:MISSES_NAMED]
        )
        more = f" and {missed - MISSES_NAMED} more" if missed > MISSES_NAMED else ""
        return (
            f"the replay missed {missed} of {requests} requests (not in the archive): {named}{more}"
        )
    # A browser keeps two pools per host, each within the limit: one for requests that
    # carry credentials, one for those that do not (fonts, fetch() with credentials
    # omitted), in Firefox (the connection's anonymous flag) and Chromium (privacy
    # mode). The server cannot tell a connection's pool.
    bound = POOLS_PER_HOST * connections_per_server
    over = {o: n for o, n in by_origin.items() if n > bound}
    if over:
        said = ", ".join(f"{o} {n}" for o, n in over.items())
        return (
            f"requests came on more connections than the browser's {POOLS_PER_HOST} pools of "
            f"{connections_per_server} per server allow: {said}"
        )
    return ""


def origins(raw: Mapping[str, object]) -> tuple[dict[str, OriginRow], dict[str, float]]:
    """Per origin (host), from the browser's Resource Timing: its requests, its
    protocols, its first lookup's time (domainLookupEnd - domainLookupStart of its first
    entry that looked up: 0 where the browser had the address already) and its first
    connection's set-up (connectEnd - connectStart, TLS included); and the load's sums."""
    entries = timing_entries(raw)
    entries = sorted(
        (e for e in entries if e.get("name")), key=lambda e: number(e.get("startTime")) or 0.0
    )
    rows: dict[str, OriginRow] = {}
    for e in entries:
        host = urlsplit(str(e["name"])).hostname or "?"
        row = rows.setdefault(host, _new_row())
        row.requests += 1
        proto = str(e.get("nextHopProtocol") or "")
        if proto and proto not in row.protocols:
            row.protocols.append(proto)
        lookup = _span(e, "domainLookupStart", "domainLookupEnd")
        if lookup is not None and lookup > 0 and row.dns_ms is None:
            row.dns_ms = lookup
            row.dns_start_ms = number(e.get("domainLookupStart"))
        connect = _span(e, "connectStart", "connectEnd")
        if connect is not None and connect > 0 and not row.has("connect_ms"):
            row.connect_ms = connect
    looked = [r.dns_ms for r in rows.values() if r.dns_ms is not None]
    metrics = {
        "origins": float(len(rows)),
        "dns_lookups": float(len(looked)),
        "dns_ms_sum": float(sum(looked)),
        "dns_ms_max": float(max(looked, default=0.0)),
    }
    return rows, metrics


def _new_row() -> OriginRow:
    return OriginRow(requests=0, protocols=[], dns_ms=None)


def server_side(
    rows: dict[str, OriginRow],
    server_connections: list[ServerConnection],
    time_origin: float | None,
) -> dict[str, OriginRow]:
    """`rows` (origins()) with, per origin, what the server saw of the load's connections
    to it (by the name the client asked for in TLS): `server_connections`, their
    handshakes by kind (full, resumed, unknown: origin reads every ClientHello) and
    `server_opened_ms`, when its first connection was accepted, from the navigation's
    start (the browser's clock and the server's are the host's one clock on a testbed)."""
    out = {host: row.model_copy() for host, row in rows.items()}
    for c in sorted(server_connections, key=lambda c: float(c.start_unix_ms or 0)):
        host = str(c.server_name or "?")
        row = out.setdefault(host, _new_row())
        row.server_connections += 1
        kind = str((c.tls_handshake.kind if c.tls_handshake else None) or "unknown")
        row.handshakes = {**row.handshakes, kind: row.handshakes.get(kind, 0) + 1}
        started = c.start_unix_ms
        if not row.has("server_opened_ms") and time_origin and started is not None:
            row.server_opened_ms = float(started) - time_origin
    return out


# The browser's times are rounded (Firefox: to 1 ms or coarser) where the resolvers'
# are not: a query answered this much after the browser's lookup ended still served it.
LOOKUP_TIME_SLACK_MS = 2.0


def resolver_side(
    rows: dict[str, OriginRow],
    client_queries: list[DnsQuery],
    time_origin: float | None,
) -> dict[str, OriginRow]:
    """`rows` (origins()) with, per origin whose first lookup the browser timed, when the
    client's own resolver took that lookup's A query up (`resolver_taken_ms`) and had its
    answer (`resolver_answered_ms`), from the navigation's start: of the lookup's
    `dns_ms`, the time before the first is the browser's and the host's (its resolver
    thread, the query's way to the resolver), the time between them the resolvers' and
    the link's, the time after the answer's way back. The query is the last one for that
    name answered by the lookup's end."""
    out = {host: row.model_copy() for host, row in rows.items()}
    if not time_origin:
        return out
    for host, row in out.items():
        start, took = row.dns_start_ms, row.dns_ms
        if start is None or took is None:
            continue
        end = float(start) + float(took) + LOOKUP_TIME_SLACK_MS
        served_by = [
            (q, answered)
            for q in client_queries
            if q.name == host
            and q.type == "A"
            and (answered := q.answered_at) is not None
            and float(answered) * 1000 - time_origin <= end
        ]
        if served_by:
            q, answered = max(served_by, key=lambda qa: float(qa[1]))
            row.resolver_taken_ms = float(q.at or 0) * 1000 - time_origin
            row.resolver_answered_ms = float(answered) * 1000 - time_origin
    return out


def _span(entry: Mapping[str, object], start: str, end: str) -> float | None:
    a, b = entry.get(start), entry.get(end)
    if isinstance(a, int | float) and isinstance(b, int | float) and a > 0:
        return float(b) - float(a)
    return None
