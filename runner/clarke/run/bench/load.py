"""The harness overhead of a page load: wall time minus PLT, per engine, on one testbed.

Two figures per load: the load's own wall time in the client (browser start, profile,
load, collection, browser exit) minus PLT, and the runner's wall time for the whole
load (agents, stats, verification included) minus PLT. With the breakdown, each phase
the runner and the client timed (details.phases_ms; clarke.timing), median and spread:
the client's phases (profile, browser start, navigation, settle and collection, judging,
browser exit, clean-up), the agent round trip around them, and the runner's own steps
(link checks before and after, stats resets, server and link stats)."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from typing import Any

from clarke.campaign.dimensions import BROWSER, CC, HTTP, MODEL, PROFILE, SIZE
from clarke.results.details import PhasesMs
from clarke.results.record import Status
from clarke.run.session.session import Session
from clarke.run.session.settings import SessionSettings
from clarke.run.single import OneLoad, cell_of, load_once
from clarke.testbed.substrate import NetnsSubstrate
from clarke.vocab import (
    LOADS_PER_BROWSER,
    Browser,
    CongestionControl,
    Engine,
    HttpVersion,
    Isolation,
    StartAhead,
)


@dataclass(frozen=True)
class LoadBench:
    """What `clarke bench load` measures: `n` loads of `page` per engine, over `profile`,
    with `browser`, its browser started ahead `start_ahead` and isolated by `isolation`
    (a new context per load in a browser kept for `loads_per_browser` loads)."""

    engines: tuple[str, ...] = (Engine.selenium, Engine.browsertime)
    n: int = 10
    page: str = "uniform-100k"
    http: str = HttpVersion.h2.value
    profile: str = "lan"
    testbed_id: int | None = None
    start_ahead: StartAhead = "after-page"
    browser: Browser = Browser.firefox
    isolation: Isolation = Isolation.profile
    loads_per_browser: int = LOADS_PER_BROWSER


def harness_overhead(bench: LoadBench) -> dict[str, Any]:
    engines, n, page, http = list(bench.engines), bench.n, bench.page, bench.http
    out: dict[str, Any] = {
        "profile": bench.profile,
        "page": page,
        "http": http,
        "n": n,
        "browser": bench.browser.value,
        "start_ahead": bench.start_ahead,
        "isolation": bench.isolation.value,
        "engines": {},
    }
    phases: dict[str, dict[str, list[float]]] = {}
    settings = SessionSettings(
        engine=engines[0],
        start_ahead=bench.start_ahead,
        browser=bench.browser,
        isolation=bench.isolation,
        loads_per_browser=bench.loads_per_browser,
    )
    model, _, size = page.rpartition("-")
    cell = cell_of(
        {
            PROFILE.name: PROFILE.parse(bench.profile),
            HTTP.name: HTTP.parse(http),
            CC.name: CongestionControl.bbr,
            MODEL.name: model,
            SIZE.name: size,
            BROWSER.name: bench.browser,
        }
    )
    session = Session(NetnsSubstrate(bench.testbed_id), [page], settings)
    with session.start(bench.profile) as s:
        for engine in engines:
            # Browsertime starts its own browser for every load: profile isolation only.
            isolation = bench.isolation if engine == Engine.selenium else Isolation.profile
            s.settings = replace(settings, engine=engine, isolation=isolation)
            browser, runner, plts, failed, reasons = [], [], [], 0, []
            timed = phases.setdefault(engine, {})
            one = OneLoad(cell)
            for i in range(n):
                # As in a campaign, each load announces the next, so the client may start
                # its browser ahead (browser/prestart.py): the wall time between two loads'
                # calls is what a campaign pays.
                t0 = time.monotonic()
                result, details = load_once(s, one, one if i + 1 < n else None)
                wall = (time.monotonic() - t0) * 1000
                if result.status is not Status.ok:
                    failed += 1
                    reasons.append(result.reason)
                    continue
                plt = result.metrics["plt_ms"]
                plts.append(plt)
                browser.append(result.wall_ms - plt)
                runner.append(wall - plt)
                for name, ms in breakdown(details.phases_ms, plt, wall).items():
                    timed.setdefault(name, []).append(ms)
            out["engines"][engine] = {
                "isolation": isolation.value,
                "ok": len(plts),
                "failed": failed,
                "plt_median_ms": statistics.median(plts) if plts else None,
                "overhead_in_client_median_ms": statistics.median(browser) if browser else None,
                "overhead_whole_load_median_ms": statistics.median(runner) if runner else None,
                "overhead_whole_load_p90_ms": spread(runner)["p90_ms"] if runner else None,
                "overhead_whole_load_min_ms": min(runner) if runner else None,
                "overhead_whole_load_max_ms": max(runner) if runner else None,
                "failures": reasons,
                "phases": {name: spread(v) for name, v in timed.items()},
            }
    return out


def breakdown(phases: PhasesMs | None, plt: float, wall: float) -> dict[str, float]:
    """One load's phases, flat: `client.*` the client's own, `client.agent` the rest of
    the agent round trip, `client.navigation-plt` the navigation call beyond the page
    load itself, `runner.*` the runner's steps, `runner.other` what no phase covers."""
    phases = phases or PhasesMs()
    client, runner = phases.client, phases.runner
    out = {f"client.{k}": v for k, v in client.items()}
    if "navigation" in client:
        out["client.navigation-plt"] = client["navigation"] - plt
    out |= {f"runner.{k}": v for k, v in runner.items() if k != "client"}
    if "client" in runner:
        # ahead_*: a browser started ahead; next_context_*: a kept browser's context made
        # ready; both in the background, before this load's call.
        background = ("ahead_", "next_context_")
        inside = sum(v for k, v in client.items() if not k.startswith(background))
        out["client.agent"] = runner["client"] - inside
    out["runner.other"] = wall - sum(runner.values())
    return out


