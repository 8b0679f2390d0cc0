"""Link parameters swept over a base profile: the campaign axes `rtt_ms`, `rate_mbps`,
`loss`, `queue_ms`, `discipline` and their per-direction forms ([M], [C]: a study's x-axis
is an RTT, a loss rate, a rate or a buffer, as Mahimahi's `mm-delay 50 mm-loss downlink
0.01` sets them).

A link point is a profile's name and the parameters it overrides, written as one name:

    wired-10m-50ms+rtt_ms=100+loss=0.015

clarke.profiles.read reads such a name as it reads a profile's: the overrides change the
profile's data before it is validated, so a point passes the same checks and keeps the
same tolerance rules as a profile file holding those values, and the link, its checks and
its records know it by this name. A point is not the profile its sources describe: its
`validation:` figures are left out, and its description says what was changed.

What each parameter sets, in both directions unless its name says one:
    rtt_ms            the idle round-trip time: each direction's one-way delay is half of
                      it, split over its two hops, without framing delay
    rate_mbps         the rate (forward_rate_mbps, return_rate_mbps: one direction)
    loss              random packet loss, a fraction (forward_loss, return_loss)
    discipline        the queue's discipline, its bound kept
    queue_ms          the queue's bound, in ms of data at the rate, its discipline kept
A profile with a schedule takes none: its parameters change over time."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from clarke.errors import InputError
from clarke.json_value import JsonObject
from clarke.queues import MAX_QUEUE_MS, Limit, Queue
from clarke.schedules.model import MAX_RATE_MBPS
from clarke.vocab import QueueDiscipline

PROFILE_OWN = "profile"  # a cell's value where the profile's own parameter stands
SEPARATOR = "+"
MAX_RTT_MS = 20_000.0  # each hop at most 5 s (a profile's hop takes up to 10 s)

Direction = JsonObject  # one direction of a profile's data, as read from YAML


@dataclass(frozen=True)
class Parameter:
    """One link parameter a campaign may sweep: its name (the campaign key, the record
    field and the InfluxDB tag), what it sets, its range, its part of run ids and legends."""

    name: str
    help: str
    column: str
    run_id: str  # prefix of its run-id part: rtt100
    label: str  # its part of a legend: RTT 100 ms
    unit: str
    directions: tuple[str, ...]
    set_in: Callable[[Direction, str], None]
    # Numbers: the open or closed range; vocabulary: the values.
    low: float = 0.0
    high: float = 0.0
    low_inclusive: bool = False
    high_inclusive: bool = True
    choices: tuple[str, ...] = ()
    # Another parameter it may not be given with in one cell (both set the same field).
    excludes: str = ""

    def text(self, value: object) -> str:
        """`value` as a cell keeps it (PROFILE_OWN or a number's shortest text), or
        ValueError naming the allowed values."""
        if isinstance(value, str) and value == PROFILE_OWN:
            return value
        if self.choices:
            if value not in self.choices:
                raise ValueError(f"{self.name}: {value!r} is not one of {self.allowed()}")
            return str(value)
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"{self.name}: {value!r} is not a number ({self.allowed()})")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{self.name}: {value!r} is not a number ({self.allowed()})") from None
        above_low = number >= self.low if self.low_inclusive else number > self.low
        below_high = number <= self.high if self.high_inclusive else number < self.high
        if not (above_low and below_high):
            raise ValueError(f"{self.name}: {value!r} is out of range ({self.allowed()})")
        return str(int(number)) if number.is_integer() else repr(number)

    def allowed(self) -> str:
        if self.choices:
            return f"{PROFILE_OWN}, {', '.join(self.choices)}"
        opening = "[" if self.low_inclusive else "("
        closing = "]" if self.high_inclusive else ")"
        span = f"{opening}{self.low:g}, {self.high:g}{closing}"
        return f"{PROFILE_OWN}, or a number in {span} {self.unit}".rstrip()


def _set_rtt(d: Direction, value: str) -> None:
    one_way = float(value) / 2
    d |= {"uplink_delay_ms": one_way / 2, "downlink_delay_ms": one_way / 2, "framing_delay_ms": 0}


def _set_rate(d: Direction, value: str) -> None:
    d["rate_mbps"] = float(value)


def _set_loss(d: Direction, value: str) -> None:
    d["loss"] = {"packet_rate": float(value)} if float(value) > 0 else None


def _queue(d: Direction) -> Queue:
    return Queue.model_validate(d.get("queue") or {})


def _set_discipline(d: Direction, value: str) -> None:
    # The other discipline's parameters (CoDel's target ...) do not carry over.
    d["queue"] = Queue(discipline=QueueDiscipline(value), limit=_queue(d).limit).model_dump(
        mode="json", exclude_none=True
    )


def _set_queue_ms(d: Direction, value: str) -> None:
    limited = _queue(d).model_copy(update={"limit": Limit(ms=float(value))})
    d["queue"] = limited.model_dump(mode="json", exclude_none=True)


BOTH = ("forward", "return")


def _rate(name: str, directions: tuple[str, ...], label: str) -> Parameter:
    where = "both directions" if directions == BOTH else f"the {directions[0]} direction"
    return Parameter(
        name=name,
        help=f"the link's rate in {where}, Mb/s, over the profile's",
        column=name.replace("_mbps", "").replace("_", " "),
        run_id={"rate_mbps": "rate", "forward_rate_mbps": "frate"}.get(name, "rrate"),
        label=label,
        unit="Mb/s",
        directions=directions,
        set_in=_set_rate,
        high=MAX_RATE_MBPS,
        excludes="" if directions == BOTH else "rate_mbps",
    )


def _loss(name: str, directions: tuple[str, ...], label: str) -> Parameter:
    where = "both directions" if directions == BOTH else f"the {directions[0]} direction"
    return Parameter(
        name=name,
        help=f"random packet loss in {where}, a fraction (0.01 is 1 %), over the profile's",
        column=name.replace("_", " "),
        run_id={"loss": "loss", "forward_loss": "floss"}.get(name, "rloss"),
        label=label,
        unit="",
        directions=directions,
        set_in=_set_loss,
        low_inclusive=True,
        high=1.0,
        high_inclusive=False,
        excludes="" if directions == BOTH else "loss",
    )


# In the order they are applied: a discipline before the bound it keeps.
PARAMETERS: tuple[Parameter, ...] = (
    Parameter(
        name="rtt_ms",
        help="the link's idle round-trip time, ms, over the profile's (each direction half "
        "of it, over its two hops)",
        column="rtt ms",
        run_id="rtt",
        label="RTT",
        unit="ms",
        directions=BOTH,
        set_in=_set_rtt,
        low_inclusive=True,
        high=MAX_RTT_MS,
    ),
    _rate("rate_mbps", BOTH, "rate"),
    _rate("forward_rate_mbps", ("forward",), "forward rate"),
    _rate("return_rate_mbps", ("return",), "return rate"),
    _loss("loss", BOTH, "loss"),
    _loss("forward_loss", ("forward",), "forward loss"),
    _loss("return_loss", ("return",), "return loss"),
    Parameter(
        name="discipline",
        help="the queue's discipline in both directions, its bound kept (docs/queues.md)",
        column="queue discipline",
        run_id="",
        label="",
        unit="",
        directions=BOTH,
        set_in=_set_discipline,
        choices=tuple(d.value for d in QueueDiscipline),
    ),
    Parameter(
        name="queue_ms",
        help="the queue's bound in both directions, ms of data at the rate, its discipline kept",
        column="queue ms",
        run_id="q",
        label="queue",
        unit="ms",
        directions=BOTH,
        set_in=_set_queue_ms,
        high=MAX_QUEUE_MS,
    ),
)
BY_NAME: dict[str, Parameter] = {p.name: p for p in PARAMETERS}


def point_name(profile: str, overrides: Mapping[str, str]) -> str:
    """The link point's name: the profile's, then each overridden parameter in order."""
    parts = [f"{p.name}={overrides[p.name]}" for p in PARAMETERS
             if overrides.get(p.name, PROFILE_OWN) != PROFILE_OWN]  # fmt: skip
    return SEPARATOR.join([profile, *parts])


def split(name: str) -> tuple[str, dict[str, str]]:
    """A link point's name as its profile's name and its overrides (InputError naming the
    part that is not one)."""
    profile, *parts = name.split(SEPARATOR)
    overrides: dict[str, str] = {}
    for part in parts:
        key, _, value = part.partition("=")
        parameter = BY_NAME.get(key)
        if parameter is None or not value:
            raise InputError(
                f"link {name!r}: {part!r} is not PARAMETER=VALUE with a parameter of "
                f"{', '.join(BY_NAME)}"
            )
        try:
            overrides[key] = parameter.text(value)
        except ValueError as e:
            raise InputError(f"link {name!r}: {e}") from None
    return profile, overrides


def _object(value: object) -> JsonObject:
    """A profile's direction (an object in its file, or absent) as a copy to change."""
    return dict(value) if isinstance(value, dict) else {}


def apply(profile: str, data: Mapping[str, object], overrides: Mapping[str, str]) -> JsonObject:
    """The profile's data (as read from its file) with `overrides` in force, to be
    validated as a profile; InputError naming the parameter where it cannot be."""
    given = {k: v for k, v in overrides.items() if v != PROFILE_OWN}
    if not given:
        return dict(data)
    if data.get("schedule") is not None or data.get("schedule_file") is not None:
        raise InputError(
            f"{', '.join(given)}: link profile {profile!r} has a schedule (its parameters "
            "change over time), so none can be swept over it; sweep a profile without one"
        )
    for name in given:
        other = BY_NAME[name].excludes
        if other and other in given:
            raise InputError(
                f"{other} and {name}: both set the {BY_NAME[name].directions[0]} direction's "
                "parameter; give one of them"
            )
    out = {k: v for k, v in data.items() if k != "validation"}
    ways = {way: _object(data.get(way)) for way in BOTH}
    for parameter in PARAMETERS:
        if parameter.name in given:
            for way in parameter.directions:
                parameter.set_in(ways[way], given[parameter.name])
    changed = ", ".join(f"{k} {v}" for k, v in given.items())
    description = f"{data.get('description', '')}".strip()
    return out | ways | {"description": f"{description} Swept here: {changed}."}
