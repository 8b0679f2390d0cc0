"""The figures of `clarke bench validate` from what it measured (pure: no testbed).

Echoes: RTT percentiles, the mean change between successive echoes, echo loss (and the
bit error rate it implies), and on a slotted schedule where in the slot the losses fall
and how far each slot's RTT floor (its minimum RTT) moves from the slot before. Rates:
the link's rate per slot from its byte counters, beside the schedule's."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from clarke.profiles import LinkProfile
from clarke.published import Figure
from clarke.run.linkcheck.check import ECHO_BYTES, percentile

BOUNDARY_WINDOW_S = 2.0  # "losses within 2 s after a slot boundary"
PHASE_EDGES_S = (0.0, 0.2, 2.0)  # phase bins: 0-0.2 s, 0.2-2 s, 2 s to the last 0.2 s
RATE_MARGIN_S = 0.5  # a slot's rate is read this far inside it (events sit at its edges)
MIN_RATE_SPAN_S = 1.0


@dataclass(frozen=True)
class Echo:
    sent_unix_ns: int
    rtt_ms: float | None  # None: lost


@dataclass
class EchoFigures:
    figures: dict[Figure, float] = field(default_factory=dict)
    sent: int = 0
    lost: int = 0
    phases: list[dict[str, Any]] = field(default_factory=list)  # per phase bin
    slots: list[dict[str, Any]] = field(default_factory=list)  # per slot: floor, echoes


def echo_ber(loss: float, bits: int = ECHO_BYTES * 8) -> float:
    """The bit error rate that loses `loss` of echoes: both packets of an echo carry
    `bits`; 1 - (1 - ber)^(2 bits) = loss."""
    if loss <= 0:
        return 0.0
    return 1 - (1 - min(loss, 1 - 1e-12)) ** (1 / (2 * bits))


def echoes_from(data: dict[str, Any]) -> list[Echo]:
    """clarke.place.echo's JSON as echoes in send order."""
    out = [
        Echo(int(t), float(r)) for t, r in zip(data["sent_unix_ns"], data["rtts_ms"], strict=True)
    ]
    out += [Echo(int(t), None) for t in data.get("lost_sent_unix_ns", [])]
    return sorted(out, key=lambda e: e.sent_unix_ns)


def analyse_echoes(
    echoes: Sequence[Echo],
    link_time_s: Callable[[int], float] | None = None,
    slot_s: float | None = None,
    slot_offset_s: float = 0.0,
) -> EchoFigures:
    """The echo figures; with a link clock (Unix ns -> link time, not wrapped) and a
    slot length, also where the losses fall in the slot and the slots' floors."""
    out = EchoFigures(sent=len(echoes), lost=sum(e.rtt_ms is None for e in echoes))
    rtts = sorted(e.rtt_ms for e in echoes if e.rtt_ms is not None)
    f = out.figures
    if rtts:
        for fig, q in (
            (Figure.rtt_p5_ms, 5),
            (Figure.rtt_p25_ms, 25),
            (Figure.rtt_median_ms, 50),
            (Figure.rtt_p75_ms, 75),
            (Figure.rtt_p95_ms, 95),
        ):
            f[fig] = percentile(rtts, q)
        f[Figure.rtt_min_ms] = rtts[0]
        f[Figure.rtt_mean_ms] = statistics.fmean(rtts)
    pairs = [
        abs(b.rtt_ms - a.rtt_ms)
        for a, b in pairwise(echoes)
        if a.rtt_ms is not None and b.rtt_ms is not None
    ]
    if pairs:
        f[Figure.rtt_successive_diff_ms] = statistics.fmean(pairs)
    if out.sent:
        loss = out.lost / out.sent
        f[Figure.loss_pct] = 100 * loss
        f[Figure.echo_ber] = echo_ber(loss)
    if link_time_s is None or not slot_s:
        return out
    placed = [(link_time_s(e.sent_unix_ns) - slot_offset_s, e) for e in echoes]
    _phases(out, placed, slot_s)
    _slots(out, placed, slot_s)
    return out


def _phases(out: EchoFigures, placed: list[tuple[float, Echo]], slot_s: float) -> None:
    lost_phases = [t % slot_s for t, e in placed if e.rtt_ms is None]
    if lost_phases:
        after = sum(p < BOUNDARY_WINDOW_S for p in lost_phases)
        out.figures[Figure.loss_after_boundary_pct] = 100 * after / len(lost_phases)
    edges = [*PHASE_EDGES_S, slot_s - PHASE_EDGES_S[1], slot_s]
    for lo, hi in pairwise(edges):
        inside = [e for t, e in placed if lo <= t % slot_s < hi]
        answered = sorted(e.rtt_ms for e in inside if e.rtt_ms is not None)
        out.phases.append(
            {
                "from_s": lo,
                "to_s": hi,
                "echoes": len(inside),
                "lost_pct": 100 * (len(inside) - len(answered)) / len(inside) if inside else None,
                "rtt_median_ms": statistics.median(answered) if answered else None,
            }
        )


