"""Link profiles: profiles/<name>.yaml, read into typed models.

A profile describes both directions of the link. forward = gateway -> terminal (server
to client, the direction pages travel), return = terminal -> gateway. Each direction
crosses two hops: uplink (ground station -> satellite) and downlink (satellite -> ground
station). The idle round-trip time is therefore the sum, over both directions, of
uplink + downlink + framing delay.

A profile may change over time: `schedule:` (or `schedule_file: NAME.yaml` under
schedules/ beside it) lists steps that change rate, delay, loss or cut the link
(clarke.schedules, docs/schedules.md). read() resolves the file and the schedule's id.
A direction may add `jitter:` (an extra delay drawn per packet, satlink only), and the
profile lists under `validation:` the published figures it is held against
(clarke.published, docs/validation.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator

from clarke import link_points, paths, schema
from clarke.errors import InputError, UnknownName
from clarke.json_value import JsonObject
from clarke.published import PublishedFigure
from clarke.queues import Queue
from clarke.schedules import Schedule, limits
from clarke.schedules import files as schedule_files
from clarke.schedules.model import MAX_RATE_MBPS
from clarke.schema import StrictModel, located_error

# What satlink holds (satlink-model's config.rs): rates and queue sizes as unsigned 64-bit
# integers, delays finite. The limits (here and in clarke.queues) keep every profile that
# validates within them, so a profile is refused when read, never when the link starts.
# MAX_RATE_MBPS (clarke.schedules.model): 1 Tb/s, far inside satlink's 2^64 - 1 b/s.


class PacketLoss(StrictModel):
    packet_rate: float = Field(ge=0, lt=1)


class BitErrors(StrictModel):
    bit_error_rate: float = Field(ge=0, lt=1e-2)


MAX_JITTER_MS = 10_000.0  # satlink-model's jitter.rs: MAX_JITTER_MS


class ExponentialJitter(StrictModel):
    mean_ms: float = Field(gt=0, le=MAX_JITTER_MS, allow_inf_nan=False)


class UniformJitter(StrictModel):
    max_ms: float = Field(gt=0, le=MAX_JITTER_MS, allow_inf_nan=False)


class Jitter(StrictModel):
    """An extra delay drawn for every packet (satlink's `jitter`): exponential with a
    mean, or uniform in [0, max_ms]. Packets never overtake each other: one whose draw
    would make it due before the packet ahead is due with it, as behind a real queue."""

    exponential: ExponentialJitter | None = None
    uniform: UniformJitter | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Jitter:
        if (self.exponential is None) == (self.uniform is None):
            raise located_error((), "give exactly one of exponential: {mean_ms}, uniform: {max_ms}")
        return self

    @property
    def mean_ms(self) -> float:
        if self.exponential is not None:
            return self.exponential.mean_ms
        assert self.uniform is not None
        return self.uniform.max_ms / 2

    def to_satlink(self) -> dict[str, dict[str, float]]:
        return self.model_dump(exclude_none=True)


class Dama(StrictModel):
    """Capacity on demand on the return link (DVB-RCS2 DAMA, ETSI EN 301 545-2): the
    terminal sends only in the capacity the gateway grants it per superframe, a constant
    assignment and what it requests, granted an allocation latency later (satlink's
    `dama`, satlink/README.md)."""

    superframe_ms: float = Field(ge=1, le=1000, allow_inf_nan=False)
    cra_kbps: float = Field(default=0, ge=0, le=1e9, allow_inf_nan=False)
    rbdc_max_kbps: float = Field(default=0, ge=0, le=1e9, allow_inf_nan=False)
    vbdc_max_kbit: float = Field(default=0, ge=0, le=1e9, allow_inf_nan=False)
    request_period_sf: int = Field(default=1, ge=1, le=1000)
    allocation_latency_ms: float = Field(le=10_000, allow_inf_nan=False)
    rbdc_timeout_sf: int = Field(default=16, ge=1, le=100_000)

    @model_validator(mode="after")
    def _some_capacity(self) -> Dama:
        if self.allocation_latency_ms < self.superframe_ms:
            raise located_error(("allocation_latency_ms",), "must be at least one superframe")
        if not (self.cra_kbps or self.rbdc_max_kbps or self.vbdc_max_kbit):
            raise located_error(
                ("cra_kbps",), "no capacity: give cra_kbps, rbdc_max_kbps or vbdc_max_kbit"
            )
        return self


class Direction(StrictModel):
    rate_mbps: float = Field(
        ge=0, le=MAX_RATE_MBPS, allow_inf_nan=False, description="0 means unlimited"
    )
    uplink_delay_ms: float = Field(ge=0, le=10_000)
    downlink_delay_ms: float = Field(ge=0, le=10_000)
    framing_delay_ms: float = Field(default=0, ge=0, le=10_000)
    queue: Queue = Queue()
    loss: PacketLoss | BitErrors | None = None
    jitter: Jitter | None = None
    dama: Dama | None = None

    @property
    def one_way_delay_ms(self) -> float:
        return self.uplink_delay_ms + self.downlink_delay_ms + self.framing_delay_ms

    def to_satlink(self, seed: int) -> JsonObject:
        """This direction as satlink's configuration (satlink/README.md)."""
        loss: dict[str, float] | None = None
        if isinstance(self.loss, PacketLoss):
            loss = {"packet_rate": self.loss.packet_rate}
        elif isinstance(self.loss, BitErrors):
            loss = {"bit_error_rate": self.loss.bit_error_rate}
        out: JsonObject = {
            "rate_bps": round(self.rate_mbps * 1_000_000),
            "queue": self.queue.bound().to_satlink(),
            "uplink_delay_ms": self.uplink_delay_ms,
            "downlink_delay_ms": self.downlink_delay_ms,
            "framing_delay_ms": self.framing_delay_ms,
            "loss": loss,
            "seed": seed,
        }
        discipline = self.queue.satlink_discipline()
        if discipline is not None:
            out["discipline"] = discipline
        if self.jitter is not None:
            out["jitter"] = self.jitter.to_satlink()
        if self.dama is not None:
            out["dama"] = self.dama.model_dump()
        return out


class Tolerance(StrictModel):
    rtt_pct: float = Field(default=1.0, gt=0)
    rtt_ms: float = Field(default=1.0, ge=0, description="absolute floor for short links")
    rate_pct: float = Field(default=3.0, gt=0)


DELAY_FIELDS = ("uplink_delay_ms", "downlink_delay_ms", "framing_delay_ms")


# Bounded, so that the largest profile that validates is a body the link agents take
# (clarke.schedules.limits.PROFILE_REST_BYTES).
MAX_DESCRIPTION_CHARS = 4000
MAX_SOURCES = 64
MAX_SOURCE_CHARS = 1000


class LinkProfile(StrictModel):
    description: str = Field(max_length=MAX_DESCRIPTION_CHARS)
    sources: Annotated[
        list[Annotated[str, Field(max_length=MAX_SOURCE_CHARS)]],
        Field(default_factory=list, max_length=MAX_SOURCES),
    ]
    forward: Direction
    return_: Direction = Field(alias="return")
    tolerance: Tolerance = Tolerance()
    schedule: Schedule | None = None
    schedule_file: str | None = Field(default=None, pattern=schedule_files.FILE_PATTERN)
    validation: Annotated[list[PublishedFigure], Field(default_factory=list)]

    @model_validator(mode="after")
    def _one_schedule(self) -> LinkProfile:
        if self.schedule is not None and self.schedule_file is not None:
            raise located_error(("schedule_file",), "give either schedule or schedule_file")
        return self

    @model_validator(mode="after")
    def _dama_on_the_return_link(self) -> LinkProfile:
        if self.forward.dama is not None:
            raise located_error(
                ("forward", "dama"), "capacity on demand is the return link's (terminal -> gateway)"
            )
        if self.return_.dama is not None and self.return_.rate_mbps <= 0:
            raise located_error(
                ("return", "dama"), "needs the return link's rate_mbps (the carrier's)"
            )
        return self

    @model_validator(mode="after")
    def _queue_bounds(self) -> LinkProfile:
        """Each queue's bound given: the discipline's default, a bdp bound as ms of the
        rate in force (bdp x the idle RTT; clarke.queues)."""
        rtt = self.idle_rtt_ms
        ways = {"forward": self.forward, "return_": self.return_}
        resolved = {
            k: d.model_copy(update={"queue": d.queue.resolved(rtt)}) for k, d in ways.items()
        }
        if all(resolved[k] == ways[k] for k in ways):
            return self
        return self.model_copy(update=resolved)

    @property
    def idle_rtt_ms(self) -> float:
        return self.forward.one_way_delay_ms + self.return_.one_way_delay_ms

    @property
    def lossy(self) -> bool:
        fixed = any(
            d.loss is not None and next(iter(d.loss.model_dump().values())) > 0
            for d in (self.forward, self.return_)
        )
        steps = self.schedule.steps if self.schedule else []
        return fixed or any(
            c is not None and c.loss is not None for s in steps for c in (s.forward, s.return_)
        )

    @property
    def jittery(self) -> bool:
        return self.forward.jitter is not None or self.return_.jitter is not None

    @property
    def scheduled(self) -> bool:
        return self.schedule is not None or self.schedule_file is not None

    def in_force(self, direction: str) -> list[tuple[float, float, float]]:
        """(at_s, one-way delay ms, rate Mb/s) after each step of the schedule, in one
        direction: each step changes only what it names; the rate is 0 during an
        outage. Empty without a schedule."""
        base = self.forward if direction == "forward" else self.return_
        delays = {k: float(getattr(base, k)) for k in DELAY_FIELDS}
        rate, outage = float(base.rate_mbps), False
        out = []
        for step in self.schedule.steps if self.schedule else []:
            change = step.change(direction)
            if change is not None:
                named = change.model_fields_set
                delays |= {k: float(getattr(change, k)) for k in DELAY_FIELDS if k in named}
                if "rate_mbps" in named:
                    rate = float(change.rate_mbps or 0.0)
                if "outage" in named:
                    outage = bool(change.outage)
            out.append((step.at_s, sum(delays.values()), 0.0 if outage else rate))
        return out

    def to_satlink_config(self, seed: int = 1, name: str = "link") -> JsonObject:
        """The whole link as satlink's --config JSON: {"forward": DIR, "return": DIR},
        and "schedule" when the profile has one (its id defaults to NAME-<digest>).
        Each direction gets its own seed so that their loss patterns differ."""
        if self.schedule_file is not None:
            raise InputError(
                f"link profile {name!r}: schedule_file {self.schedule_file} was not read "
                "(read profiles with clarke.profiles.read)"
            )
        config: JsonObject = {
            "forward": self.forward.to_satlink(seed),
            "return": self.return_.to_satlink(seed + 1),
        }
        if self.schedule is not None:
            config["schedule"] = self.schedule.to_satlink(name)
        return config


def profile_dir() -> Path:
    return paths.data_dir("profiles")


def available() -> list[str]:
    return sorted(p.stem for p in profile_dir().glob("*.yaml"))


def read(name: str) -> LinkProfile:
    """A shipped profile by name, or a profile file by path (NAME.yaml); its
    schedule_file read in, and its schedule's id set. A link point's name (the profile's
    name + its swept parameters: clarke.link_points) reads the profile with them in force,
    validated as a profile file holding them would be."""
    base, overrides = link_points.split(name)
    if base.endswith((".yaml", ".yml")):
        path = Path(base)
    else:
        path = profile_dir() / f"{base}.yaml"
        if not path.is_file():
            raise UnknownName("link profile", base, available())
    data = schema.read_yaml(path, limits.max_file_bytes(), limits.HOW_TO_RAISE, limits.count_steps)
    if overrides and isinstance(data, dict):
        source = f"{path} with {', '.join(f'{k} {v}' for k, v in overrides.items())}"
        return resolve(
            schema.parse(LinkProfile, link_points.apply(base, data, overrides), source), path
        )
    return resolve(schema.parse(LinkProfile, data, str(path)), path)


def resolve(profile: LinkProfile, path: Path) -> LinkProfile:
    """The profile read from `path` with its schedule_file read in (schedules/ beside
    it) and its schedule's id defaulted to <profile name>-<first 12 hex of its digest>."""
    schedule = profile.schedule
    if profile.schedule_file is not None:
        schedule = schedule_files.read(
            schedule_files.schedule_path(path, profile.schedule_file), referenced_by=str(path)
        )
    if schedule is None:
        return profile
    return profile.model_copy(
        update={"schedule": schedule.with_id(path.stem), "schedule_file": None}
    )


def help_text() -> str:
    """The shipped profiles, for --help."""
    try:
        return f"Link profile: {', '.join(available())}, or a profile file NAME.yaml."
    except FileNotFoundError:
        return "Link profile (profiles/NAME.yaml)."
