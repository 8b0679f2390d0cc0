"""`clarke link schedule starlink`: Starlink as measured, slot by slot
(docs/schedules.md, "starlink").

Its parameters come from a YAML file (profiles/schedules/leo-starlink-measured.params
.yaml for the shipped profile), every one with the source it comes from; the fits that
turn published figures into model parameters are in starlink_fit.py. The schedule:

- Slots of `period_s` starting at second `first_boundary_s` of every UTC minute
  (`clock: utc`, a loop of whole minutes): Starlink's global scheduler reassigns
  terminals every 15 s, at seconds 12, 27, 42 and 57.
- Per slot, the one-way delays are the SGP4 geometry (as `clarke link schedule leo`:
  the serving satellite's slant ranges / c) plus a framing delay: half of (the ground
  part that puts the fastest slot at the published minimum RTT + the slot's excess, a
  truncated normal fitted to the published RTT quartiles with the jitter included).
- Per slot, forward and return rates drawn from lognormals (the published medians and
  spread), clipped to the published range.
- Around every boundary, a reconfiguration event from `before_ms` before it to
  `after_ms` after it: a delay spike (uniform in the published range, half per
  direction), packet loss at the event's rate, and optionally an outage from the
  boundary on.
- Outside events, a background packet loss that makes the echo loss the published total.

The loop's n slots take the fitted distributions' quantiles at (k + 0.5) / n, so that
the loop holds the fitted distribution itself, not one sample of it (a 40-slot sample
of a wide distribution can land far in its tail); the draws are the order: each
minute's slots take one quantile from each of the equal strata of them (for 15 s slots,
each quarter), in a random order, so that any minute has the published spread. Spikes
are drawn uniformly. Python's `random` (seeded) and the standard library's inverse CDFs
make the same file from the same parameters on any machine."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from clarke import schema
from clarke.errors import ValidationFailed
from clarke.schedules import leo
from clarke.schedules import starlink_fit as fit
from clarke.schedules.model import Clock, End, Schedule, Step
from clarke.schema import StrictModel, located_error

Ms = Annotated[float, Field(ge=0, le=100_000, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, le=1_000_000, allow_inf_nan=False)]


class Sourced(StrictModel):
    """A group of parameters with `sources:` naming where each one comes from."""

    sources: dict[str, str]

    @model_validator(mode="after")
    def _every_parameter_sourced(self) -> Sourced:
        names = set(type(self).model_fields) - {"sources"}
        for name in sorted(names - set(self.sources)):
            raise located_error(("sources", name), "required: where this value comes from")
        for name in sorted(set(self.sources) - names):
            raise located_error(("sources", name), "names no parameter of this group")
        for name, text in self.sources.items():
            if not text.strip():
                raise located_error(("sources", name), "empty")
        return self


class Slots(Sourced):
    period_s: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]
    first_boundary_s: Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)]
    loop_s: Annotated[float, Field(gt=0, le=86_400, allow_inf_nan=False)]

    @model_validator(mode="after")
    def _grid(self) -> Slots:
        if self.first_boundary_s >= self.period_s:
            raise located_error(("first_boundary_s",), "must be below period_s")
        if not _whole(self.loop_s, 60):
            raise located_error(
                ("loop_s",), "must be a whole number of minutes (the boundaries are seconds "
                "of the UTC minute)"
            )  # fmt: skip
        if not _whole(60, self.period_s):
            raise located_error(("period_s",), "must divide a minute")
        return self


class Geometry(Sourced):
    tle: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # beside the parameter file
    terminal: str
    start: datetime  # a UTC minute's start: slot k begins at start + first_boundary + k period
    min_elevation_deg: Annotated[float, Field(ge=0, le=90)]

    @model_validator(mode="after")
    def _minute(self) -> Geometry:
        if self.start.tzinfo is None or self.start.utcoffset() != timedelta(0):
            raise located_error(("start",), "must be UTC (end it with Z)")
        if self.start.second or self.start.microsecond:
            raise located_error(("start",), "must be the start of a minute (seconds :00)")
        try:
            leo.Site.parse(self.terminal, "terminal")
        except Exception as e:
            raise located_error(("terminal",), str(e)) from None
        return self


class Rtt(Sourced):
    min_ms: Positive
    quartiles_ms: tuple[Positive, Positive, Positive]

    @model_validator(mode="after")
    def _ordered(self) -> Rtt:
        q = self.quartiles_ms
        if not self.min_ms < q[0] < q[1] < q[2]:
            raise located_error(("quartiles_ms",), "must increase, and start above min_ms")
        return self


class JitterParams(Sourced):
    successive_diff_ms: Annotated[float, Field(gt=0, le=1000, allow_inf_nan=False)]


class Event(Sourced):
    before_ms: Ms
    after_ms: Ms
    spike_ms: tuple[Ms, Ms]
    loss: Annotated[float, Field(ge=0, lt=1)]
    outage_ms: Ms

    @model_validator(mode="after")
    def _consistent(self) -> Event:
        if self.spike_ms[0] > self.spike_ms[1]:
            raise located_error(("spike_ms",), "[low, high]: low is above high")
        if self.outage_ms > self.after_ms:
            raise located_error(("outage_ms",), "must not outlast the event (after_ms)")
        if self.before_ms + self.after_ms <= 0:
            raise located_error(("after_ms",), "the event must last (before_ms + after_ms > 0)")
        return self


class Loss(Sourced):
    total_pct: Annotated[float, Field(ge=0, lt=100)]


class Rates(Sourced):
    forward_median_mbps: Positive
    return_median_mbps: Positive
    forward_p99_mbps: Positive
    forward_range_mbps: tuple[Positive, Positive]

    @model_validator(mode="after")
    def _consistent(self) -> Rates:
        lo, hi = self.forward_range_mbps
        if not lo <= self.forward_median_mbps <= self.forward_p99_mbps <= hi:
            raise located_error(
                ("forward_p99_mbps",),
                "need forward_range_mbps[0] <= forward_median_mbps <= forward_p99_mbps <= "
                "forward_range_mbps[1]",
            )
        return self


class Params(StrictModel):
    """The parameter file of `clarke link schedule starlink`."""

    version: Literal[1]
    seed: int = Field(ge=0, lt=2**63)
    slots: Slots
    geometry: Geometry
    rtt: Rtt
    jitter: JitterParams
    event: Event
    loss: Loss
    rates: Rates

    @model_validator(mode="after")
    def _event_fits(self) -> Params:
        period_ms = self.slots.period_s * 1000
        if self.event.before_ms + self.event.after_ms >= period_ms:
            raise located_error(("event", "after_ms"), "the event outlasts a slot")
        if self.event.before_ms >= self.slots.first_boundary_s * 1000:
            raise located_error(
                ("event", "before_ms"), "must end before the first boundary's second "
                "(slots.first_boundary_s): the loop starts at 0"
            )  # fmt: skip
        try:
            fit.background_loss(self.loss.total_pct / 100, self.event_share, self.event.loss)
        except ValueError as e:
            raise located_error(
                ("loss", "total_pct"), f"{e}: lower event.loss or its length"
            ) from None
        return self

    @property
    def event_share(self) -> float:
        return (self.event.before_ms + self.event.after_ms) / (self.slots.period_s * 1000)


def _whole(a: float, b: float) -> bool:
    return abs(a / b - round(a / b)) < 1e-9


@dataclass(frozen=True)
class Fitted:
    """What the fits made of the published figures."""

    jitter_mean_ms: float
    ground_ms: float  # the RTT the fastest slot has beyond its geometry, less its excess
    excess_mu_ms: float
    excess_sigma_ms: float
    quartiles_ms: list[float]  # the fitted model's RTT quartiles
    background_loss: float  # per direction, outside events
    rate_sigma: float


@dataclass(frozen=True)
class Slot:
    at_s: float  # its boundary, link time
    satellite: str | None
    terminal_ms: float  # one hop's delay, ms
    gateway_ms: float
    excess_ms: float
    spike_ms: float
    forward_mbps: float
    return_mbps: float

    @property
    def geometry_rtt_ms(self) -> float:
        return 2 * (self.terminal_ms + self.gateway_ms)


def read_params(path: Path) -> Params:
    if not path.is_file():
        raise ValidationFailed(str(path), ["file not found"])
    return schema.parse(Params, schema.read_yaml(path), str(path))


def geometry(params: Params, tle_dir: Path) -> tuple[list[leo.Slot], list[leo.Tle]]:
    """The serving satellite and slant ranges of each slot (SGP4, as `schedule leo`)."""
    tles = leo.read_tles(tle_dir / params.geometry.tle)
    g, s = params.geometry, params.slots
    opts = leo.Options(
        terminal=leo.Site.parse(g.terminal, "geometry.terminal"),
        start=g.start.astimezone(UTC) + timedelta(seconds=s.first_boundary_s),
        duration_s=s.loop_s,
        slot_s=s.period_s,
        min_elevation_deg=g.min_elevation_deg,
    )
    return leo.plan_slots(tles, opts), tles


def fitted(params: Params, geo_slots: list[leo.Slot]) -> Fitted:
    served = [s for s in geo_slots if s.satellite]
    if not served:
        raise ValidationFailed("geometry", ["no satellite above the minimum elevation at all"])
    rtts = [2 * sum(leo.delays_ms(s)) for s in served]
    offsets = [r - min(rtts) for r in rtts]
    jitter = fit.jitter_mean_ms(params.jitter.successive_diff_ms)
    q = params.rtt.quartiles_ms
    mu, sigma = fit.fit_floor(q, params.rtt.min_ms, jitter, offsets)
    return Fitted(
        jitter_mean_ms=round(jitter, 4),
        ground_ms=round(params.rtt.min_ms - min(rtts), 4),
        excess_mu_ms=mu,
        excess_sigma_ms=sigma,
        quartiles_ms=fit.fitted_quartiles(mu, sigma, params.rtt.min_ms, jitter, offsets),
        background_loss=round(
            fit.background_loss(params.loss.total_pct / 100, params.event_share, params.event.loss),
            6,
        ),
        rate_sigma=round(
            fit.rate_sigma(params.rates.forward_median_mbps, params.rates.forward_p99_mbps), 4
        ),
    )


def quantile_points(rng: random.Random, n: int, per_minute: int) -> list[float]:
    """The n probabilities (k + 0.5) / n, k < n, in the order the n slots take them:
    each minute's `per_minute` slots take one from each of the `per_minute` equal
    strata of them, in a random order (n is a whole number of minutes)."""
    points = [(k + 0.5) / n for k in range(n)]
    size = n // per_minute
    strata = [points[i * size : (i + 1) * size] for i in range(per_minute)]
    for stratum in strata:
        rng.shuffle(stratum)
    out: list[float] = []
    for minute in range(size):
        group = [stratum[minute] for stratum in strata]
        rng.shuffle(group)
        out += group
    return out


def draw_slots(params: Params, geo_slots: list[leo.Slot], f: Fitted) -> list[Slot]:
    rng = random.Random(params.seed)
    n = len(geo_slots)
    per_minute = round(60 / params.slots.period_s)
    excess_u, fwd_u, ret_u = (quantile_points(rng, n, per_minute) for _ in range(3))
    lo, hi = params.rates.forward_range_mbps
    slots = []
    for k, g in enumerate(geo_slots):
        if g.satellite is None:
            at = params.slots.first_boundary_s + k * params.slots.period_s
            raise ValidationFailed(
                "geometry",
                [f"the slot at link time {at:g} s has no satellite above min_elevation_deg: "
                 "choose another start or terminal"],
            )  # fmt: skip
        terminal, gateway = leo.delays_ms(g)
        spike_lo, spike_hi = params.event.spike_ms
        fwd = fit.lognormal_quantile(fwd_u[k], params.rates.forward_median_mbps, f.rate_sigma)
        ret = fit.lognormal_quantile(ret_u[k], params.rates.return_median_mbps, f.rate_sigma)
        slots.append(
            Slot(
                at_s=round(params.slots.first_boundary_s + k * params.slots.period_s, 6),
                satellite=g.satellite,
                terminal_ms=terminal,
                gateway_ms=gateway,
                excess_ms=round(
                    fit.truncnorm_quantile(excess_u[k], f.excess_mu_ms, f.excess_sigma_ms), 4
                ),
                spike_ms=round(spike_lo + rng.random() * (spike_hi - spike_lo), 3),
                forward_mbps=round(min(hi, max(lo, fwd)), 3),
                return_mbps=round(ret, 3),
            )
        )
    return slots


def framing_ms(slot: Slot, f: Fitted, spike_ms: float = 0.0) -> float:
    """One direction's framing delay in a slot, with a spike (RTT, ms) on top: half the
    RTT beyond the geometry."""
    return round((f.ground_ms + slot.excess_ms + spike_ms) / 2, 4)


def _direction(slot: Slot, f: Fitted, way: str, spike: bool) -> dict[str, Any]:
    forward = way == "forward"
    return {
        # forward: gateway -> satellite -> terminal; return the other way round.
        "uplink_delay_ms": slot.gateway_ms if forward else slot.terminal_ms,
        "downlink_delay_ms": slot.terminal_ms if forward else slot.gateway_ms,
        "framing_delay_ms": framing_ms(slot, f, slot.spike_ms if spike else 0.0),
        "rate_mbps": slot.forward_mbps if forward else slot.return_mbps,
    }


def steady(slot: Slot, f: Fitted, way: str) -> dict[str, Any]:
    """A direction between events: the slot's delays and rate, the background loss."""
    return _direction(slot, f, way, spike=False) | {"loss": _loss(f.background_loss)}


