"""`clarke bench validate PROFILE`: measure a profile on a testbed of its own and set
what Clarke measures beside the published figures the profile declares (its
`validation:` block; docs/validation.md).

    echoes  `duration` s of echo requests client -> server every `interval` s, on an idle
            link: RTT min, p5, p25, median, p75, p95 and mean, the mean change between
            successive echoes, echo loss (and the bit error rate it implies). On a
            schedule with slots, each echo is placed on the link's clock (the terminal's,
            which shapes the requests): the share of losses sent within 2 s after a slot
            boundary, loss and RTT by phase of the slot, and each slot's floor (its
            minimum RTT) with the step from the slot before.
    access  on a return link with capacity on demand (`return.dama`): full-sized
            echoes (1500-byte packets), ACCESS_IDLE_ECHOES each after ACCESS_IDLE_S
            with nothing sent, then ACCESS_STEADY_ECHOES every ACCESS_STEADY_S: the
            median RTT of each, and the difference (the request-grant loop's wait).
    rates   per direction with a rate, a UDP flow paced at 1.1 x the highest rate the
            profile has (at most --max-offered-mbps) for `rate_duration` s, read on the
            link's byte counters (frames the loss model dropped count: they used the
            link) over each stretch of constant scheduled rate (from 0.5 s inside it),
            beside the schedule's rate for it; a stretch during which the queue ran
            empty (the user-space sender fell behind) reads low and is not judged. On a
            schedule the published rate is compared with the schedule's own median over
            its loop (by time), which a few measured slots cannot give; the measured
            stretches say how closely the link follows it. On a fixed link, the higher
            of that reading and a bulk TCP transfer's, as a link check judges it."""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from clarke import profiles, sh
from clarke.errors import CommandFailed
from clarke.published import FIGURES, Figure, PublishedFigure
from clarke.run.bench.link import testbed
from clarke.run.bench.validate_figures import (
    access_figures,
    analyse_echoes,
    echoes_from,
    rate_segments,
    schedule_median_mbps,
    segment_rates,
    settled_part,
)
from clarke.run.linkcheck import check as linkcheck
from clarke.vocab import SENDER

RATE_FIGURES = {"forward": Figure.forward_rate_mbps, "return": Figure.return_rate_mbps}
# Capacity on demand: a grant outlives its last request by the profile's RBDC timeout
# (16 superframes, 424 ms, by default), so 1.5 s of silence finds the terminal without
# any; a 1500-byte packet every 20 ms (0.6 Mb/s) keeps a rate granted.
FULL_SIZED_PAYLOAD = 1472
ACCESS_IDLE_S, ACCESS_IDLE_ECHOES = 1.5, 6
ACCESS_STEADY_S, ACCESS_STEADY_ECHOES = 0.02, 200


def _clock(stats: dict[str, Any], direction: str) -> tuple[float, int] | None:
    """(link time s, Unix ns) of one stats reading of the station shaping `direction`."""
    state = ((stats.get(SENDER[direction]) or {}).get(direction) or {}).get("schedule") or {}
    link_ms = state.get("link_time_ms")
    return (link_ms / 1000, time.time_ns()) if isinstance(link_ms, int | float) else None


def echoes(
    probe: linkcheck.Probe, duration_s: float, interval_s: float, payload: int = 56
) -> dict[str, Any]:
    count = max(1, round(duration_s / interval_s))
    argv = [sys.executable, "-m", "clarke.place.echo", probe.addresses.addresses["server"]]
    argv += ["--count", str(count), "--interval", str(interval_s), "--timeout", "5"]
    argv += ["--size", str(payload)]
    proc = sh.run(probe.at_client(argv), timeout=duration_s + 60)
    try:
        data: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise CommandFailed(f"echo printed no JSON: {proc.stderr.strip()[-500:]}") from None
    return data


def _access(probe: linkcheck.Probe) -> dict[str, Any]:
    """Full-sized echoes after idle spells, then in a steady flow (ACCESS_*)."""
    time.sleep(ACCESS_IDLE_S)  # what came before has left the terminal's grant to expire
    idle = echoes(probe, ACCESS_IDLE_S * ACCESS_IDLE_ECHOES, ACCESS_IDLE_S, FULL_SIZED_PAYLOAD)
    time.sleep(ACCESS_IDLE_S)
    steady = echoes(
        probe, ACCESS_STEADY_S * ACCESS_STEADY_ECHOES, ACCESS_STEADY_S, FULL_SIZED_PAYLOAD
    )
    return {
        "payload_bytes": FULL_SIZED_PAYLOAD,
        "after_idle_ms": idle["rtts_ms"],
        "after_idle_lost": len(idle["lost"]),
        "steady_interval_ms": ACCESS_STEADY_S * 1000,
        "steady_ms": steady["rtts_ms"],
        "steady_lost": len(steady["lost"]),
    }


