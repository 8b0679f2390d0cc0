"""Benchmark (not a test): a recorded site replayed on netns testbeds, as
tests/integration/test_site_netns.py does it, repeated: per link profile, DNS setting,
browser and HTTP version, the PLT, FCP and LCP of every load, the replay's misses, every
origin's protocol, the lookups that crossed the link (counted at the gateway's resolver)
and the start page's DNS time (Navigation Timing), then medians per group.

    uv run python tests/bench_site.py ARCHIVE_DIR [--profiles lan,geo]
        [--browsers firefox,chromium] [--http 1.1,2,3] [--dns uncached,cached]
        [--repetitions 5] [--json OUT]                          (root)

`uncached`: every lookup crosses the link to the gateway side's resolver; `cached`: a
terminal's cache answers what it has (its first load fills it, and is dropped from the
medians, so they are warm loads). Groups are interleaved within a repetition, so a slow
minute on the machine touches them all. A load that fails (verification, a miss) is
reported with its reason and left out of the medians."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from clarke.browser.load import LoadRequest
from clarke.place.plan import NetnsPlan
from clarke.run.session.names import SiteNames
from clarke.run.session.session import Session
from clarke.sites import archive, staging
from clarke.sites.placement import place
from clarke.testbed.substrate import NetnsSubstrate
from clarke.vocab import Browser, Engine, HttpVersion

NEXT_HOP = {"1.1": "http/1.1", "2": "h2", "3": "h3"}


def _host(url: str) -> str:
    return url.split("/")[2]


def _dns_ms(raw: dict[str, Any]) -> float | None:
    """The start page's DNS time (Navigation Timing); a campaign's records hold every
    origin's (details.origins), and the lookups that crossed are counted at the resolver."""
    nav = raw.get("navigation") or {}
    start, end = nav.get("domainLookupStart"), nav.get("domainLookupEnd")
    if isinstance(start, int | float) and isinstance(end, int | float) and end >= start:
        return float(end - start)
    return None


def _one(
    session: Session, site: archive.SiteArchive, names: Any, browser: str, http: str
) -> dict[str, Any]:
    agents = session._agents()
    agents["server"].reset_stats()
    before = names.mark()
    request = LoadRequest(
        url=site.start_url,
        http=HttpVersion(http),
        browser=Browser(browser),
        site_hosts=tuple(o.host for o in site.origins),
        timeout_s=120,
    )
    result = agents["client"].load(request, Engine.selenium, timeout=300).model_dump(mode="json")
    replay = agents["server"].stats()["site"]
    crossed = names.queries("gateway", before)
    protocols = result.get("protocols") or {}
    wrong = sorted(u for u, p in protocols.items() if p != NEXT_HOP[http])
    status, reason = result["status"], result.get("reason", "")
    if status == "ok" and replay["missed"]:
        status, reason = "failed", f"{replay['missed']} replay misses: {replay['misses'][:3]}"
    if status == "ok" and wrong:
        status, reason = "failed", f"not over {NEXT_HOP[http]}: {wrong[:3]}"
    metrics = result.get("metrics") or {}
    return {
        "status": status,
        "reason": reason,
        "plt_ms": metrics.get("plt_ms"),
        "fcp_ms": metrics.get("fcp_ms"),
        "lcp_ms": metrics.get("lcp_ms"),
        "requests": replay["requests"],
        "missed": replay["missed"],
        "origins": sorted({_host(u) for u in protocols}),
        "crossed": sorted(f"{q['type']} {q['name']}" for q in crossed),
        "dns_ms": _dns_ms(result.get("raw") or {}),
    }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--profiles", default="lan,geo")
    parser.add_argument("--browsers", default="firefox,chromium")
    parser.add_argument("--http", default="1.1,2,3")
    parser.add_argument("--dns", default="uncached")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("root: network namespaces")
    site = archive.read(args.archive).archive
    print(f"{site.name}: {len(site.exchanges)} exchanges, {len(site.origins)} origins")
    loads: list[dict[str, Any]] = []
    for profile in args.profiles.split(","):
        substrate = NetnsSubstrate(server="origin")
        session = Session(substrate, [])
        try:
            session.start(profile)
            assert isinstance(session.plan, NetnsPlan)
            name = staging.stage(args.archive, substrate.pages_dir)
            session._agents().ensure_site(name)
            placed = place(site, session.plan.gw_lan.prefix)
            names = SiteNames(session._agents())
            try:
                for dns in args.dns.split(","):
                    names.start(placed.zone_names(), cache=dns == "cached")
                    for rep in range(args.repetitions + (dns == "cached")):
                        for browser in args.browsers.split(","):
                            for http in args.http.split(","):
                                started = time.monotonic()
                                one = _one(session, site, names, browser, http)
                                one |= {
                                    "profile": profile, "dns": dns, "browser": browser,
                                    "http": http, "repetition": rep,
                                    "warmup": dns == "cached" and rep == 0,
                                    "wall_s": round(time.monotonic() - started, 1),
                                }  # fmt: skip
                                loads.append(one)
                                print(json.dumps(one), flush=True)
            finally:
                names.stop()
        finally:
            session.close()
    if args.json:
        args.json.write_text(json.dumps(loads, indent=1))
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for one in loads:
        if not one["warmup"]:
            key = (one["profile"], one["dns"], one["browser"], one["http"])
            groups.setdefault(key, []).append(one)
    print("\nprofile dns       browser  http  ok/n  PLT    FCP    LCP    (median ms)  "
          "lookups crossed/load  start page's DNS ms")  # fmt: skip
    for key, group in groups.items():
        ok = [g for g in group if g["status"] == "ok"]

        def med(field: str, ok: list[dict[str, Any]] = ok) -> str:
            m = _median([g[field] for g in ok if g[field] is not None])
            return f"{m:6.0f}" if m is not None else "     -"

        crossed = _median([len(g["crossed"]) for g in ok])
        dns = _median([g["dns_ms"] for g in ok if g["dns_ms"] is not None])
        print(
            f"{key[0]:7} {key[1]:9} {key[2]:8} {key[3]:4}  {len(ok)}/{len(group)}  "
            f"{med('plt_ms')} {med('fcp_ms')} {med('lcp_ms')}               "
            f"{crossed if crossed is not None else '-'}  {f'{dns:.1f}' if dns is not None else '-'}"
        )
        for g in group:
            if g["status"] != "ok":
                print(f"    failed: {g['reason'][:160]}")


if __name__ == "__main__":
    main()
