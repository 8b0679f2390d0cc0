"""What a record's `details` hold (docs/results.md): what the load really used, as the
runner verified it, part by part. The session builds them (run/session/session.py), the
campaign loop adds what the browser said (run/loop/loop.py `to_record`), and readers
take them as attributes.

Every part is a Part (results/part.py): it writes the keys that were set, in the order
they were set, so a journal line is the one a dict of the same keys wrote. A part a
load did not have (no site, no cross traffic, a load that failed before the server was
asked) is not set and not written; reading it gives its default (None, or empty), which
is also what a record written before the part existed reads as. A key no part knows (one
no longer written, or a later Clarke's) is kept as it was read and written back.

What the server, the link roles and the PEPs said is theirs (results/server_records.py,
results/station_records.py); the browser's Resource Timing entries (`resources`) are
the engine's own, kept as JSON (JsonObject): their keys differ per engine and version."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from clarke.results.part import JsonObject, Part
from clarke.results.server_records import (
    ReplayMiss,
    Rfc7540Priority,
    ServerConnection,
    UnixMs,
)
from clarke.results.station_records import LinkRoleStats, PepStationStats


class LinkInForce(Part):
    """The link profile the load was asked to run on (the link roles confirmed it)."""

    profile: str = ""
    profile_sha256: str = ""


class PerDirection(Part):
    model_config = ConfigDict(extra="allow", serialize_by_alias=True, validate_by_name=True)

    forward: int | None = None
    return_: int | None = Field(default=None, alias="return")


class PepAsked(Part):
    """What the stations were asked to run: their POST /pep/config as sent
    (contract.PepConfig.body(); without a PEP, its name only)."""

    preset: str | None = None
    mode: str | None = None
    hop_cc: str | None = None
    hop_buffer_bytes: int | None = None
    hop_initial_window: PerDirection | None = None
    hop_max_pacing_rate: PerDirection | None = None
    pool_size: int | None = None
    pool_max_opening: int | None = None
    pool_spare: int | None = None
    name: str | None = None


class PepInLoad(Part):
    """The PEP the load asked for; on the netns substrate what the stations said of the
    load and what they were asked to run."""

    name: str = ""
    stations: dict[str, PepStationStats] | None = None
    settings: PepAsked | None = None


class SiteInForce(Part):
    """The recorded site loaded (campaign.sites.PlannedSite.describe) and the DNS cache."""

    path: str = ""
    name: str = ""
    digest: str = ""
    content_digest: str = ""
    start_url: str = ""
    origins: int = 0
    exchanges: int = 0
    dns_cache: str = ""


class RttSummary(Part):
    n: int = 0
    p50: float | None = None
    max: float | None = None


class CrossTrafficDuring(Part):
    """The cross traffic during the load (campaign.cross.CrossTraffic.describe), what
    it achieved, and how it was confirmed running (run/session/cross.py); `none`'s name
    and label only."""

    name: str = ""
    label: str = ""
    flows: int | None = None
    direction: str | None = None
    rate_mbps: float | None = None
    server: str | None = None
    achieved_mbps: dict[str, float] = Field(default_factory=dict)
    during_s: float | None = None
    confirmed_after_s: float | None = None
    settled_after_s: float | None = None
    rate_at_start_mbps: dict[str, float] = Field(default_factory=dict)
    cc: list[str] = Field(default_factory=list)  # the flows' senders' (TCP kinds)
    ping_rtt_ms: RttSummary | None = None  # rrul's probe


class Replay(Part):
    """origin's replay counters of a recorded site for the load, and which of its misses
    were the browser's own requests (not judged: run/session/site.py)."""

    requests: int | None = None
    exact: int | None = None
    query: int | None = None
    prefix: int | None = None
    missed: int | None = None
    misses: list[ReplayMiss] = Field(default_factory=list)
    browser_own: list[ReplayMiss] = Field(default_factory=list)


class OriginRow(Part):
    """A recorded site's origin in one load (run/session/site.py origins, server_side,
    resolver_side)."""

    requests: int = 0
    protocols: list[str] = Field(default_factory=list)
    dns_ms: float | None = None
    dns_start_ms: float | None = None
    connect_ms: float | None = None
    server_connections: int = 0
    handshakes: dict[str, int] = Field(default_factory=dict)
    server_opened_ms: float | None = None
    resolver_taken_ms: float | None = None
    resolver_answered_ms: float | None = None


class IsolationCheck(Part):
    """Whether the load began from nothing (run/session/isolation.py)."""

    mode: str = ""
    connections: int = 0
    carried_over: int = 0
    lingering: int = 0
    tls_reported: int = 0
    full_handshakes: int = 0
    resumed: int = 0
    resumed_within_load: int = 0
    unknown_handshakes: int = 0
    psk_offered: int = 0
    early_data: int = 0
    from_cache: int = 0
    first_protocol: str = ""
    new_profile_protocol: str = ""
    failure: str = ""


class Timeline(Part):
    """Where on the link's schedule the load fell (run/session/timeline.py); nothing set
    on a link without a schedule."""

    schedule_id: str | None = None
    step_index: int | None = None
    link_time_s: float | None = None
    navigation_unix_ms: float | None = None
    slot_phase_s: float | None = None