def counting_role(stats: dict[str, Any], direction: str) -> str:
    """The link role whose `bytes_onto_link` counts `direction`: the sending station on
    satlink and netem, the receiving station's TAP on OpenSAND; the sender where none
    says."""
    for role in (SENDER[direction], *stats):
        counted = ((stats.get(role) or {}).get("bytes_onto_link") or {}).get(direction)
        if isinstance(counted, int | float):
            return role
    return SENDER[direction]


def _rates(
    probe: linkcheck.Probe,
    profile: profiles.LinkProfile,
    direction: str,
    duration_s: float,
    max_offered_mbps: float,
) -> dict[str, Any] | None:
    """The link's rate in `direction` under a paced UDP flow, per stretch of constant
    scheduled rate, beside the schedule's."""
    median, highest = schedule_median_mbps(profile, direction)
    if highest <= 0:
        return None
    offered = min(linkcheck.CAPACITY_LOAD * highest, max_offered_mbps)
    samples: list[tuple[float, int]] = []
    queued: list[tuple[float, int]] = []  # frames waiting in the shaping queue

    def counted(_: str) -> linkcheck.Counted | None:
        every: dict[str, Any] = probe.link_stats()
        stats = every.get(counting_role(every, direction)) or {}
        shaped = stats.get(direction) or {}
        value = (stats.get("bytes_onto_link") or {}).get(direction)
        if not isinstance(value, int | float):
            return None
        # Frames the loss model dropped used the link all the same (satlink counts
        # frames, not bytes, of them): count them at the mean size of those that crossed.
        frames, lost = shaped.get("frames_out") or 0, (shaped.get("drops") or {}).get("loss", 0)
        on_air = int(value + lost * value / frames) if frames and lost else int(value)
        link_ms = (shaped.get("schedule") or {}).get("link_time_ms")
        at = stats.get("counted_at_s")
        t = link_ms / 1000 if isinstance(link_ms, int | float) else at
        if isinstance(t, int | float):
            samples.append((float(t), on_air))
            if isinstance(shaped.get("queue_frames"), int):
                queued.append((float(t), shaped["queue_frames"]))
        return (on_air, float(at)) if isinstance(at, int | float) else on_air

    counting = replace(probe, link_bytes=counted)
    linkcheck.wait_until_idle(probe, direction)
    try:
        flow = linkcheck.iperf(
            counting, direction == "forward", duration=duration_s, omit=1.0,
            udp_bps=offered * 1e6,
        )  # fmt: skip
    finally:
        linkcheck.wait_until_idle(probe, direction)
    schedule = profile.schedule
    length = schedule.length_s if schedule else None
    unwrapped = _unwrap(samples, length)
    if not unwrapped:
        return None
    # Data starts to flow about a second in (iperf3's control exchange); the flow ends
    # duration_s later.
    moving = next((t for (t, b) in unwrapped if b - unwrapped[0][1] > 65536), unwrapped[0][0])
    window = (moving + 0.5, moving + duration_s - 0.5)
    segments = rate_segments(profile, direction, *window)
    clipped = [(max(a, window[0]), min(b, window[1]), r) for a, b, r in segments]
    measured = segment_rates(unwrapped, clipped, _unwrap(queued, length))
    for m in measured:
        m["offer_limited"] = m["scheduled_mbps"] > offered / linkcheck.CAPACITY_LOAD
    judged = [
        m
        for m in measured
        if not m["offer_limited"] and not m["queue_ran_empty"] and m["scheduled_mbps"] > 0
    ]
    errors = [100 * (m["measured_mbps"] / m["scheduled_mbps"] - 1) for m in judged]
    tcp = None
    if schedule is None:
        # As a link check judges a fixed link: the higher of this reading and a bulk TCP
        # transfer's (a user-space UDP sender the VM pauses lets a short queue drain).
        tcp = linkcheck.iperf(probe, direction == "forward", duration=duration_s, omit=4)
        linkcheck.wait_until_idle(probe, direction)
    readings = [m["measured_mbps"] for m in measured]
    median_mbps = statistics.median(readings) if readings else None
    if tcp is not None and tcp.link_bps is not None:
        median_mbps = max(median_mbps or 0.0, tcp.link_bps / 1e6)
    return {
        "offered_mbps": offered,
        "udp_lost_percent": flow.lost_percent,
        "segments": measured,
        "tcp_link_mbps": tcp.link_bps / 1e6 if tcp is not None and tcp.link_bps else None,
        "measured_median_mbps": median_mbps,
        "error_vs_schedule_pct": {"min": min(errors), "max": max(errors)} if errors else None,
        "schedule_median_mbps": median,
        "scheduled": schedule is not None,
    }