def spread(values: list[float]) -> dict[str, float]:
    """Median and the 10th and 90th percentiles (the extremes below 10 values)."""
    ordered = sorted(values)
    if len(ordered) >= 10:
        deciles = statistics.quantiles(ordered, n=10)
        low, high = deciles[0], deciles[-1]
    else:
        low, high = ordered[0], ordered[-1]
    return {"median_ms": statistics.median(ordered), "p10_ms": low, "p90_ms": high}


def render(fig: dict[str, Any], breakdown_shown: bool = False) -> str:
    lines = [
        f"harness overhead: {fig['page']} over {fig['profile']}, HTTP/{fig['http']}, "
        f"{fig['browser']}, median of {fig['n']} loads per engine; isolation "
        f"{fig['isolation']}; next browser started {fig['start_ahead']}"
    ]
    for engine, e in fig["engines"].items():

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v / 1000:.2f} s"

        lines.append(
            f"  {engine:<12} whole load - PLT: {ms(e['overhead_whole_load_median_ms'])} "
            f"(p90 {ms(e['overhead_whole_load_p90_ms'])}, "
            f"min {ms(e['overhead_whole_load_min_ms'])}, "
            f"max {ms(e['overhead_whole_load_max_ms'])}); "
            f"in the client: {ms(e['overhead_in_client_median_ms'])}; "
            f"PLT {ms(e['plt_median_ms'])}; {e['ok']} ok, {e['failed']} failed; "
            f"isolation {e['isolation']}"
        )
        lines += [f"    failed: {why}" for why in e.get("failures", [])]
        if breakdown_shown:
            lines.append(f"    {'phase':<28} {'median':>9} {'p10':>9} {'p90':>9}")
            for name, p in e["phases"].items():
                lines.append(
                    f"    {name:<28} {p['median_ms']:>7.0f}ms {p['p10_ms']:>7.0f}ms "
                    f"{p['p90_ms']:>7.0f}ms"
                )
    return "\n".join(lines)
