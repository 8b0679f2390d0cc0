"""`clarke bench link`: the link's target figures, measured on testbeds it builds and
removes itself.

    geo        idle RTT over 50 echoes (mean within ±1 ms of the profile, stdev <= 1 ms)
               and the link rate each way as a link check judges it, the higher of the bulk
               TCP and the paced UDP reading on the link counters (within 2 % of 10 Mb/s)
    unshaped   TCP client -> server through the three satlink roles with no rate limit
               (lan profile): throughput and the satlink processes' CPU per Gbit
    parallel   N geo testbeds up at once, 50 echoes each at the same time: RTT per testbed
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from clarke import profiles
from clarke.errors import ClarkeError
from clarke.place import netns, procs
from clarke.place.plan import NetnsPlan
from clarke.run.linkcheck import check as linkcheck
from clarke.run.session.session import Session
from clarke.run.session.settings import ROLES_ONLY
from clarke.testbed.substrate import NetnsSubstrate
from clarke.vocab import LINK_ROLES, CongestionControl

RTT_BOUND_MS = 1.0
STDEV_BOUND_MS = 1.0
RATE_BOUND_PCT = 2.0


def _rtt_entry(profile_name: str, pr: linkcheck.PingResult) -> dict[str, Any]:
    exp = linkcheck.expected_rtt_ms(profiles.read(profile_name))
    s = pr.summary()
    ok = bool(s) and abs(s["mean"] - exp) <= RTT_BOUND_MS and s["stdev"] <= STDEV_BOUND_MS
    return {"expected_ms": exp, "received": len(pr.rtts_ms), "sent": pr.sent, **s, "ok": ok}


@contextmanager
def testbed(profile: str, link: str | None) -> Iterator[Session]:
    """A testbed of its own for the duration (no pages, no browser)."""
    session = Session(NetnsSubstrate(None, link), [], ROLES_ONLY)
    try:
        yield session.start(profile)
    finally:
        session.close()


def _id(session: Session) -> int:
    return int(getattr(session.plan, "id", -1))


def geo(
    link: str | None = None, samples: int = 50, duration: float = 10, omit: float = 4
) -> dict[str, Any]:
    with testbed("geo", link) as s:
        out: dict[str, Any] = {"id": _id(s), "link": s.implementations["link"]}
        probe = s.link().probe()
        out["rtt"] = _rtt_entry("geo", linkcheck.ping(probe, count=samples, interval=0.2))
        prof = profiles.read("geo")
        for reverse in (True, False):
            r = linkcheck.iperf(probe, reverse, duration=duration, omit=omit)
            # Judged as a link check judges it: the higher of the TCP and the paced UDP
            # reading on the link counters.
            judged = linkcheck.higher(r, linkcheck.capacity(probe, prof, reverse, duration))
            rate = (prof.forward if reverse else prof.return_).rate_mbps
            dev = 100 * (judged.rate_bps / 1e6 / rate - 1)
            out[r.direction] = asdict(r) | {
                "rate_mbps": judged.rate_bps / 1e6,
                "rate_method": judged.protocol,
                "tcp_rate_mbps": r.rate_bps / 1e6,
                "rate_from": "link counters" if judged.link_bps is not None else "goodput",
                "wire_mbps": r.wire_bps / 1e6,
                "goodput_mbps": r.goodput_bps / 1e6,
                "profile_mbps": rate,
                "deviation_pct": dev,
                "ok": abs(dev) <= RATE_BOUND_PCT,
            }
        return out


def _link_cpu(session: Session) -> dict[str, int]:
    """CPU ticks of the link's own processes (not the agents) per link role."""
    plan = session.plan
    assert isinstance(plan, NetnsPlan)
    out: dict[str, int] = {}
    for role in LINK_ROLES:
        ticks = 0
        for pid in netns.pids(plan.ns(role)):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if not comm.startswith("python"):
                ticks += procs.cpu_ticks(pid) or 0
        out[role] = ticks
    return out


