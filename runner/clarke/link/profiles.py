"""Link profiles: profiles/<name>.yaml, validated into typed models.

A profile describes both directions of the link. forward = gateway -> terminal (server
to client, the direction pages travel), return = terminal -> gateway. Each direction
crosses two hops: uplink (ground station -> satellite) and downlink (satellite -> ground
station). The idle round-trip time is therefore the sum, over both directions, of
uplink + downlink + framing delay."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from clarke import paths, schema
from clarke.errors import UnknownName
from clarke.schema import StrictModel


class QueueBytes(StrictModel):
    bytes: int = Field(gt=0)


class QueueMs(StrictModel):
    ms: float = Field(gt=0)


class PacketLoss(StrictModel):
    packet_rate: float = Field(ge=0, lt=1)


class BitErrors(StrictModel):
    bit_error_rate: float = Field(ge=0, lt=1e-2)


class Direction(StrictModel):
    rate_mbps: float = Field(ge=0, description="0 means unlimited")
    uplink_delay_ms: float = Field(ge=0, le=10_000)
    downlink_delay_ms: float = Field(ge=0, le=10_000)
    framing_delay_ms: float = Field(default=0, ge=0, le=10_000)
    queue: QueueBytes | QueueMs = QueueMs(ms=250)
    loss: PacketLoss | BitErrors | None = None

    @property
    def one_way_delay_ms(self) -> float:
        return self.uplink_delay_ms + self.downlink_delay_ms + self.framing_delay_ms


class Tolerance(StrictModel):
    rtt_pct: float = Field(default=1.0, gt=0)
    rtt_ms: float = Field(default=1.0, ge=0, description="absolute floor for short links")
    rate_pct: float = Field(default=3.0, gt=0)


class LinkProfile(StrictModel):
    description: str
    sources: Annotated[list[str], Field(default_factory=list)]
    forward: Direction
    return_: Direction = Field(alias="return")
    tolerance: Tolerance = Tolerance()

    @property
    def idle_rtt_ms(self) -> float:
        return self.forward.one_way_delay_ms + self.return_.one_way_delay_ms


def profile_dir() -> Path:
    return paths.data_dir("profiles")


def available() -> list[str]:
    return sorted(p.stem for p in profile_dir().glob("*.yaml"))


def load(name: str) -> LinkProfile:
    path = profile_dir() / f"{name}.yaml"
    if not path.is_file():
        raise UnknownName("link profile", name, available())
    return schema.load(LinkProfile, path)
