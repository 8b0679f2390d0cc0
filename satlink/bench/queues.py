#!/usr/bin/env python3
"""Queue discipline benchmark: on the geo link (10 Mb/s, idle RTT 530 ms), one bulk TCP
cubic flow (iperf3, client -> server: the return direction, shaped at the terminal) and
pings beside it, under each profile's queue. Prints per profile the ping RTTs once the
flow has run for a while, the flow's goodput, and satlink's queueing delay and drops
by cause at the terminal.

Needs root, iperf3, the release build (cargo build --release in satlink/) and the
runner's Python environment (it reads the profiles with clarke.profiles). About 45 s
per profile; everything it creates is removed on exit.

    sudo uv run python satlink/bench/queues.py [--seconds 30] [PROFILE ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chain as ch
from bench import fmt, stats

from clarke import profiles

DEFAULT = ["geo-droptail-1bdp", "geo-droptail-10bdp", "geo-fq-codel"]


def run_profile(name: str, index: int, seconds: int) -> None:
    cfg = profiles.read(name).to_satlink_config()
    print(
        f"== {name}: return queue {json.dumps(cfg['return'].get('discipline', 'drop_tail'))} "
        f"{json.dumps(cfg['return']['queue'])}"
    )
    with ch.Chain(index, "q", cfg) as c:
        ch.wait_link(c)
        result: dict[str, float] = {}

        def bulk() -> None:
            out = c.sh(
                "client", "iperf3", "-c", c.addr(26), "-C", "cubic", "-t", str(seconds), "-J"
            ).stdout
            end = json.loads(out)["end"]
            result["mbps"] = end["sum_received"]["bits_per_second"] / 1e6
            result["retransmits"] = end["sum_sent"].get("retransmits", 0)

        with c.iperf_server(wait_s=10):
            c.ask("terminal", {"cmd": "reset_stats"})
            t = threading.Thread(target=bulk)
            t.start()
            warm = seconds // 3
            time.sleep(warm)
            # Pings through the rest of the flow (leave 2 s before its end).
            count = max(5, int((seconds - warm - 2) / 0.5))
            rtts = ch.ping(c, count, 0.5)
            t.join(seconds + 60)
            st = c.ask("terminal", {"cmd": "stats"})["return"]
        if rtts:
            print(f"  ping RTT from {warm} s into the flow: {fmt(stats(rtts))}")
        else:
            print("  ping RTT: no replies")
        print(
            f"  bulk flow: {result.get('mbps', float('nan')):.2f} Mb/s goodput, "
            f"{result.get('retransmits', 0):.0f} retransmits"
        )
        q = st["queue_delay"]
        drops = {k: v for k, v in st["drops"].items() if v}
        print(
            f"  satlink return queue delay: p50={q['p50_ms']:.1f} p99={q['p99_ms']:.1f} "
            f"max={q['max_ms']:.1f} ms over {q['count']} frames; drops {drops}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="*", default=DEFAULT)
    ap.add_argument("--seconds", type=int, default=30, help="length of the bulk flow")
    args = ap.parse_args()
    with open("/proc/loadavg") as f:
        print(f"load average before: {f.read().split()[:3]}")
    for i, name in enumerate(args.profiles):
        run_profile(name, 14 - (i % 2), args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
