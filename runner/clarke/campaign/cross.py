"""Cross traffic: what else crosses the satellite link while a page loads (a shared
beam). One entry of a campaign's `cross_traffic` axis (docs/campaigns.md):

    cross_traffic: [none, bulk-cubic]                       # a name alone: its defaults
    cross_traffic: [{name: bulk-bbr, flows: 2, direction: both}, {name: udp-cbr, rate_mbps: 2}]

Generators run on extra endpoints behind the terminal (xclient) and behind the gateway
(xserver), so they share the link and not the browser's host (docs/testbed.md).
`forward` is the direction pages travel: from the gateway side to the terminal side."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Final

from pydantic import BeforeValidator, Field, model_validator

from clarke.json_value import JsonObject
from clarke.schema import StrictModel


class CrossKind(StrEnum):
    none = "none"
    bulk_cubic = "bulk-cubic"  # iperf3 TCP, Cubic, `flows` connections
    bulk_bbr = "bulk-bbr"  # iperf3 TCP, BBR
    udp_cbr = "udp-cbr"  # iperf3 UDP at a constant bit rate
    rrul = "rrul"  # 4 TCP flows each way plus a latency probe (flent's definition)
    web = "web"  # a second user: the cell's page fetched again and again (curl)


class Direction(StrEnum):
    forward = "forward"  # gateway side -> terminal side, as pages travel
    return_ = "return"  # terminal side -> gateway side
    both = "both"


DEFAULT_UDP_RATE_MBPS: Final = 1.0
RRUL_FLOWS: Final = 4  # per direction, as flent's rrul test defines it
WEB_FLOWS: Final = 6  # parallel fetches: Firefox's connections per server


class CrossTraffic(StrictModel):
    name: CrossKind
    flows: int | None = Field(default=None, ge=1, le=16, description="TCP flows (bulk)")
    direction: Direction | None = Field(default=None, description="forward, return or both")
    rate_mbps: float | None = Field(
        default=None, gt=0, le=1000, allow_inf_nan=False, description="udp-cbr's rate per flow"
    )

    @model_validator(mode="after")
    def _supported(self) -> CrossTraffic:
        given = [k for k in ("flows", "direction", "rate_mbps") if getattr(self, k) is not None]
        allowed = {
            CrossKind.none: (),
            CrossKind.bulk_cubic: ("flows", "direction"),
            CrossKind.bulk_bbr: ("flows", "direction"),
            CrossKind.udp_cbr: ("flows", "direction", "rate_mbps"),
            CrossKind.rrul: (),
            CrossKind.web: ("flows",),
        }[self.name]
        extra = [k for k in given if k not in allowed]
        if extra:
            raise ValueError(
                f"{self.name.value} takes no {', '.join(extra)} (it takes: "
                f"{', '.join(allowed) or 'no parameters'})"
            )
        return self

    # --- what follows from it ---------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.name is not CrossKind.none

    @property
    def n_flows(self) -> int:
        if self.name is CrossKind.rrul:
            return RRUL_FLOWS
        return self.flows or (WEB_FLOWS if self.name is CrossKind.web else 1)

    @property
    def way(self) -> Direction:
        if self.name is CrossKind.rrul:
            return Direction.both
        return self.direction or Direction.forward  # web: pages travel forward

    @property
    def rate(self) -> float | None:
        """udp-cbr's rate per flow in Mb/s; None for the others (they take what they get)."""
        if self.name is not CrossKind.udp_cbr:
            return None
        return self.rate_mbps or DEFAULT_UDP_RATE_MBPS

    @property
    def label(self) -> str:
        """The name plus every parameter that is not its default: the cell key and the
        run id's `-x` part (two entries differ in label exactly when they differ)."""
        parts = [self.name.value]
        default_flows = CrossTraffic(name=self.name).n_flows
        if self.flows is not None and self.flows != default_flows:
            parts.append(f"f{self.flows}")
        if self.direction not in (None, Direction.forward):
            parts.append(self.way.value)
        if self.rate_mbps is not None and self.rate_mbps != DEFAULT_UDP_RATE_MBPS:
            parts.append(f"{self.rate_mbps:g}mbps")
        return "-".join(parts)

    def __str__(self) -> str:
        return self.label

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CrossTraffic) and self.label == other.label

    def __hash__(self) -> int:
        return hash(self.label)

    def describe(self) -> JsonObject:
        """Name and parameters in force (defaults filled in), for the record."""
        return {
            "name": self.name.value,
            "label": self.label,
            "flows": self.n_flows if self.active else 0,
            "direction": self.way.value if self.active else None,
            "rate_mbps": self.rate,
        }


_LABEL = re.compile(
    r"^(?P<name>[a-z-]+?)(?:-f(?P<flows>\d+))?(?:-(?P<direction>return|both))?"
    r"(?:-(?P<rate>[0-9.e+-]+)mbps)?$"
)


def _entry(v: Any) -> Any:
    """A name alone is the entry with that name and its defaults; a label
    (CrossTraffic.label: `udp-cbr-f2-both-2.5mbps`, as records and run ids carry it) is
    the entry it labels."""
    if not isinstance(v, str):
        return v
    m = _LABEL.fullmatch(v)
    if v in CrossKind.__members__.values() or m is None or m["name"] not in set(CrossKind):
        return {"name": v}
    entry: JsonObject = {"name": m["name"]}
    if m["flows"]:
        entry["flows"] = int(m["flows"])
    if m["direction"]:
        entry["direction"] = m["direction"]
    if m["rate"]:
        entry["rate_mbps"] = float(m["rate"])
    return entry


CrossTrafficEntry = Annotated[CrossTraffic, BeforeValidator(_entry)]
NO_CROSS_TRAFFIC: Final = CrossTraffic(name=CrossKind.none)
