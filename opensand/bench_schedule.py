"""Does OpenSAND follow a link schedule? A benchmark, not a test (docs/opensand.md, "A
schedule on OpenSAND"): a netns testbed on the opensand link with
tests/data/profiles/opensand-square.yaml (RTT 100 ms for 2 s, 300 ms for 2 s, through
the gateway's FileDelay), echoes every 20 ms, and the figures: each level's median RTT
against the expected one, and how many echoes each level lasted (100 = 2 s).

    sudo uv run python opensand/bench_schedule.py [--id 57] [--seconds 30]

Needs root and OpenSAND 8.2. The testbed is taken down at the end, also on failure."""

from __future__ import annotations

import argparse
import statistics

from clarke.link.opensand.mapping import RTT_OVERHEAD_MS
from clarke.run.linkcheck import check as linkcheck
from clarke.run.session.session import Session
from clarke.run.session.settings import ROLES_ONLY
from clarke.testbed import lifecycle
from clarke.testbed.substrate import NetnsSubstrate

SQUARE = "tests/data/profiles/opensand-square.yaml"
LEVELS_MS = (38, 138)  # the gateway's delay values: (RTT - 23.5) / 2
INTERVAL_S = 0.02


def levels(rtts: list[float], threshold: float) -> list[tuple[bool, int]]:
    """Runs of (high level?, echoes); a run under 10 echoes (200 ms: echoes held up, or
    whose two legs crossed a step) joins the one before it."""
    runs: list[tuple[bool, int]] = []
    for high in (r > threshold for r in rtts):
        if runs and runs[-1][0] == high:
            runs[-1] = (high, runs[-1][1] + 1)
        else:
            runs.append((high, 1))
    merged: list[tuple[bool, int]] = []
    for high, n in runs:
        if merged and (merged[-1][0] == high or n < 10):
            merged[-1] = (merged[-1][0], merged[-1][1] + n)
        else:
            merged.append((high, n))
    return merged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--id", type=int, default=57)
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    low, high = (2 * v + RTT_OVERHEAD_MS for v in LEVELS_MS)
    lifecycle.up(SQUARE, args.id, link="opensand")
    try:
        session = Session(NetnsSubstrate(args.id), [], ROLES_ONLY)
        session.start(SQUARE)
        try:
            count = round(args.seconds / INTERVAL_S)
            rtts = linkcheck.ping(session.link().probe(), count=count, interval=INTERVAL_S).rtts_ms
        finally:
            session.close()
    finally:
        lifecycle.down(args.id)
    runs = levels(rtts, (low + high) / 2)
    complete = [n for _, n in runs[1:-1]]
    for name, want, is_high in (("low", low, False), ("high", high, True)):
        got = [r for r in rtts if (r > (low + high) / 2) == is_high]
        print(
            f"{name}: median RTT {statistics.median(got):.1f} ms (expected {want:.1f}), "
            f"{len(got)} echoes"
        )
    print(f"echoes sent {count}, answered {len(rtts)}")
    print(f"complete levels (echoes of {INTERVAL_S * 1000:.0f} ms; 100 = 2 s): {complete}")


if __name__ == "__main__":
    main()