def _unwrap(samples: list[tuple[float, int]], length: float | None) -> list[tuple[float, int]]:
    """Link times that wrapped at the loop's end made continuous."""
    out: list[tuple[float, int]] = []
    add = 0.0
    for t, b in samples:
        if out and length and t + add < out[-1][0] - length / 2:
            add += length
        out.append((t + add, b))
    return out


@dataclass(frozen=True)
class ValidateOptions:
    """How long and how hard `measure` probes the link (the command's options)."""

    link: str | None = None  # the link's implementation; None: the default
    duration_s: float = 60  # seconds of echoes
    interval_s: float = 0.01  # seconds between echoes
    rate_duration_s: float = 15  # seconds of paced UDP per direction
    max_offered_mbps: float = 400  # the most the UDP flow offers
    rates: bool = True  # measure the rates too, not only echoes


def measure(
    profile_name: str,
    options: ValidateOptions = ValidateOptions(),
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    o = options
    link, duration_s, interval_s = o.link, o.duration_s, o.interval_s
    rate_duration_s, max_offered_mbps, rates = o.rate_duration_s, o.max_offered_mbps, o.rates
    profile = profiles.read(profile_name)
    out: dict[str, Any] = {"profile": profile_name, "duration_s": duration_s}
    out["interval_s"] = interval_s
    with testbed(profile_name, link) as s:
        out["link"] = s.implementations.get("link")
        probe = s.link().probe()
        schedule = profile.schedule
        progress(f"{duration_s:g} s of echoes every {interval_s * 1000:g} ms")
        before = _clock(probe.link_stats(), "return")
        data = echoes(probe, duration_s, interval_s)
        clock: Callable[[int], float] | None = None
        if before is not None:
            link_s, unix_ns = before
            clock = lambda ns: link_s + (ns - unix_ns) / 1e9  # noqa: E731
        fig = analyse_echoes(
            echoes_from(data),
            clock,
            schedule.slot_s if schedule else None,
            schedule.slot_offset_s if schedule else 0.0,
        )
        out["echoes"] = {"sent": fig.sent, "lost": fig.lost, "phases": fig.phases}
        out["echoes"]["slots"] = fig.slots
        out["figures"] = {k.value: v for k, v in fig.figures.items()}
        if profile.return_.dama is not None:
            progress(
                f"access: {ACCESS_IDLE_ECHOES} full-sized echoes after {ACCESS_IDLE_S:g} s idle, "
                f"then {ACCESS_STEADY_ECHOES} every {ACCESS_STEADY_S * 1000:g} ms"
            )
            out["access"] = _access(probe)
            figures = access_figures(out["access"]["after_idle_ms"], out["access"]["steady_ms"])
            out["figures"] |= {k.value: v for k, v in figures.items()}
        out["rates"] = {}
        for direction in ("forward", "return") if rates else ():
            progress(f"{direction} rate: {rate_duration_s:g} s of paced UDP")
            r = _rates(probe, profile, direction, rate_duration_s, max_offered_mbps)
            if r is None:
                continue
            out["rates"][direction] = r
            figure = RATE_FIGURES[direction].value
            out["figures"][figure] = (
                r["schedule_median_mbps"] if r["scheduled"] else r["measured_median_mbps"]
            )
    out["published"] = [_judged(p, out["figures"].get(p.figure.value)) for p in profile.validation]
    return out


def _judged(p: PublishedFigure, measured: float | None) -> dict[str, Any]:
    return p.model_dump(mode="json", exclude_none=True) | {
        "measured": measured,
        "verdict": p.verdict(measured).value,
        "published": p.describe(),
    }


def _fmt(figure: str, value: float | None) -> str:
    if value is None:
        return "-"
    if figure == Figure.echo_ber:
        return f"{value:.2e}"
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.2f}"


Row = tuple[str, str, str, str, int | None]


