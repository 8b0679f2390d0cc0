"""What the server role says of a load, as the runner reads it and a record keeps it: one
record per connection (origin/README.md, "A connection record"; OpenLiteSpeed's
normalised ones: server/openlitespeed_stats.py) and a recorded site's replay counters.
contract.ServerStats is the server's GET /stats reply made of them.

Each is a Part (results/part.py): the fields the runner reads, typed, everything else
the server said kept as said, and written back in the server's own order, so a
record's `server_connections` are the server's words. Every field has a default: a
server that does not report it (OpenLiteSpeed reports no exchanges, no TLS handshake;
an older origin fewer counters) leaves it out, and an old journal still reads."""

from __future__ import annotations

from pydantic import Field

from clarke.results.part import Part

# Times on the Unix clock in ms: origin's connection times are integers, its exchanges'
# floats; OpenLiteSpeed's are integers. Kept as each gave them.
UnixMs = int | float


class TlsHandshake(Part):
    """A connection's TLS handshake as origin saw it (hello.rs)."""

    kind: str | None = None  # full | resumed | unknown
    hello_read: bool = False
    psk_offered: bool = False
    ticket_offered: bool = False
    early_data_offered: bool = False
    early_data_accepted: bool = False


class PriorityUpdate(Part):
    unix_ms: float | None = None
    value: str | None = None


class Rfc7540Priority(Part):
    depends_on: int | None = None
    exclusive: bool | None = None
    weight: int | None = None


class Exchange(Part):
    """One request and its response on a connection (origin's exchanges.rs)."""

    stream: int | None = None
    order: int | None = None
    path: str | None = None
    authority: str | None = None  # a replayed site's: the origin asked
    replay: str | None = None  # exact | query | prefix | miss
    priority: str | None = None  # the Priority header as received
    priority_updates: list[PriorityUpdate] = Field(default_factory=list)
    urgency: int | None = None
    incremental: bool | None = None
    rfc7540: Rfc7540Priority | None = None
    bytes: int | None = None
    request_unix_ms: float | None = None
    handed_first_unix_ms: float | None = None
    handed_last_unix_ms: float | None = None
    data_frames: int | None = None
    written_last_unix_ms: float | None = None  # h2: its END_STREAM frame written
    fin_sent_unix_ms: float | None = None  # h3: its FIN first sent
    acked_unix_ms: float | None = None  # h3: all of it acknowledged
    turn_released_unwritten: bool = False


class Signals(Part):
    """The client's priority signals on a connection."""

    settings: dict[str, int] = Field(default_factory=dict)  # identifier (hex): value
    priority_headers: int = 0
    rfc7540_headers: int = 0
    rfc7540_frames: int = 0
    priority_updates: int = 0


class TcpCounters(Part):
    """TCP_INFO's counters (origin), or ss's (OpenLiteSpeed)."""

    bytes_received: int | None = None


class QuicCounters(Part):
    """quinn's counters (origin), or lsquic's log and the nftables counters
    (OpenLiteSpeed, which counts `retries`)."""

    udp_bytes_received: int | None = None
    retries: int | None = None


class Transport(Part):
    tcp: TcpCounters | None = None
    quic: QuicCounters | None = None


class ServerConnection(Part):
    """One connection the server saw since its stats were reset."""

    id: int | str | None = None  # origin: a number; OpenLiteSpeed: "tcp <peer>"
    protocol: str | None = None  # h1 | h2 | h3
    tls: bool = True
    peer: str | None = None
    local: str | None = None
    cc: str | None = None  # the congestion control in use
    cc_source: str | None = None  # OpenLiteSpeed: kernel | lsquic log | configured
    app_bytes_sent: int = 0
    requests: int = 0
    request_paths: list[str] = Field(default_factory=list)
    server_name: str | None = None  # SNI
    site: bool = False  # on a replayed site's listener
    # The transport's payload sent; absent where the server could not count it.
    wire_bytes_sent: int | None = None
    wire_packets_sent: int | None = None
    ip_bytes_estimate: int | None = None
    retrans_bytes: int = 0
    lost_packets: int = 0
    cwnd_bytes: int | None = None
    rtt_us: int | None = None
    start_unix_ms: UnixMs | None = None
    end_unix_ms: UnixMs | None = None
    open: bool | None = None
    opened_before_reset: bool = False
    tls_handshake: TlsHandshake | None = None
    transport: Transport | None = None
    scheduler: str | None = None
    exchanges: list[Exchange] = Field(default_factory=list)
    signals: Signals | None = None  # None: a server that records no signals

    @property
    def measured(self) -> bool:
        """Whether the server counted the connection's wire bytes."""
        return self.wire_bytes_sent is not None


class ReplayMiss(Part):
    """A request a recorded site's archive did not have (origin answered 404)."""

    method: str | None = None
    url: str | None = None
    protocol: str | None = None
    connection: int | None = None
    unix_ms: UnixMs | None = None


class ReplayCounters(Part):
    """origin's replay counters of a recorded site since the stats were reset."""

    requests: int | None = None
    exact: int | None = None
    query: int | None = None
    prefix: int | None = None
    missed: int | None = None
    misses: list[ReplayMiss] = Field(default_factory=list)


__all__ = [
    "Exchange",
    "PriorityUpdate",
    "ReplayCounters",
    "ReplayMiss",
    "Rfc7540Priority",
    "ServerConnection",
    "Signals",
    "TcpCounters",
    "TlsHandshake",
    "Transport",
    "UnixMs",
]
