"""A link schedule: the `schedule:` block of a link profile, or a file under
profiles/schedules/ of the same shape (docs/schedules.md; the contract with satlink is
satlink/README.md's "schedule").

A schedule is a list of steps in link time. A step names, per direction, only the fields
it changes; the profile's forward/return blocks are the state before the first step and
the base every step modifies. Checks that span steps (times, a rate of 0 left without an
outage) name the step index and the field, e.g. `steps[3].forward.rate_mbps`."""

from __future__ import annotations

import hashlib
import json
import math
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    model_serializer,
    model_validator,
)

from clarke.json_value import JsonObject
from clarke.schedules import limits
from clarke.schema import StrictModel, located_error

SCHEDULE_VERSION = 1
MAX_RATE_MBPS = 1_000_000.0  # as a profile's (clarke.profiles): far inside satlink's u64 b/s
MAX_STEP_DELAY_MS = 100_000.0
MAX_AT_S = 30 * 24 * 3600.0  # a month of link time: far inside satlink's f64 milliseconds
ID_PATTERN = r"^[a-z0-9][a-z0-9_.-]*$"
DIRECTIONS = ("forward", "return")
Probability = Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]


class StepPacketLoss(StrictModel):
    packet_rate: Probability


class StepBitErrors(StrictModel):
    bit_error_rate: Probability


class GilbertElliottParams(StrictModel):
    p_good_bad: Probability
    p_bad_good: Probability
    loss_good: Probability
    loss_bad: Probability


class GilbertElliott(StrictModel):
    gilbert_elliott: GilbertElliottParams


LOSS_KINDS: dict[str, type[StrictModel]] = {
    "packet_rate": StepPacketLoss,
    "bit_error_rate": StepBitErrors,
    "gilbert_elliott": GilbertElliott,
}


def _loss_kind(value: Any) -> str | None:
    """Which loss a step names, by its one key; the branch is named `[kind]` so that
    errors read loss.gilbert_elliott.loss_bad (clarke.schema drops bracketed names)."""
    if isinstance(value, dict):
        keys = list(value)
        return f"[{keys[0]}]" if len(keys) == 1 and keys[0] in LOSS_KINDS else None
    for kind, cls in LOSS_KINDS.items():
        if isinstance(value, cls):
            return f"[{kind}]"
    return None


StepLoss = Annotated[
    Annotated[StepPacketLoss, Tag("[packet_rate]")]
    | Annotated[StepBitErrors, Tag("[bit_error_rate]")]
    | Annotated[GilbertElliott, Tag("[gilbert_elliott]")],
    Discriminator(
        _loss_kind,
        custom_error_type="loss_kind",
        custom_error_message="expected null, {packet_rate: P}, {bit_error_rate: P} or "
        "{gilbert_elliott: {p_good_bad, p_bad_good, loss_good, loss_bad}}",
    ),
]


class Change(StrictModel):
    """What one step changes in one direction. A field the step does not name keeps the
    previous step's value; `loss: null` names the loss (no loss from then on)."""

    rate_mbps: float | None = Field(default=None, ge=0, le=MAX_RATE_MBPS, allow_inf_nan=False)
    uplink_delay_ms: float | None = Field(
        default=None, ge=0, le=MAX_STEP_DELAY_MS, allow_inf_nan=False
    )
    downlink_delay_ms: float | None = Field(
        default=None, ge=0, le=MAX_STEP_DELAY_MS, allow_inf_nan=False
    )
    framing_delay_ms: float | None = Field(
        default=None, ge=0, le=MAX_STEP_DELAY_MS, allow_inf_nan=False
    )
    loss: StepLoss | None = None
    outage: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_only_for_loss(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, value in data.items():
                if value is None and key != "loss" and key in cls.model_fields:
                    raise located_error(
                        (key,), "null is only allowed for loss (leave the field out to keep it)"
                    )
        return data

    @model_validator(mode="after")
    def _names_something(self) -> Change:
        if not self.model_fields_set:
            raise located_error((), "names no field (give at least one, or leave it out)")
        return self

    @model_serializer(mode="wrap")
    def _only_named(self, handler: SerializerFunctionWrapHandler) -> JsonObject:
        # Dumped as written: a field left out stays out, so a dump reads back the same.
        data: JsonObject = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}

    def to_satlink(self) -> JsonObject:
        """This change as satlink's PARTIAL DIR."""
        out: JsonObject = {}
        for key in self.model_fields_set:
            value = getattr(self, key)
            if key == "rate_mbps":
                out["rate_bps"] = round(value * 1_000_000)
            elif key == "loss":
                out["loss"] = None if value is None else value.model_dump(mode="json")
            else:
                out[key] = value
        return dict(sorted(out.items()))


