"""The queue of one link direction in a profile: its discipline and its bound
(docs/queues.md).

    queue: {bytes: 662500}                    drop-tail, as profiles always wrote it
    queue: {ms: 250}                          ... or any one bound: bytes, packets, ms, bdp
    queue: {discipline: drop_head, limit: {ms: 100}}
    queue: {discipline: codel, target_ms: 5, interval_ms: 100}
    queue: {discipline: fq_codel, limit: {packets: 10240}, flows: 1024, quantum: 1514}
    queue: {discipline: drop_tail, limit: {bdp: 1}}

A bound in `bdp` is a multiple of the bandwidth-delay product, rate x the profile's idle
RTT: the profile resolves it into ms of the rate in force (`bdp` x idle RTT), so it
follows the rate of a schedule as `ms` does, and satlink never sees `bdp`. Defaults:
drop-tail and drop-head 250 ms (satlink's default), CoDel 1000 packets (Linux's codel
qdisc; RFC 8289 leaves the bound open), FQ-CoDel 10240 packets (RFC 8290 §5.1)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from clarke.json_value import JsonObject
from clarke.schema import StrictModel, located_error
from clarke.vocab import QueueDiscipline

# What satlink holds (satlink-model's config.rs): queue sizes as unsigned 64-bit integers.
# The limits keep every profile that validates within them, so a profile is refused when
# read, never when the link starts.
MAX_QUEUE_BYTES = 10**12  # 1 TB, far inside its 2^64 - 1 bytes
MAX_QUEUE_PACKETS = 10**9
MAX_QUEUE_MS = 3_600_000.0  # an hour of the link's rate
MAX_QUEUE_BDP = 1000.0

DISCIPLINES: tuple[str, ...] = tuple(d.value for d in QueueDiscipline)
BOUNDS = ("bytes", "packets", "ms", "bdp")


class Limit(StrictModel):
    """Exactly one of the bounds."""

    bytes: int | None = Field(default=None, gt=0, le=MAX_QUEUE_BYTES)
    packets: int | None = Field(default=None, gt=0, le=MAX_QUEUE_PACKETS)
    ms: float | None = Field(default=None, gt=0, le=MAX_QUEUE_MS, allow_inf_nan=False)
    bdp: float | None = Field(default=None, gt=0, le=MAX_QUEUE_BDP, allow_inf_nan=False)

    @model_validator(mode="after")
    def _exactly_one(self) -> Limit:
        given = [k for k in BOUNDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise located_error((), f"give exactly one of {', '.join(BOUNDS)}")
        return self

    def describe(self) -> str:
        for k in BOUNDS:
            v = getattr(self, k)
            if v is not None:
                return f"{v} {k}" if isinstance(v, int) else f"{v:g} {k}"
        return ""

    def in_ms(self, idle_rtt_ms: float) -> Limit:
        """A bound in bdp as ms of the rate in force (bdp x idle RTT); others as they are."""
        if self.bdp is None:
            return self
        return Limit(ms=min(MAX_QUEUE_MS, max(self.bdp * idle_rtt_ms, 1e-3)))

    def to_satlink(self) -> dict[str, float]:
        if self.bdp is not None:
            raise ValueError("a bdp bound is resolved into ms by the profile first")
        if self.bytes is not None:
            return {"bytes": self.bytes}
        if self.packets is not None:
            return {"packets": self.packets}
        return {"ms": float(self.ms or 0)}


DEFAULT_LIMITS: dict[str, Limit] = {
    QueueDiscipline.drop_tail: Limit(ms=250),
    QueueDiscipline.drop_head: Limit(ms=250),
    QueueDiscipline.codel: Limit(packets=1000),
    QueueDiscipline.fq_codel: Limit(packets=10240),
}
# RFC 8289 §4.2-4.3 (target, interval), RFC 8290 §5.1 (flows, quantum).
CODEL_FIELDS = ("target_ms", "interval_ms")
FQ_FIELDS = ("flows", "quantum")


class Queue(StrictModel):
    discipline: QueueDiscipline = QueueDiscipline.drop_tail
    limit: Limit | None = None
    target_ms: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False)
    interval_ms: float | None = Field(default=None, gt=0, le=100_000, allow_inf_nan=False)
    flows: int | None = Field(default=None, ge=1, le=65536)
    quantum: int | None = Field(default=None, ge=64, le=1_048_576)

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        # {bytes: N} / {ms: X} (every profile before disciplines) and {packets: N},
        # {bdp: K}: a drop-tail queue with that bound.
        if isinstance(data, dict) and data and set(data) <= set(BOUNDS):
            return {"discipline": QueueDiscipline.drop_tail.value, "limit": data}
        return data

    @model_validator(mode="after")
    def _fields_of_the_discipline(self) -> Queue:
        allowed = {
            QueueDiscipline.drop_tail: (),
            QueueDiscipline.drop_head: (),
            QueueDiscipline.codel: CODEL_FIELDS,
            QueueDiscipline.fq_codel: CODEL_FIELDS + FQ_FIELDS,
        }[self.discipline]
        for name in CODEL_FIELDS + FQ_FIELDS:
            if getattr(self, name) is not None and name not in allowed:
                raise located_error(
                    (name,),
                    f"not a parameter of {self.discipline}"
                    + (f" (it takes {', '.join(allowed)})" if allowed else ""),
                )
        if self.target_ms is not None and self.target_ms > self.interval():
            raise located_error(("target_ms",), "must not exceed interval_ms")
        return self

    def bound(self) -> Limit:
        return self.limit or DEFAULT_LIMITS[self.discipline]

    def target(self) -> float:
        return 5.0 if self.target_ms is None else self.target_ms

    def interval(self) -> float:
        return 100.0 if self.interval_ms is None else self.interval_ms

    def resolved(self, idle_rtt_ms: float) -> Queue:
        """This queue with its bound given (the discipline's default when none was) and
        a bdp bound turned into ms."""
        return self.model_copy(update={"limit": self.bound().in_ms(idle_rtt_ms)})

    def describe(self) -> str:
        return f"{self.discipline} {self.bound().describe()}"

    def satlink_discipline(self) -> str | JsonObject | None:
        """satlink's "discipline" (satlink/README.md); None for drop-tail, its default,
        so that a profile without a discipline gives the configuration it always gave."""
        if self.discipline is QueueDiscipline.drop_tail:
            return None
        if self.discipline is QueueDiscipline.drop_head:
            return QueueDiscipline.drop_head.value
        params: JsonObject = {"target_ms": self.target(), "interval_ms": self.interval()}
        if self.discipline is QueueDiscipline.fq_codel:
            params |= {"flows": self.flows or 1024, "quantum": self.quantum or 1514}
        return {self.discipline: params}
