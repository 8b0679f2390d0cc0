"""The harness overhead of a page load: wall time minus PLT, per engine, on one testbed.

Two figures per load: the load's own wall time in the client (browser start, profile,
load, collection, browser exit) minus PLT, and the runner's wall time for the whole
load (agents, stats, verification included) minus PLT."""

from __future__ import annotations

import statistics
import time
from typing import Any

from clarke.results.record import Status
from clarke.run.session import Session
from clarke.testbed.substrate import NetnsSubstrate
from clarke.vocab import HttpVersion


def harness_overhead(
    engines: list[str],
    n: int,
    page: str,
    http: str,
    profile: str = "lan",
    testbed_id: int | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"profile": profile, "page": page, "http": http, "n": n, "engines": {}}
    session = Session(NetnsSubstrate(testbed_id), [page], engine=engines[0])
    with session.start(profile) as s:
        s.ensure_profile(profile)
        s.ensure_cc("bbr")
        for engine in engines:
            s.engine = engine
            browser, runner, plts, failed = [], [], [], 0
            for _ in range(n):
                t0 = time.monotonic()
                result, _ = s.load_page(page, http, "bbr", HttpVersion(http).default_connections)
                wall = (time.monotonic() - t0) * 1000
                if result.status is not Status.ok:
                    failed += 1
                    continue
                plt = result.metrics["plt_ms"]
                plts.append(plt)
                browser.append(result.wall_ms - plt)
                runner.append(wall - plt)
            out["engines"][engine] = {
                "ok": len(plts),
                "failed": failed,
                "plt_median_ms": statistics.median(plts) if plts else None,
                "overhead_in_client_median_ms": statistics.median(browser) if browser else None,
                "overhead_whole_load_median_ms": statistics.median(runner) if runner else None,
                "overhead_whole_load_min_ms": min(runner) if runner else None,
                "overhead_whole_load_max_ms": max(runner) if runner else None,
            }
    return out


def render(fig: dict[str, Any]) -> str:
    lines = [
        f"harness overhead: {fig['page']} over {fig['profile']}, HTTP/{fig['http']}, "
        f"median of {fig['n']} loads per engine"
    ]
    for engine, e in fig["engines"].items():

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v / 1000:.2f} s"

        lines.append(
            f"  {engine:<12} whole load - PLT: {ms(e['overhead_whole_load_median_ms'])} "
            f"(min {ms(e['overhead_whole_load_min_ms'])}, "
            f"max {ms(e['overhead_whole_load_max_ms'])}); "
            f"in the client: {ms(e['overhead_in_client_median_ms'])}; "
            f"PLT {ms(e['plt_median_ms'])}; {e['ok']} ok, {e['failed']} failed"
        )
    return "\n".join(lines)
