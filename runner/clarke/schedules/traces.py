"""`clarke link schedule import`: recorded link traces as schedule steps.

mahimahi delivery-opportunity traces (mahimahi's mm-link): one integer per line, a time
in milliseconds at which one 1,500-byte packet may be delivered; the trace repeats after
its last timestamp. Per interval (default 1 s) the rate is opportunities x 1,500 x 8 bits
over the interval's length; an interval without any opportunity is an outage (mahimahi
would hold the packets back; satlink drops what would start serialization: a difference
docs/schedules.md points out). The schedule loops over the trace's period.

CSV series: a header naming t_s and any of rate_mbps, delay_ms, loss; one row per change
in time. delay_ms is the direction's one-way delay: it becomes uplink_delay_ms =
downlink_delay_ms = delay_ms / 2 and framing_delay_ms = 0; loss is a packet loss
probability (0: no loss); rate_mbps 0 is an outage."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TypeAlias

from clarke import schema
from clarke.errors import InputError, ValidationFailed
from clarke.schedules import files as schedule_files
from clarke.schedules import limits
from clarke.schedules.model import End, Schedule, Step

PACKET_BITS = 1500 * 8
CSV_COLUMNS = ("rate_mbps", "delay_ms", "loss")
# A direction's parameters from one row on: rates and delays, outage, loss's model.
State: TypeAlias = dict[str, float | bool | dict[str, float] | None]


def read_mahimahi(path: Path) -> list[int]:
    """The timestamps (ms) of a mahimahi trace; ValidationFailed naming the line, or the
    limit (clarke.schedules.limits) a trace too long for it passes."""
    most = limits.max_trace_lines()
    # A line is at most a 20-digit number and its newline: the size says enough first.
    text = schema.read_text(path, most * 21, limits.HOW_TO_RAISE)
    out: list[int] = []
    for n, line in enumerate(text.splitlines(), 1):
        if n > most:
            raise ValidationFailed(
                str(path),
                [f"more than {most:,} lines: a trace has at most {limits.TRACE_LINES_PER_STEP} "
                 f"lines per schedule step ({limits.HOW_TO_RAISE})"],
            )  # fmt: skip
        if not line.strip():
            continue
        try:
            ms = int(line.strip())
        except ValueError:
            raise ValidationFailed(
                str(path), [f"line {n}: {line.strip()!r} is not a timestamp in whole ms"]
            ) from None
        if ms < 0 or (out and ms < out[-1]):
            raise ValidationFailed(
                str(path), [f"line {n}: {ms} must be >= 0 and not before the line above"]
            )
        out.append(ms)
    if not out or out[-1] == 0:
        raise ValidationFailed(str(path), ["no timestamp after 0 ms: the trace has no period"])
    return out


def mahimahi_rates(timestamps: list[int], interval_ms: int) -> list[tuple[float, float]]:
    """(start in s, rate in Mb/s) per interval over the trace's period (its last
    timestamp). An opportunity at t ms belongs to the interval (k I, (k + 1) I] (t = 0 to
    the first): a trace of 1, 2, ... 1000 is one interval of 1,000 packets."""
    if interval_ms <= 0:
        raise InputError("--interval-s must be at least 1 ms")
    period = timestamps[-1]
    n = math.ceil(period / interval_ms)
    limits.check_count(
        n, f"a trace of {period / 1000:g} s in intervals of {interval_ms} ms", "intervals"
    )
    counts = [0] * n
    for ts in timestamps:
        counts[max(0, math.ceil(ts / interval_ms) - 1)] += 1
    out = []
    for k, count in enumerate(counts):
        length_ms = min(interval_ms, period - k * interval_ms)
        out.append((k * interval_ms / 1000, round(count * PACKET_BITS / length_ms / 1000, 6)))
    return out


def rate_states(rates: list[tuple[float, float]]) -> list[tuple[float, State]]:
    return [(t, _rate_state(r)) for t, r in rates]


def _rate_state(rate_mbps: float) -> State:
    return {"outage": True} if rate_mbps == 0 else {"rate_mbps": rate_mbps, "outage": False}


def read_series(path: Path) -> list[tuple[float, State]]:
    """A CSV series as (t_s, state) rows; ValidationFailed naming the line and column."""
    rows = schedule_files.read_csv(path, ("t_s",))
    columns = [c for c in rows[0][1] if c != "t_s"]
    unknown = [c for c in columns if c not in CSV_COLUMNS]
    if unknown or not columns:
        raise ValidationFailed(
            str(path),
            [
                f"header: columns {', '.join(unknown) or '(none)'}: give t_s and any of "
                f"{', '.join(CSV_COLUMNS)}"
            ],
        )
    out: list[tuple[float, State]] = []
    for line, row in rows:
        t = row["t_s"]
        if not out and t != 0:
            raise ValidationFailed(str(path), [f"line {line}: t_s: the first row must be at 0"])
        if out and t <= out[-1][0]:
            raise ValidationFailed(
                str(path), [f"line {line}: t_s: {t:g} is not after {out[-1][0]:g}"]
            )
        state: State = {}
        if "rate_mbps" in row:
            if row["rate_mbps"] < 0:
                raise ValidationFailed(str(path), [f"line {line}: rate_mbps: below 0"])
            state |= _rate_state(row["rate_mbps"])
        if "delay_ms" in row:
            d = row["delay_ms"]
            if d < 0:
                raise ValidationFailed(str(path), [f"line {line}: delay_ms: below 0"])
            state |= {"uplink_delay_ms": d / 2, "downlink_delay_ms": d / 2, "framing_delay_ms": 0}
        if "loss" in row:
            p = row["loss"]
            if not 0 <= p < 1:
                raise ValidationFailed(str(path), [f"line {line}: loss: {p:g} is not in [0, 1)"])
            state["loss"] = {"packet_rate": p} if p > 0 else None
        out.append((t, state))
    return out


def default_length_s(times: list[float]) -> float:
    """A series' loop length: its last row held as long as the interval before it (1 s
    for a single row)."""
    return times[-1] + (times[-1] - times[-2] if len(times) > 1 else 1.0)


def schedule(
    series: dict[str, list[tuple[float, State]]],
    end: End,
    length_s: float | None,
    schedule_id: str | None = None,
) -> Schedule:
    """Steps from each direction's states: a direction's first state in full, then only
    the fields that change."""
    by_time: dict[float, dict[str, State]] = {}
    for direction, states in series.items():
        prev: State = {}
        for t, state in states:
            change = {k: v for k, v in state.items() if k not in prev or prev[k] != v}
            prev |= state
            if change:
                by_time.setdefault(t, {})[direction] = change
    steps = [Step.model_validate({"at_s": t, **dirs}) for t, dirs in sorted(by_time.items())]
    return Schedule.made(steps, end, length_s, schedule_id)