def rows(result: dict[str, Any]) -> tuple[list[Row], list[str]]:
    """(figure, published, Clarke's, verdict, source number) for every measured figure
    and every published one; and the sources, numbered from 1."""
    published: dict[str, list[dict[str, Any]]] = {}
    for p in result["published"]:
        published.setdefault(p["figure"], []).append(p)
    out: list[Row] = []
    sources: list[str] = []
    for figure in Figure:
        measured = result["figures"].get(figure.value)
        claims: list[dict[str, Any] | None] = list(published.get(figure.value, []))
        if measured is None and not claims:
            continue
        info = FIGURES[figure]
        label = info.label + (f" ({info.unit})" if info.unit else "")
        if figure in RATE_FIGURES.values() and result.get("rates"):
            direction = "forward" if figure is Figure.forward_rate_mbps else "return"
            if (result["rates"].get(direction) or {}).get("scheduled"):
                label += " [schedule's median]"
        for claim in claims or [None]:
            number = None
            if claim is not None:
                if claim["source"] not in sources:
                    sources.append(claim["source"])
                number = sources.index(claim["source"]) + 1
            pub = str(claim["published"]) if claim else "-"
            verdict = str(claim["verdict"]) if claim else ""
            out.append((label, pub, _fmt(figure.value, measured), verdict, number))
    return out, sources


def render(result: dict[str, Any], markdown: bool = False) -> str:
    table, sources = rows(result)
    head = (
        f"{result['profile']} on {result.get('link')}: {result['echoes']['sent']} echoes every "
        f"{result['interval_s'] * 1000:g} ms ({result['duration_s']:g} s), "
        f"{result['echoes']['lost']} lost"
    )
    lines = [head, ""]
    if markdown:
        lines += ["| figure | published | source | Clarke | verdict |", "|---|---|---|---|---|"]
        for label, pub, ours, verdict, n in table:
            lines.append(f"| {label} | {pub} | {f'[{n}]' if n else ''} | {ours} | {verdict} |")
    else:
        lines.append(f"  {'figure':<52}{'published':>18}{'Clarke':>12}  verdict")
        for label, pub, ours, verdict, n in table:
            src = f" [{n}]" if n else ""
            lines.append(f"  {label:<52}{pub + src:>18}{ours:>12}  {verdict}")
    for n, text in enumerate(sources, 1):
        lines.append(f"{'' if markdown else '  '}[{n}] {text}" + ("  " if markdown else ""))
    lines += _details(result, markdown)
    return "\n".join(lines)


def _details(result: dict[str, Any], markdown: bool) -> list[str]:
    out: list[str] = []
    phases = result["echoes"].get("phases") or []
    if phases:
        out += ["", "By phase of the slot (echo send time on the link's clock):"]
        for p in phases:
            loss = "-" if p["lost_pct"] is None else f"{p['lost_pct']:.2f} %"
            rtt = "-" if p["rtt_median_ms"] is None else f"{p['rtt_median_ms']:.1f} ms"
            out.append(
                f"  {p['from_s']:5.2f}-{p['to_s']:5.2f} s: {p['echoes']:5d} echoes, lost {loss}, "
                f"RTT median {rtt}"
            )
    slots = result["echoes"].get("slots") or []
    if slots:
        floors = ", ".join(f"{s['floor_ms']:.1f}" for s in slots)
        out.append(f"Slot floors (minimum RTT per slot, ms): {floors}")
    access = result.get("access")
    if access:
        idle = ", ".join(f"{ms:.0f}" for ms in access["after_idle_ms"]) or "-"
        steady = sorted(settled_part(access["steady_ms"]))
        spread = f"{steady[0]:.0f} to {steady[-1]:.0f}" if steady else "-"
        out.append(
            f"Full-sized echoes ({access['payload_bytes'] + 28} bytes) after idle, ms: {idle}"
            f" ({access['after_idle_lost']} lost); every {access['steady_interval_ms']:g} ms,"
            f" second half: {spread} ({access['steady_lost']} lost in all)"
        )
    for direction, r in (result.get("rates") or {}).items():
        parts = [
            f"{m['measured_mbps']:.2f} / {m['scheduled_mbps']:.2f}"
            + (" (offer-limited)" if m["offer_limited"] else "")
            + (" (its queue ran empty)" if m.get("queue_ran_empty") else "")
            for m in r["segments"]
        ]
        if r.get("tcp_link_mbps"):
            parts.append(f"bulk TCP {r['tcp_link_mbps']:.2f}")
        err = r["error_vs_schedule_pct"]
        whose = "the schedule's" if r["scheduled"] else "the profile's"
        out.append(
            f"{direction.capitalize()} rate under UDP at {r['offered_mbps']:.1f} Mb/s, measured / "
            f"{whose} Mb/s: {', '.join(parts) or '-'}"
            + (f"; off by {err['min']:+.2f} to {err['max']:+.2f} %" if err else "")
        )
    return [line + ("  " if markdown and line else "") for line in out]