def _loss(p: float) -> dict[str, float] | None:
    return {"packet_rate": p} if p > 0 else None


def _both(change: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {"forward": dict(change), "return": dict(change)}


def schedule(params: Params, slots: list[Slot], f: Fitted, schedule_id: str | None) -> Schedule:
    """Per slot: the event's start before the boundary (the old slot's delays plus the
    spike, the event's loss), the boundary (the new slot's delays plus the spike, its
    rates, the event's loss, an outage if any), the outage's end, the event's end (the
    new slot's delays, the background loss). The loop starts at link time 0 in the state
    of the last slot, which wraps around."""
    ev = params.event
    outages = ev.outage_ms > 0
    event_loss, background = _loss(ev.loss), _loss(f.background_loss)
    flag = {"outage": False} if outages else {}
    steps: list[dict[str, Any]] = [
        {"at_s": 0} | {w: steady(slots[-1], f, w) | flag for w in ("forward", "return")}
    ]
    for k, slot in enumerate(slots):
        before = slots[k - 1]  # the slot the event starts in (the last one for k = 0)
        b = slot.at_s
        if ev.before_ms > 0:
            # The boundary's spike, on the delay of the slot still in force.
            spiked = {"framing_delay_ms": framing_ms(before, f, slot.spike_ms), "loss": event_loss}
            steps.append({"at_s": round(b - ev.before_ms / 1000, 6)} | _both(spiked))
        at_b: dict[str, Any] = {"at_s": b}
        for w in ("forward", "return"):
            at_b[w] = _direction(slot, f, w, spike=True) | {"loss": event_loss}
            if outages:
                at_b[w]["outage"] = True
        steps.append(at_b)
        end = {"framing_delay_ms": framing_ms(slot, f), "loss": background}
        if outages and ev.outage_ms < ev.after_ms:
            steps.append({"at_s": round(b + ev.outage_ms / 1000, 6)} | _both({"outage": False}))
        elif outages:
            end["outage"] = False
        steps.append({"at_s": round(b + ev.after_ms / 1000, 6)} | _both(end))
    return Schedule(
        version=1,
        id=schedule_id,
        end=End.loop,
        length_s=params.slots.loop_s,
        clock=Clock.utc,
        slot_s=params.slots.period_s,
        slot_offset_s=params.slots.first_boundary_s,
        steps=[Step.model_validate(s) for s in steps],
    )


def summary(slots: list[Slot], f: Fitted) -> dict[str, float]:
    """Figures of the schedule made, for its header and the command's output."""
    floors = sorted(f.ground_ms + s.geometry_rtt_ms + s.excess_ms for s in slots)
    steps = sorted(
        abs((s.excess_ms + s.geometry_rtt_ms) - (p.excess_ms + p.geometry_rtt_ms))
        for p, s in zip(slots, slots[1:] + slots[:1], strict=True)
    )
    fwd = sorted(s.forward_mbps for s in slots)
    return {
        "floor_min_ms": floors[0],
        "floor_median_ms": _median(floors),
        "floor_max_ms": floors[-1],
        "step_median_ms": _median(steps),
        "step_max_ms": steps[-1],
        "forward_median_mbps": _median(fwd),
        "forward_min_mbps": fwd[0],
        "forward_max_mbps": fwd[-1],
        "return_median_mbps": _median(sorted(s.return_mbps for s in slots)),
    }


def _median(xs: list[float]) -> float:
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def handovers(slots: list[Slot]) -> int:
    return sum(
        s.satellite != p.satellite for p, s in zip(slots[-1:] + slots[:-1], slots, strict=True)
    )


def iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