def _slots(out: EchoFigures, placed: list[tuple[float, Echo]], slot_s: float) -> None:
    """Each slot's floor, the minimum RTT of its echoes (as Huston reads the 15 s
    intervals), from slots the echoes cover at least half of."""
    by_slot: dict[int, list[tuple[float, Echo]]] = {}
    for t, e in placed:
        by_slot.setdefault(math.floor(t / slot_s), []).append((t, e))
    for k in sorted(by_slot):
        items = by_slot[k]
        span = items[-1][0] - items[0][0]
        answered = [e.rtt_ms for _, e in items if e.rtt_ms is not None]
        if span < slot_s / 2 or not answered:
            continue
        out.slots.append(
            {"slot": k, "echoes": len(items), "span_s": span, "floor_ms": min(answered)}
        )
    steps = [
        abs(b["floor_ms"] - a["floor_ms"])
        for a, b in pairwise(out.slots)
        if b["slot"] == a["slot"] + 1
    ]
    if steps:
        out.figures[Figure.step_median_ms] = statistics.median(steps)
        out.figures[Figure.step_max_ms] = max(steps)


def settled_part(steady_ms: Sequence[float]) -> list[float]:
    """The second half of a steady flow's echoes: its first ones wait as after idle."""
    return list(steady_ms[len(steady_ms) // 2 :])


def access_figures(
    after_idle_ms: Sequence[float], steady_ms: Sequence[float]
) -> dict[Figure, float]:
    """How the return link's access treats a full-sized packet: the median RTT of echoes
    each sent after an idle spell, of echoes in a steady flow (the second half of them:
    the flow's own first packets wait as after idle), and the difference, the extra wait
    a terminal with capacity on demand spends in the request-grant loop."""
    out: dict[Figure, float] = {}
    settled = settled_part(steady_ms)
    if after_idle_ms:
        out[Figure.echo_after_idle_ms] = statistics.median(after_idle_ms)
    if settled:
        out[Figure.echo_under_load_ms] = statistics.median(settled)
    if after_idle_ms and settled:
        out[Figure.request_grant_delay_ms] = (
            out[Figure.echo_after_idle_ms] - out[Figure.echo_under_load_ms]
        )
    return out


def rate_segments(
    profile: LinkProfile, direction: str, start_s: float, end_s: float
) -> list[tuple[float, float, float]]:
    """(from, to, rate Mb/s) of every stretch of constant scheduled rate that overlaps
    [start_s, end_s] (link times, not wrapped; a loop repeats its steps); the profile's
    rate over the whole window without a schedule."""
    base = profile.forward if direction == "forward" else profile.return_
    s = profile.schedule
    steps = profile.in_force(direction)
    if s is None or not steps:
        return [(start_s, end_s, base.rate_mbps)]
    merged: list[tuple[float, float]] = []
    for at, _, rate in steps:
        if not merged or merged[-1][1] != rate:
            merged.append((at, rate))
    length = s.length_s
    if length is None:
        bounds = [(at, nxt, r) for (at, r), (nxt, _) in pairwise([*merged, (math.inf, 0.0)])]
        return [b for b in bounds if b[1] > start_s and b[0] < end_s]
    out: list[tuple[float, float, float]] = []
    loop = math.floor(start_s / length)
    while loop * length < end_s:
        t0 = loop * length
        ends = [at for at, _ in merged[1:]] + [length]
        for (at, rate), to in zip(merged, ends, strict=True):
            a, b = t0 + at, t0 + to
            if b > start_s and a < end_s:
                if out and out[-1][2] == rate and out[-1][1] == a:
                    out[-1] = (out[-1][0], b, rate)  # the same rate across the loop's end
                else:
                    out.append((a, b, rate))
        loop += 1
    return out


def segment_rates(
    samples: Sequence[tuple[float, int]],
    segments: Sequence[tuple[float, float, float]],
    queued: Sequence[tuple[float, int]] = (),
) -> list[dict[str, Any]]:
    """The link's rate over each segment of constant scheduled rate, from (link time s,
    bytes) counter samples taken RATE_MARGIN_S or more inside it, beside the rate the
    schedule gives; segments with less than MIN_RATE_SPAN_S of samples are left out.
    With (link time s, frames waiting) samples of the queue, whether it ran empty in the
    segment: the link then idled, and the reading is only a lower bound."""
    out = []
    for a, b, scheduled in segments:
        lo, hi = a + RATE_MARGIN_S, b - RATE_MARGIN_S
        inside = [x for x in samples if lo <= x[0] <= hi]
        rate = _rate(inside)
        if rate is not None:
            out.append(
                {
                    "from_s": a,
                    "to_s": b,
                    "measured_mbps": rate / 1e6,
                    "scheduled_mbps": scheduled,
                    "span_s": inside[-1][0] - inside[0][0],
                    "queue_ran_empty": any(q == 0 for t, q in queued if lo <= t <= hi),
                }
            )
    return out


def _rate(items: Sequence[tuple[float, int]]) -> float | None:
    if len(items) < 2 or items[-1][0] - items[0][0] < MIN_RATE_SPAN_S:
        return None
    (ta, ba), (tb, bb) = items[0], items[-1]
    return (bb - ba) * 8 / (tb - ta)


def schedule_median_mbps(profile: LinkProfile, direction: str) -> tuple[float, float]:
    """The median (by time) and the highest of the rate over the schedule's loop (or
    its steps' span), or the profile's rate without a schedule."""
    base = profile.forward if direction == "forward" else profile.return_
    s = profile.schedule
    steps = profile.in_force(direction)
    if s is None or not steps:
        return base.rate_mbps, base.rate_mbps
    end = s.length_s or steps[-1][0] + 1.0
    spans = sorted(
        (rate, nxt - at) for (at, _, rate), (nxt, _, _) in pairwise([*steps, (end, 0.0, 0.0)])
    )
    total = sum(d for _, d in spans)
    acc = 0.0
    for rate, d in spans:
        acc += d
        if acc >= total / 2:
            return rate, max(r for r, _ in spans)
    return spans[-1][0], spans[-1][0]
