#!/usr/bin/env python3
"""satlink benchmark: builds client/terminal/satellite/gateway/server namespace chains
around the release binary and prints

  1. idle RTT on the geo profile (50 UDP echoes and 50 pings; mean, stdev, p50, p99, max)
  2. bulk TCP throughput each way on geo (iperf3), with the IP-level rate from
     satlink's own counters
  3. unshaped TCP throughput client -> server and the satlink processes' CPU per Gbit
  4. 8 chains at once on geo: RTT per chain

Needs root, iperf3 and the release build (cargo build --release in satlink/).
Runs in about three minutes; everything it creates is removed on exit.

    sudo python3 satlink/bench/bench.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chain as ch

from clarke.place import procs

UDPPING = str(Path(__file__).resolve().parent / "udpping.py")
# The echo tools run under SCHED_FIFO too (below satlink's 10), so that the scheduler's
# delays of a Python process on a busy 2-core host are not charged to the link.
RT = ["chrt", "-f", "5"] if shutil.which("chrt") else []
TOL_MS = 1.0
TARGET_MS = 530.0


def stats(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    q = lambda p: s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]  # noqa: E731
    return {
        "n": len(xs),
        "mean": statistics.fmean(xs),
        "stdev": statistics.stdev(xs) if len(xs) > 1 else 0.0,
        "p50": q(0.5),
        "p99": q(0.99),
        "min": s[0],
        "max": s[-1],
    }


def fmt(st: dict[str, float]) -> str:
    return (
        f"n={st['n']} mean={st['mean']:.3f} stdev={st['stdev']:.3f} p50={st['p50']:.3f} "
        f"p99={st['p99']:.3f} min={st['min']:.3f} max={st['max']:.3f} ms"
    )


def verdict(st: dict[str, float]) -> str:
    ok = abs(st["mean"] - TARGET_MS) <= TOL_MS and st["stdev"] <= TOL_MS and st["n"] == 50
    return "PASS" if ok else "MISS"


class Echo:
    """A UDP echo server in the chain's server namespace."""

    def __init__(self, c: ch.Chain) -> None:
        self.c = c
        self.p = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                c.ns["server"],
                *RT,
                sys.executable,
                UDPPING,
                "server",
                c.addr(26),
                "7",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.p.stdout is not None
        self.p.stdout.readline()

    def probe(self, count: int = 50, interval: float = 0.2) -> list[float]:
        out = self.c.sh(
            "client",
            *RT,
            sys.executable,
            UDPPING,
            "client",
            self.c.addr(26),
            "7",
            str(count),
            str(interval),
        ).stdout
        return json.loads(out)["rtt_ms"]

    def close(self) -> None:
        self.p.terminate()
        self.p.wait(5)
        if self.p.stdout is not None:
            self.p.stdout.close()


def lateness(c: ch.Chain) -> str:
    """Delivery lateness at each receiving station (write to the TUN after the due time)."""
    parts = []
    for role, d in (("terminal", "forward"), ("gateway", "return")):
        s = c.ask(role, {"cmd": "stats"})[d]["delivery_lateness"]
        parts.append(
            f"{role} ({d}) n={s['count']} p50={s['p50_ms']:.3f} p99={s['p99_ms']:.3f} "
            f"max={s['max_ms']:.3f} ms"
        )
    return "; ".join(parts)


def iperf(c: ch.Chain, seconds: int, reverse: bool, omit: int = 0, udp: str = "") -> float:
    """Goodput in Mb/s, client -> server (reverse: server -> client); TCP unless `udp`
    gives a UDP rate to offer."""
    argv = ["iperf3", "-c", c.addr(26), "-t", str(seconds), "-J"]
    if omit:
        argv += ["-O", str(omit)]
    if reverse:
        argv.append("-R")
    if udp:
        argv += ["-u", "-b", udp, "-l", "1400"]
    with c.iperf_server(wait_s=5):
        out = json.loads(c.sh("client", *argv).stdout)
    end = out["end"]
    return (end.get("sum_received") or end["sum"])["bits_per_second"] / 1e6


def cpu_ticks(pids: dict[str, int]) -> dict[str, int]:
    """utime + stime of each role's process."""
    return {role: procs.cpu_ticks(pid) or 0 for role, pid in pids.items()}


def ip_rate(c: ch.Chain, role: str, d: str, seconds: float) -> float:
    """The shaped direction's IP-level rate (Mb/s) from satlink's counters."""
    c.ask(role, {"cmd": "reset_stats"})
    time.sleep(seconds)
    s = c.ask(role, {"cmd": "stats"})
    return s[d]["bytes_out"] * 8 / s["since_reset_s"] / 1e6