class ConnectionRow(Part):
    """One connection of the load (results/connections.py)."""

    id: int | str | None = None
    protocol: str | None = None
    requests: int | None = None
    requests_timed: int = 0
    bytes_sent: int | None = None
    bytes_received: float | None = None
    app_bytes_sent: int | None = None
    open_unix_ms: UnixMs | None = None
    close_unix_ms: UnixMs | None = None
    handshake_ms: float | None = None
    first_request_ms: float | None = None
    last_response_end_ms: float | None = None
    busy_ms: float | None = None
    idle_ms: float | None = None
    max_streams: int | None = None


class ObjectRow(Part):
    """One request of the load, in request order (results/objects.py)."""

    path: str | None = None
    host: str | None = None
    connection: int | str | None = None
    protocol: str | None = None
    stream: int | None = None
    priority: str | None = None
    urgency: int | None = None
    incremental: bool | None = None
    rfc7540: Rfc7540Priority | None = None
    priority_updates: list[str | None] = Field(default_factory=list)
    bytes: int | None = None
    request_unix_ms: float | None = None
    server_start_ms: float | None = None
    server_done_ms: float | None = None
    request_start_ms: float | None = None
    response_end_ms: float | None = None
    turn_released_unwritten: bool = False
    request_order: int | None = None
    completion_order: int | None = None
    server_completion_order: int | None = None


class PrioritySignals(Part):
    """The priority signals the server saw (results/objects.py signals_received)."""

    asked: str = "default"
    observed: bool = False
    priority_headers: dict[str, int] = Field(default_factory=dict)
    rfc7540_headers: int = 0
    rfc7540_frames: int = 0
    priority_updates: int = 0
    settings: list[dict[str, int]] = Field(default_factory=list)


class DnsQuery(Part):
    """A query a resolver of the testbed answered (dns/resolver.py)."""

    at: float | None = None
    answered_at: float | None = None
    client: str | None = None
    name: str | None = None
    type: str | None = None
    rcode: str | None = None
    answer: list[str] = Field(default_factory=list)
    hit: bool | None = None  # the terminal's cache
    upstream_ms: float | None = None


class DnsInLoad(Part):
    """A recorded site's load's DNS queries (run/session/site.py SiteReplay.dns)."""

    gateway_queries: int | None = None
    gateway_names: list[str] = Field(default_factory=list)
    queries: list[DnsQuery] = Field(default_factory=list)
    client_resolver_queries: list[DnsQuery] = Field(default_factory=list)
    terminal_queries: int | None = None
    terminal_hits: int | None = None
    terminal_cache_queries: list[DnsQuery] = Field(default_factory=list)


class PcapSummary(Part):
    interface: str | None = None
    bytes: int | None = None
    truncated: bool = False
    packets_captured: int | None = None
    packets_dropped: int | None = None


class CaptureKept(Part):
    """What the load's capture kept, where (run/session/captures.py)."""

    pcap: PcapSummary | None = None
    left_out: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    kept: bool = False
    dir: str | None = None
    files: dict[str, int] = Field(default_factory=dict)


class PhasesMs(Part):
    """Where the load's time went: the runner's phases and the client's (clarke.timing)."""

    runner: dict[str, float] = Field(default_factory=dict)
    client: dict[str, float] = Field(default_factory=dict)


class Netlog(Part):
    """Chromium's NetLog summary (browser/chromium.py netlog_summary)."""

    quic_cc: list[str] = Field(default_factory=list)
    reached: list[str] = Field(default_factory=list)


class LoadDetails(Part):
    """A record's details, in the order a load sets them."""

    # What the browser said (the campaign loop's to_record).
    protocols: dict[str, str] = Field(default_factory=dict)  # URL -> nextHopProtocol
    lcp_element: str | None = None
    wall_ms: float = 0.0
    # The testbed failed, not the load: no retry is used up (run/loop/loop.py).
    infrastructure: bool = False
    substrate: str = ""
    pep: PepInLoad | None = None
    link: LinkInForce | None = None
    site: SiteInForce | None = None
    aimed_slot_phase_s: float | None = None
    cross_traffic: CrossTrafficDuring | None = None
    failure: str = ""  # why the load does not count, as the runner judged it
    # The session's metrics of the load: the record keeps them with the browser's in
    # `metrics`, never here.
    metrics: dict[str, float | None] = Field(default_factory=dict, exclude=True)
    server_connections: list[ServerConnection] = Field(default_factory=list)
    server_cc: list[str] = Field(default_factory=list)
    replay: Replay | None = None
    connections_per_origin: dict[str, int] = Field(default_factory=dict)
    origins: dict[str, OriginRow] = Field(default_factory=dict)
    isolation: IsolationCheck | None = None
    link_stats: dict[str, LinkRoleStats] = Field(default_factory=dict)
    timeline: Timeline | None = None
    per_connection: list[ConnectionRow] = Field(default_factory=list)
    objects: list[ObjectRow] = Field(default_factory=list)
    priority_signals: PrioritySignals | None = None
    dns: DnsInLoad | None = None
    capture: CaptureKept | None = None
    phases_ms: PhasesMs | None = None
    browser_profile: str = ""
    browser_started: str = ""
    browser_context: int = 0
    # The browser's Resource Timing entries (raw): the engine's own keys.
    resources: list[JsonObject] = Field(default_factory=list)
    browser_netlog: Netlog | None = None

    def counted_metrics(self) -> dict[str, float]:
        """The session's metrics that have a value."""
        return {k: v for k, v in self.metrics.items() if v is not None}