class Step(StrictModel):
    at_s: float = Field(ge=0, le=MAX_AT_S, allow_inf_nan=False)
    forward: Change | None = None
    return_: Change | None = Field(default=None, alias="return")

    @model_validator(mode="after")
    def _changes_something(self) -> Step:
        if self.forward is None and self.return_ is None:
            raise located_error((), "names no direction (give forward, return or both)")
        return self

    def change(self, direction: str) -> Change | None:
        return self.forward if direction == "forward" else self.return_


def _not_too_many(steps: Any) -> Any:
    """Counted before a single step is validated (clarke.schedules.limits)."""
    if isinstance(steps, list | tuple) and len(steps) > limits.max_steps():
        raise ValueError(limits.too_many(len(steps)))
    return steps


class End(StrEnum):
    loop = "loop"  # the schedule repeats every length_s
    hold = "hold"  # the last step stays in force


class Clock(StrEnum):
    apply = "apply"  # link time 0 is the moment the link applies the schedule
    utc = "utc"  # link time is the Unix time modulo length_s (loop only)


class Schedule(StrictModel):
    version: Literal[1]
    id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=100)
    end: End = End.hold
    length_s: float | None = Field(default=None, gt=0, le=MAX_AT_S, allow_inf_nan=False)
    clock: Clock = Clock.apply
    slot_s: float | None = Field(default=None, gt=0, le=MAX_AT_S, allow_inf_nan=False)
    # Where slots start in link time: a load's slot phase is (link time - slot_offset_s)
    # modulo slot_s (Starlink's start at second 12 of the minute).
    slot_offset_s: float = Field(default=0.0, ge=0, le=MAX_AT_S, allow_inf_nan=False)
    steps: Annotated[list[Step], BeforeValidator(_not_too_many)] = Field(min_length=1)

    @classmethod
    def made(
        cls,
        steps: list[Step],
        end: End,
        length_s: float | None,
        schedule_id: str | None,
        slot_s: float | None = None,
    ) -> Schedule:
        """A schedule Clarke made from a series (a trace, a rain fade): with the period
        `length_s` only where it loops."""
        return cls(
            version=1,
            id=schedule_id,
            end=end,
            length_s=length_s if end is End.loop else None,
            slot_s=slot_s,
            steps=steps,
        )

    @model_validator(mode="after")
    def _steps_in_order(self) -> Schedule:
        if self.steps[0].at_s != 0:
            raise located_error(
                ("steps", 0, "at_s"), f"the first step must be at 0 (got {self.steps[0].at_s:g})"
            )
        for i in range(1, len(self.steps)):
            before, at = self.steps[i - 1].at_s, self.steps[i].at_s
            if at <= before:
                raise located_error(
                    ("steps", i, "at_s"),
                    f"{at:g} is not after steps[{i - 1}].at_s {before:g}: times must strictly "
                    "increase",
                )
        last = self.steps[-1].at_s
        if self.end is End.loop:
            if self.length_s is None:
                raise located_error(("length_s",), "required with end: loop (the loop's period)")
            if self.length_s <= last:
                raise located_error(
                    ("length_s",),
                    f"{self.length_s:g} must be after the last step (steps[{len(self.steps) - 1}]"
                    f".at_s {last:g})",
                )
        elif self.length_s is not None:
            raise located_error(("length_s",), "only with end: loop (end is hold)")
        if self.clock is Clock.utc and self.end is not End.loop:
            raise located_error(
                ("clock",), "utc needs end: loop (link time = Unix time mod length_s)"
            )
        if self.slot_offset_s and (self.slot_s is None or self.slot_offset_s >= self.slot_s):
            raise located_error(("slot_offset_s",), "must be below slot_s (and needs it)")
        self._rates_with_outage()
        return self

    def slot_phase_s(self, link_time_s: float) -> float | None:
        """Where in its reconfiguration slot a link time falls; None without slot_s."""
        if not self.slot_s:
            return None
        return (link_time_s - self.slot_offset_s) % self.slot_s

    def _rates_with_outage(self) -> None:
        """A rate of 0 is only allowed while the direction is out (outage: true)."""
        for d in DIRECTIONS:
            rate_zero_at: int | None = None  # the step that set rate 0, while it is in force
            outage = False
            for i, step in enumerate(self.steps):
                change = step.change(d)
                if change is None:
                    continue
                named = change.model_fields_set
                if "rate_mbps" in named:
                    rate_zero_at = i if change.rate_mbps == 0 else None
                if "outage" in named:
                    outage = bool(change.outage)
                if rate_zero_at is None or outage:
                    continue
                if rate_zero_at == i:
                    raise located_error(
                        ("steps", i, d, "rate_mbps"),
                        "0 is only allowed together with outage: true (a rate of 0 would stop "
                        "the link without dropping; say outage: true)",
                    )
                raise located_error(
                    ("steps", i, d, "outage"),
                    f"false leaves rate_mbps 0 (set in steps[{rate_zero_at}]) in force without "
                    "an outage; give a rate > 0 in this step",
                )

    def digest(self) -> str:
        """SHA-256 of the schedule's canonical JSON, without its id (docs/schedules.md)."""
        # Fields added later count only when not at their defaults: older schedules keep
        # their ids.
        later = {k for k in ("clock", "slot_offset_s") if getattr(self, k) == DEFAULTS[k]}
        data = self.model_dump(mode="json", by_alias=True, exclude={"id", *later})
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def default_id(self, profile_name: str) -> str:
        """profile name + "-" + the first 12 hex digits of digest()."""
        return f"{profile_name}-{self.digest()[:12]}"

    def with_id(self, profile_name: str) -> Schedule:
        return self if self.id else self.model_copy(update={"id": self.default_id(profile_name)})

    def to_satlink(self, profile_name: str) -> JsonObject:
        """The schedule as satlink's "schedule" object (times in milliseconds)."""
        steps = []
        for step in self.steps:
            out: JsonObject = {"at_ms": _ms(step.at_s)}
            for d in DIRECTIONS:
                change = step.change(d)
                if change is not None:
                    out[d] = change.to_satlink()
            steps.append(out)
        sched: JsonObject = {
            "id": self.id or self.default_id(profile_name),
            "end": self.end.value,
        }
        if self.end is End.loop:
            assert self.length_s is not None  # checked when read
            sched["length_ms"] = _ms(self.length_s)
        if self.clock is not Clock.apply:
            sched["clock"] = self.clock.value
        sched["steps"] = steps
        return sched


DEFAULTS: JsonObject = {"clock": Clock.apply, "slot_offset_s": 0.0}


def _ms(seconds: float) -> float | int:
    """Seconds as milliseconds, without float noise (15.05 s -> 15050, not 15050.000000000002)."""
    ms = round(seconds * 1000, 6)
    return int(ms) if math.isclose(ms, round(ms), abs_tol=1e-9) else ms
