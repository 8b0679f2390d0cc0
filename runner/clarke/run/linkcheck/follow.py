"""Does the link follow its schedule? Echo requests from the client to the server for a
while, each placed on the schedule's clock, against the RTT the schedule gives at that
moment: the error per step (p50, p99), and for each step that changes the RTT by more
than the probes' own spread, how long after its time the change showed on the wire.

Link time is read from the stations that shape each direction (the terminal the return
direction, the gateway the forward; each keeps its own epoch) and carried to each echo's
send time (the kernel's timestamp) by the wall clock they share. A request sent at link
time t crosses the return direction with the delay in force at t, the reply the forward
direction with the delay in force when the request arrived: expected RTT = d_ret(t) +
d_fwd(t + d_ret(t)) + the echo's serialization at each rate."""

from __future__ import annotations

import bisect
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clarke import sh
from clarke.errors import CommandFailed, InputError
from clarke.json_value import JsonObject, object_at
from clarke.profiles import LinkProfile
from clarke.run.linkcheck.check import ECHO_BYTES, Probe
from clarke.vocab import SENDER

MIN_CHANGE_MS = 0.5  # changes of the expected RTT smaller than this are not timed


@dataclass(frozen=True)
class Timeline:
    """One direction's steps: start times (s) and the one-way delay and rate in force."""

    at_s: list[float]
    delay_ms: list[float]
    rate_mbps: list[float]
    period_s: float | None  # loop length; None: the last step holds

    def index(self, link_s: float) -> int:
        t = link_s % self.period_s if self.period_s else link_s
        return max(0, bisect.bisect_right(self.at_s, t) - 1)

    def delay_at(self, link_s: float) -> float:
        i = self.index(link_s)
        rate = self.rate_mbps[i]
        serialization = ECHO_BYTES * 8 / (rate * 1e6) * 1e3 if rate > 0 else 0.0
        return self.delay_ms[i] + serialization


def timeline(profile: LinkProfile, direction: str) -> Timeline:
    if profile.schedule is None:
        raise InputError("the profile has no schedule")
    at, delays, rates = (list(c) for c in zip(*profile.in_force(direction), strict=True))
    return Timeline(at, delays, rates, profile.schedule.length_s)


def _link_clock(stats: JsonObject, direction: str) -> Callable[[int], float] | None:
    """Unix ns -> this direction's link time (s), from one stats reading."""
    asked_ns = time.time_ns()
    state = object_at(stats, direction, "schedule")
    link_ms = state.get("link_time_ms")
    if not isinstance(link_ms, int | float):
        return None
    return lambda unix_ns: link_ms / 1000 + (unix_ns - asked_ns) / 1e9


def follow(
    probe: Probe, profile: LinkProfile, duration_s: float = 60, interval_s: float = 0.01
) -> dict[str, Any]:
    if profile.schedule is None:
        raise InputError("this profile has no schedule to follow (docs/schedules.md)")
    stats = probe.link_stats()
    clocks = {d: _link_clock(object_at(stats, role), d) for d, role in SENDER.items()}
    if clocks["forward"] is None or clocks["return"] is None:
        raise InputError("the link reports no schedule clock (satlink only)")
    count = max(1, int(duration_s / interval_s))
    argv = [sys.executable, "-m", "clarke.place.echo", probe.addresses.addresses["server"]]
    argv += ["--count", str(count), "--interval", str(interval_s), "--timeout", "5"]
    proc = sh.run(probe.at_client(argv), timeout=duration_s + 60)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise CommandFailed(f"echo printed no JSON: {proc.stderr.strip()[-500:]}") from None
    fwd, ret = timeline(profile, "forward"), timeline(profile, "return")
    forward_clock, return_clock = clocks["forward"], clocks["return"]
    assert forward_clock is not None and return_clock is not None
    rows = []
    for rtt, sent in zip(data["rtts_ms"], data["sent_unix_ns"], strict=True):
        t_ret = return_clock(sent)
        d_ret = ret.delay_at(t_ret)
        t_fwd = forward_clock(sent + int(d_ret * 1e6))
        expected = d_ret + fwd.delay_at(t_fwd)
        rows.append((t_ret, ret.index(t_ret), fwd.index(t_fwd), rtt, expected))
    return summarise(rows, data["sent"], len(data["lost"]), interval_s, ret.period_s)


def summarise(
    rows: list[tuple[float, int, int, float, float]],
    sent: int,
    lost: int,
    interval_s: float,
    period_s: float | None = None,
) -> JsonObject:
    """Per (return step, forward step) in force: echoes, expected RTT, error p50 and
    p99; per change of expected RTT bigger than 3 times the echoes' own spread, the
    delay until the first echo that shows the new RTT."""
    by_step: dict[tuple[int, int], list[tuple[float, float, float]]] = {}
    for t, r_i, f_i, rtt, expected in rows:
        by_step.setdefault((r_i, f_i), []).append((t, rtt, expected))
    steps = []
    for key, items in sorted(by_step.items(), key=lambda kv: kv[1][0][0]):
        errors = sorted(rtt - exp for _, rtt, exp in items)
        steps.append(
            {
                "return_step": key[0],
                "forward_step": key[1],
                "echoes": len(items),
                "expected_rtt_ms": items[0][2],
                "error_p50_ms": statistics.median(errors),
                "error_p99_ms": errors[min(len(errors) - 1, int(0.99 * len(errors)))],
            }
        )
    # The echoes' own spread, robustly (the few echoes held behind a frame when a delay
    # drops must not count as noise): 1.4826 x the median absolute deviation.
    all_errors = sorted(r[3] - r[4] for r in rows)
    center = statistics.median(all_errors) if all_errors else 0.0
    noise = 1.4826 * statistics.median(abs(e - center) for e in all_errors) if all_errors else 0.0
    changes = []
    ordered = rows  # in send order (link times wrap with a loop)
    for i in range(1, len(ordered)):
        prev, cur = ordered[i - 1], ordered[i]
        if (prev[1], prev[2]) == (cur[1], cur[2]) or abs(cur[4] - prev[4]) <= max(
            3 * noise, MIN_CHANGE_MS
        ):
            continue
        # The first echo from the step on whose RTT is nearer the new value than the old.
        later = ordered[i:]
        shown = next((r for r in later if abs(r[3] - r[4]) < abs(r[3] - prev[4])), None)
        changes.append(
            {
                "at_link_s": cur[0],
                "expected_from_ms": prev[4],
                "expected_to_ms": cur[4],
                "shown_after_ms": None if shown is None else (shown[0] - cur[0]) * 1000,
            }
        )
    return {
        "sent": sent,
        "lost": lost,
        "interval_ms": interval_s * 1000,
        "error_p50_ms": statistics.median(all_errors) if all_errors else None,
        "error_p99_ms": all_errors[int(0.99 * (len(all_errors) - 1))] if all_errors else None,
        "noise_ms": noise,
        "steps": steps,
        "changes": changes,
    }