def unshaped(
    link: str | None = None, duration: float = 10, cc: str = CongestionControl.cubic
) -> dict[str, Any]:
    with testbed("lan", link) as s:
        probe = replace(s.link().probe(), link_bytes=None)  # no counter polling: CPU is measured
        before, t0 = _link_cpu(s), time.monotonic()
        r = linkcheck.iperf(probe, reverse=False, duration=duration, omit=0, cc=cc)
        after, wall = _link_cpu(s), time.monotonic() - t0
        hz = os.sysconf("SC_CLK_TCK")
        gbits = r.bytes * 8 / 1e9
        cpu = {role: (after[role] - before[role]) / hz for role in after}
        return {
            "id": _id(s),
            "link": s.implementations["link"],
            "direction": "client -> server",
            "cc": r.cc,
            "goodput_mbps": r.goodput_bps / 1e6,
            "seconds": r.seconds,
            "retransmits": r.retransmits,
            "cpu_seconds": cpu,
            "cpu_pct_of_core": {role: 100 * c / wall for role, c in cpu.items()},
            "cpu_seconds_per_gbit": {role: c / gbits for role, c in cpu.items()} if gbits else {},
            "cpu_seconds_per_gbit_total": sum(cpu.values()) / gbits if gbits else None,
        }


def parallel(n: int = 8, link: str | None = None, samples: int = 50) -> dict[str, Any]:
    sessions: list[Session] = []
    try:
        for _ in range(n):
            s = Session(NetnsSubstrate(None, link), [], ROLES_ONLY)
            sessions.append(s)
            s.start("geo")
        with ThreadPoolExecutor(max_workers=n) as pool:
            probes = [s.link().probe() for s in sessions]
            results = list(
                pool.map(lambda q: linkcheck.ping(q, count=samples, interval=0.2), probes)
            )
        per = {str(_id(s)): _rtt_entry("geo", r) for s, r in zip(sessions, results, strict=True)}
        return {"testbeds": n, "rtt": per, "ok": all(e["ok"] for e in per.values())}
    finally:
        failures = []
        for s in sessions:
            try:
                s.close()
            except ClarkeError as e:
                failures.append(str(e))
        if failures:
            raise ClarkeError("could not remove every bench testbed:\n" + "\n".join(failures))


def render(figures: dict[str, Any]) -> str:
    lines = []
    g = figures.get("geo")
    if g:
        r = g["rtt"]
        lines.append(f"geo (testbed {g['id']}, {g['link']}): {r['received']}/{r['sent']} echoes")
        lines.append(
            f"  RTT mean {r['mean']:.2f} ms (expected {r['expected_ms']:.2f} ± {RTT_BOUND_MS}), "
            f"stdev {r['stdev']:.2f}, p50 {r['p50']:.2f}, p99 {r['p99']:.2f}, max {r['max']:.2f}"
            f"  {'ok' if r['ok'] else 'MISS'}"
        )
        for d in ("forward", "return"):
            t = g[d]
            lines.append(
                f"  {d:<8} link rate {t['rate_mbps']:.3f} Mb/s ({t['rate_method']}, "
                f"{t['rate_from']}) vs {t['profile_mbps']} ({t['deviation_pct']:+.2f} %, "
                f"bound ±{RATE_BOUND_PCT} %)  {'ok' if t['ok'] else 'MISS'}; under TCP "
                f"{t['tcp_rate_mbps']:.3f}, TCP goodput {t['goodput_mbps']:.3f} Mb/s "
                f"(x 1500/1448 = {t['wire_mbps']:.3f}), {t['cc']}, retransmits {t['retransmits']}"
            )
    u = figures.get("unshaped")
    if u:
        per = ", ".join(f"{k} {v:.2f}" for k, v in u["cpu_seconds_per_gbit"].items())
        pct = ", ".join(f"{k} {v:.0f} %" for k, v in u["cpu_pct_of_core"].items())
        lines.append(
            f"unshaped (lan profile, {u['link']}): client -> server {u['goodput_mbps']:.0f} "
            f"Mb/s TCP goodput ({u['cc']}, {u['seconds']:.0f} s)"
        )
        lines.append(
            f"  satlink CPU: {pct} of a core; CPU s per Gbit: {per} "
            f"(total {u['cpu_seconds_per_gbit_total']:.2f})"
        )
    par = figures.get("parallel")
    if par:
        lines.append(f"{par['testbeds']} geo testbeds at once:")
        for tid, r in par["rtt"].items():
            lines.append(
                f"  testbed {tid}: {r['received']}/{r['sent']}, mean {r['mean']:.2f} ms, stdev "
                f"{r['stdev']:.2f}, p50 {r['p50']:.2f}, p99 {r['p99']:.2f}, max {r['max']:.2f}"
                f"  {'ok' if r['ok'] else 'MISS'}"
            )
    return "\n".join(lines)
