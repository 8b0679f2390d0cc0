"""What the link roles and the stations' PEPs say of a load, as the runner reads it and a
record keeps it (`link_stats`, `pep.stations`): each role's GET /stats and GET
/pep/stats since the load's reset.

The link implementations count differently (satlink per direction with its queues and
the frames that crossed, OpenSAND its devices' counters, netem its qdiscs): each is a
Part (results/part.py) with the fields the runner reads, typed, and everything else
kept as the role said it, in its order."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from clarke.results.part import Part


class Spread(Part):
    min: float | None = None
    mean: float | None = None
    max: float | None = None


class Crossed(Part):
    """satlink: the frames that crossed a direction during the load, their one-way delay
    and the rate they met."""

    frames: int = 0
    delay_ms: Spread | None = None
    rate_bps: Spread | None = None


class Sojourn(Part):
    """satlink: a histogram of the time frames spent in the shaping station's queue."""

    count: int = 0
    mean_ms: float | None = None
    max_ms: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None


class ScheduleState(Part):
    """satlink: where the link's schedule is, on its own clock."""

    id: str | None = None
    step_index: int | None = None
    link_time_ms: float | None = None


class LinkDirection(Part):
    """satlink: one direction as a station shapes or relays it."""

    frames_out: int = 0
    bytes_out: int = 0
    drops: dict[str, int] | None = None  # by cause (docs/queues.md)
    queue_delay: Sojourn | None = None
    crossed: Crossed | None = None
    schedule: ScheduleState | None = None


class LinkRoleStats(Part):
    """A link role's counters since the load's reset."""

    model_config = ConfigDict(extra="allow", serialize_by_alias=True, validate_by_name=True)

    forward: LinkDirection | None = None
    return_: LinkDirection | None = Field(default=None, alias="return")
    # The IP bytes a station put onto the link (satlink, netem) or took off it (OpenSAND),
    # per direction.
    bytes_onto_link: dict[str, int | float | None] = Field(default_factory=dict)
    tap: dict[str, int] | None = None  # OpenSAND: its TAP device's counters

    def direction(self, name: str) -> LinkDirection | None:
        return self.forward if name == "forward" else self.return_ if name == "return" else None


class HopUse(Part):
    """splittcp: the hop connection a client connection took."""

    pre_opened: bool = False
    streams: int | None = None


class HopFirstData(Part):
    """splittcp: the hop's window when its first data went towards the client (TCP_INFO)."""

    mss: int | None = None
    window_bytes: int | None = None
    cwnd: int | None = None
    snd_wnd: int | None = None
    max_pacing_rate: int | None = None


class PepConnection(Part):
    accepted_from: str | None = None
    stream: int | None = None
    bytes_to_client: int | None = None
    hop: HopUse | None = None
    hop_first_data: HopFirstData | None = None


class PepStationStats(Part):
    """A station's PEP since the load's reset (agent/pep_slot.py)."""

    pep: str | None = None  # its implementation (none: no PEP runs)
    preset: str | None = None
    mode: str | None = None
    accepted: int | None = None
    relayed: int | None = None
    bytes_to_client: int | None = None
    failed: int | None = None
    hops_opened: int | None = None
    connections: list[PepConnection] = Field(default_factory=list)
