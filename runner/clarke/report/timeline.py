"""The report's figures for loads on a scheduled link: PLT against the slot phase, and the
link's forward delay and rate over one period of its schedule with the loads on it
(docs/schedules.md). Drawn only when the records carry slot phases or link times."""

from __future__ import annotations

from collections import defaultdict

import matplotlib.pyplot as plt

from clarke import profiles
from clarke.campaign.dimensions import CC, HTTP
from clarke.errors import ClarkeError
from clarke.report.figures import Figure, _svg
from clarke.results.record import RunRecord, Status


def _series(r: RunRecord) -> str:
    return f"{r.cell[HTTP].label}, {r.page}, {r.cell[CC]}"


def _slot_s(profile: str) -> float | None:
    try:
        schedule = profiles.read(profile).schedule
    except ClarkeError:
        return None  # a profile this checkout does not have
    return schedule.slot_s if schedule is not None else None


def crosses_boundary(r: RunRecord) -> bool | None:
    """Whether the load ran into the next slot (its phase at navigation start plus its
    PLT reach the slot's end); None when its profile's slot is unknown."""
    slot_s = _slot_s(r.cell.link)
    if not slot_s:
        return None
    return r.metrics["slot_phase_s"] + r.metrics["plt_ms"] / 1000 >= slot_s


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def crossing_summary(records: list[RunRecord]) -> list[str]:
    """Per series: how many loads crossed a slot boundary and their median PLT, beside
    those that did not."""
    out = []
    for label, rs in sorted(_by_series(records).items()):
        split: dict[bool, list[float]] = {True: [], False: []}
        for r in rs:
            crossed = crosses_boundary(r)
            if crossed is not None:
                split[crossed].append(r.metrics["plt_ms"] / 1000)
        if not split[True] and not split[False]:
            continue
        parts = [
            f"{len(v)} {'crossed a reconfiguration' if k else 'stayed in their slot'}"
            + (f", median PLT {_median(v):.2f} s" if v else "")
            for k, v in ((True, split[True]), (False, split[False]))
        ]
        out.append(f"{label}: {'; '.join(parts)}")
    return out


def plt_by_slot_phase(records: list[RunRecord]) -> Figure | None:
    ok = [r for r in records if r.status is Status.ok and "slot_phase_s" in r.metrics]
    if not ok:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.2))
    groups: dict[str, list[RunRecord]] = defaultdict(list)
    for r in ok:
        groups[f"{r.cell.link}: {_series(r)}"].append(r)
    for i, (label, rs) in enumerate(sorted(groups.items())):
        color = f"C{i % 10}"
        ax.scatter(
            [r.metrics["slot_phase_s"] for r in rs],
            [r.metrics["plt_ms"] / 1000 for r in rs],
            label=label,
            s=18,
            color=color,
        )
        crossed = [r for r in rs if crosses_boundary(r)]
        if crossed:
            ax.scatter(
                [r.metrics["slot_phase_s"] for r in crossed],
                [r.metrics["plt_ms"] / 1000 for r in crossed],
                s=70,
                facecolors="none",
                edgecolors=color,
            )
    ax.set_xlabel("slot phase at navigation start (s since the last reconfiguration)")
    ax.set_ylabel("PLT (s)")
    ax.set_ylim(0, 1.15 * max(r.metrics["plt_ms"] for r in ok) / 1000)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    summary = crossing_summary(ok)
    return Figure(
        "plt-slot-phase",
        "PLT against slot phase",
        f"Every successful load on a scheduled link ({len(ok)} loads), at the phase of the "
        "schedule's reconfiguration slot where its navigation started; circled: loads that "
        "ran into the next slot (phase + PLT past the slot's end)."
        + (" " + ". ".join(summary) + "." if summary else ""),
        _svg(fig),
    )


def _forward_steps(profile: str) -> tuple[list[float], list[float], list[float], float] | None:
    """Times (s), one-way delay (ms) and rate (Mb/s) of the forward direction after each
    step of the profile's schedule, and the period drawn."""
    try:
        prof = profiles.read(profile)
    except ClarkeError:
        return None  # a profile this checkout does not have: no figure, not an error
    if prof.schedule is None:
        return None
    times, delays, rates = (list(c) for c in zip(*prof.in_force("forward"), strict=True))
    period = prof.schedule.length_s or (times[-1] + 1.0)
    return times, delays, rates, period


def link_over_time(records: list[RunRecord]) -> list[Figure]:
    out = []
    by_profile: dict[str, list[RunRecord]] = defaultdict(list)
    for r in records:
        if r.status is Status.ok and "link_time_s" in r.metrics:
            by_profile[r.cell.link].append(r)
    for profile, rs in sorted(by_profile.items()):
        steps = _forward_steps(profile)
        if steps is None:
            continue
        times, delays, rates, period = steps
        fig, ax = plt.subplots(figsize=(8, 4.2))
        ax.step([*times, period], [*delays, delays[-1]], where="post", label="one-way delay")
        ax.set_xlabel("link time (s, one period of the schedule)")
        ax.set_ylabel("forward one-way delay (ms)")
        rate_ax = ax.twinx()
        rate_ax.step(
            [*times, period],
            [*rates, rates[-1]],
            where="post",
            color="grey",
            alpha=0.5,
            label="rate",
        )
        rate_ax.set_ylabel("forward rate (Mb/s)")
        rate_ax.set_ylim(bottom=0)
        for label, group in sorted(_by_series(rs).items()):
            ax.scatter(
                [r.metrics["link_time_s"] for r in group],
                [r.metrics.get("link_delay_forward_mean_ms", float("nan")) for r in group],
                s=22,
                marker="x",
                label=f"loads: {label}",
            )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
        out.append(
            Figure(
                f"link-over-time-{profile}",
                f"{profile}: the link over time, with the loads on it",
                "The schedule's forward one-way delay (line) and rate (grey) over one "
                "period; each load at its link time at navigation start and the mean "
                "delay it crossed.",
                _svg(fig),
            )
        )
    return out


def _by_series(rs: list[RunRecord]) -> dict[str, list[RunRecord]]:
    out: dict[str, list[RunRecord]] = defaultdict(list)
    for r in rs:
        out[_series(r)].append(r)
    return out


def timeline_figures(records: list[RunRecord]) -> list[Figure]:
    first = plt_by_slot_phase(records)
    return ([first] if first else []) + link_over_time(records)
