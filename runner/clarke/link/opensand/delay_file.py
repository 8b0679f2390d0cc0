"""A link schedule on OpenSAND 8.2: its delay steps as a file for the FileDelay plugin
(physical_layer/delay, delay_type FileDelay), and why anything else is refused.

What OpenSAND 8.2's FileDelay does (its source, opensand-core physical_layer/plugins/
satdelay/file): every `refresh_period` ms it advances a tick counter by one and sets the
delay to the file's value at that tick, interpolating linearly between the entries
around it (lines "TICK DELAY_MS", integers, `#` comments). With `loop` it starts again
at tick 0 after the last entry; without it, it reads past the end of its table (a C++
reverse iterator dereferenced at rend()), so every file here ends with an entry far in
the future and never gets there. A step therefore takes two entries: the old value one
tick before the step and the new value at it.

Where the delay goes: ConstantDelay puts delay_value on every hop at GW and ST (RTT = 4 x
delay_value + 22..25 ms, mapping.py). A schedule puts the whole delay at the gateway
(2 x delay_value) and none at the terminal: each entity counts ticks from its own start,
and the terminal starts seconds after the gateway, so a schedule split between them
would change the RTT in two halves, seconds apart. At the gateway it has one clock, which
starts when the gateway does.

The refresh period: FileDelay counts timer ticks, and each tick comes a little late, so
its clock runs slow by a fixed time per tick. Measured here with a 4 s square wave
(docs/opensand.md): 1.5-3 % slow with 10 ms ticks, 0.2 % with 100 ms. So the period is
the longest that puts every step on a tick: the greatest common divisor of the step
times and the loop's length, at most 1 s and at least 10 ms."""

from __future__ import annotations

import math
from typing import Final

from clarke.profiles import DELAY_FIELDS, LinkProfile
from clarke.schedules.model import Clock, End

MAX_REFRESH_MS: Final = 1000
MIN_REFRESH_MS: Final = 10
# An entry far after the last step (over a year of 10 ms ticks): OpenSAND never reads
# past its table's end. unsigned int holds it.
HOLD_TICK: Final = 4_000_000_000
DIRECTIONS: Final = ("forward", "return")


def problems(profile: LinkProfile, overhead_range: tuple[float, float]) -> list[str]:
    """Each part of the profile's schedule OpenSAND cannot follow, naming the step and
    field; [] for a schedule of delays it can."""
    schedule = profile.schedule
    if schedule is None:
        return []
    out: list[str] = []
    if schedule.clock is not Clock.apply:
        out.append(
            f"schedule.clock: {schedule.clock.value} cannot be followed: OpenSAND's FileDelay "
            "counts its ticks from the gateway's start, not from the Unix time"
        )
    refused: dict[tuple[str, str], list[int]] = {}
    for i, step in enumerate(schedule.steps):
        for d in DIRECTIONS:
            change = step.change(d)
            if change is None:
                continue
            base = profile.forward if d == "forward" else profile.return_
            for key in sorted(change.model_fields_set - set(DELAY_FIELDS)):
                value = getattr(change, key)
                # What OpenSAND does anyway: no outage, no loss, the profile's own rate.
                harmless = (key == "outage" and value is False) or (key == "loss" and value is None)
                if not harmless and not (key == "rate_mbps" and value == base.rate_mbps):
                    refused.setdefault((d, key), []).append(i)
    for (d, key), steps in refused.items():
        shown = ", ".join(str(i) for i in steps[:5]) + (", ..." if len(steps) > 5 else "")
        out.append(
            f"schedule.steps[{shown}].{d}.{key}: OpenSAND follows a schedule's delays only "
            "(its FileDelay plugin): its rates are a carrier and a DAMA assignment set at "
            "start, it has no loss model or outage, and its attenuation file moves the "
            "MODCOD, not a rate Clarke can set; use --link satlink"
        )
    forward, back = profile.in_force("forward"), profile.in_force("return")
    for i, ((at_s, fwd, _), (_, ret, _)) in enumerate(zip(forward, back, strict=True)):
        if abs(fwd - ret) > 1e-9:
            out.append(
                f"schedule.steps[{i}]: one-way delays differ ({fwd:g} ms forward, {ret:g} "
                "ms return): OpenSAND has one delay for both directions"
            )
        if fwd + ret < overhead_range[1]:
            out.append(
                f"schedule.steps[{i}]: idle RTT {fwd + ret:g} ms is below what OpenSAND "
                f"adds with no delay at all ({overhead_range[0]:g}-{overhead_range[1]:g} ms)"
            )
        if abs(at_s * 1000 / MIN_REFRESH_MS - round(at_s * 1000 / MIN_REFRESH_MS)) > 1e-6:
            out.append(
                f"schedule.steps[{i}].at_s: {at_s:g} is not on OpenSAND's {MIN_REFRESH_MS} ms "
                "grid: its delay changes once per refresh period"
            )
    return out


def refresh_ms(profile: LinkProfile) -> int:
    """The longest refresh period (ms) with every step, and a loop's end, on a tick."""
    schedule = profile.schedule
    assert schedule is not None
    times = [round(step.at_s * 1000) for step in schedule.steps]
    if schedule.end is End.loop and schedule.length_s is not None:
        times.append(round(schedule.length_s * 1000))
    period = MAX_REFRESH_MS
    for t in times:
        period = math.gcd(period, t)
    return max(period, MIN_REFRESH_MS)


def gateway_delay_ms(idle_rtt_ms: float, rtt_overhead_ms: float) -> int:
    """The gateway's delay_value for an idle RTT, with the terminal's at 0: the gateway
    adds its delay on the way out and on the way in, RTT = 2 x value + overhead."""
    return max(0, round((idle_rtt_ms - rtt_overhead_ms) / 2))


def text(profile: LinkProfile, rtt_overhead_ms: float) -> str:
    """The gateway's FileDelay file for the profile's schedule (checked by problems()),
    in ticks of refresh_ms(profile)."""
    schedule = profile.schedule
    assert schedule is not None
    tick_ms = refresh_ms(profile)
    steps = [
        (round(at_s * 1000) // tick_ms, gateway_delay_ms(fwd + ret, rtt_overhead_ms))
        for (at_s, fwd, _), (_, ret, _) in zip(
            profile.in_force("forward"), profile.in_force("return"), strict=True
        )
    ]
    lines = [
        f"# Clarke: schedule {schedule.id} for OpenSAND's FileDelay at the gateway.",
        f"# TICK ({tick_ms} ms from the gateway's start) DELAY_MS; a step is the old",
        "# value one tick before it and the new one at it (FileDelay interpolates).",
    ]
    entries: list[tuple[int, int]] = []
    for tick, value in steps:
        if entries and tick - 1 > entries[-1][0]:
            entries.append((tick - 1, entries[-1][1]))
        entries.append((tick, value))
    if schedule.end is End.loop:
        assert schedule.length_s is not None
        last = round(schedule.length_s * 1000) // tick_ms - 1
        if last > entries[-1][0]:
            entries.append((last, entries[-1][1]))
    else:
        entries.append((HOLD_TICK, entries[-1][1]))
    lines += [f"{tick} {value}" for tick, value in entries]
    return "\n".join(lines) + "\n"