def bench_geo(quick: bool) -> None:
    print("== 1. geo profile: idle RTT (target 530 +-1 ms, stdev <= 1 ms, 50 probes)")
    with ch.Chain(0, "b", ch.GEO) as c:
        ch.wait_link(c)
        echo = Echo(c)
        try:
            c.ask("gateway", {"cmd": "reset_stats"})
            c.ask("terminal", {"cmd": "reset_stats"})
            rtt = echo.probe()
            st = stats(rtt)
            print(f"  UDP echo: {fmt(st)}  {verdict(st)}")
            print(f"  delivery lateness: {lateness(c)}")
            pings = ch.ping(c, 50)
            print(f"  ICMP ping (whole ms above 100 ms): {fmt(stats(pings))}")
        finally:
            echo.close()
        print("== 2. geo profile: bulk throughput each way (target 10 Mb/s +-2 %)")
        secs = 10 if quick else 20
        for name, reverse, role, d in (
            ("forward (server -> client)", True, "gateway", "forward"),
            ("return  (client -> server)", False, "terminal", "return"),
        ):
            # UDP offered at 12 Mb/s: the shaper is never idle, so its output is the rate.
            res: dict[str, float] = {}
            th = threading.Thread(
                target=lambda r=reverse, res=res: res.update(udp=iperf(c, 10, r, udp="12M"))
            )
            th.start()
            time.sleep(5)  # control connection set-up takes a few 530 ms round trips
            res["rate"] = ip_rate(c, role, d, 5)
            th.join()
            ok = "PASS" if abs(res["rate"] - 10) <= 0.2 else "MISS"
            print(f"  {name}: UDP flood: IP rate out of the {role} {res['rate']:.3f} Mb/s {ok}")
            # Bulk TCP (cubic), first 6 s (slow start at 530 ms RTT) omitted.
            th = threading.Thread(
                target=lambda r=reverse, res=res: res.update(tcp=iperf(c, secs + 6, r, omit=6))
            )
            th.start()
            time.sleep(8)
            res["tcp_rate"] = ip_rate(c, role, d, secs - 3)
            th.join()
            print(
                f"  {name}: TCP bulk: IP rate {res['tcp_rate']:.3f} Mb/s, iperf3 goodput "
                f"{res['tcp']:.3f} Mb/s (TCP/IP headers are 3.5 % of a 1500-byte packet)"
            )
            time.sleep(1)


def bench_unshaped(quick: bool) -> None:
    print("== 3. unshaped: TCP client -> server through st, sat, gw (target >= 1 Gbit/s)")
    with ch.Chain(0, "b", ch.UNSHAPED) as c:
        ch.wait_link(c)
        secs = 5 if quick else 10
        pids = c.pids()
        before, t0 = cpu_ticks(pids), time.monotonic()
        mbps = iperf(c, secs, reverse=False)
        after, t1 = cpu_ticks(pids), time.monotonic()
        hz = os.sysconf("SC_CLK_TCK")
        cpu = {r: (after[r] - before[r]) / hz for r in pids}
        total = sum(cpu.values())
        gbit = mbps / 1000 * secs
        shares = ", ".join(f"{r} {cpu[r] / (t1 - t0) * 100:.0f} %" for r in pids)
        print(f"  throughput {mbps / 1000:.3f} Gbit/s {'PASS' if mbps >= 1000 else 'MISS'}")
        print(
            f"  satlink CPU {total:.2f} s over {t1 - t0:.1f} s ({shares} of a core); "
            f"{total / gbit:.2f} CPU-s per Gbit"
        )
        rev = iperf(c, secs, reverse=True)
        print(f"  server -> client: {rev / 1000:.3f} Gbit/s")


def bench_many(n: int) -> None:
    print(f"== 4. {n} geo chains at once: RTT per chain (50 UDP echoes each, concurrent)")
    chains: list[ch.Chain] = []
    echoes: list[Echo] = []
    try:
        for i in range(n):
            chains.append(ch.Chain(1 + i, "b", ch.GEO).open())
        for c in chains:
            ch.wait_link(c)
            echoes.append(Echo(c))
        results: dict[int, list[float]] = {}
        threads = [
            threading.Thread(target=lambda i=i: results.update({i: echoes[i].probe()}))
            for i in range(n)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        worst = []
        for i in range(n):
            st = stats(results[i])
            worst.append(verdict(st))
            print(f"  chain {i + 1}: {fmt(st)}  {verdict(st)}")
        print(f"  {worst.count('PASS')} of {n} chains within the bounds")
        for i, c in enumerate(chains):
            print(f"  chain {i + 1} delivery lateness: {lateness(c)}")
    finally:
        for e in echoes:
            e.close()
        for c in chains:
            c.close()


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="shorter runs")
    ap.add_argument("--only", choices=["geo", "unshaped", "many"], help="one part only")
    ap.add_argument("--chains", type=int, default=8)
    a = ap.parse_args()
    if not ch.BINARY.exists():
        print(f"ERROR: {ch.BINARY} missing: cargo build --release in satlink/", file=sys.stderr)
        return 1
    print(
        f"satlink bench: {ch.BINARY}, {os.cpu_count()} CPUs, "
        f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}"
    )
    if a.only in (None, "geo"):
        bench_geo(a.quick)
    if a.only in (None, "unshaped"):
        bench_unshaped(a.quick)
    if a.only in (None, "many"):
        bench_many(a.chains)
    return 0


if __name__ == "__main__":
    sys.exit(main())
