"""Benchmark (not a test): a campaign run once with `clarke run` on this host, then in N
shards through the three-node Slurm cluster of the tests (tests/slurm_cluster.py) with
`clarke submit slurm --wait`; prints both wall times and `clarke compare` of the merged
result against the one-host run (per cell: ratio of medians of PLT, FCP and LCP).

    uv run python tests/bench_slurm.py [CAMPAIGN] [--shards 3]   (root; default: the demo)

The cluster's nodes share this machine's CPUs: on a 2-core host three shards at once
compete for them, which a real cluster of separate nodes would not."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from slurm_cluster import cluster

ROOT = Path(__file__).resolve().parents[1]
CLARKE = [sys.executable, "-m", "clarke"]


def _timed(argv: list[str], env: dict[str, str], log: Path) -> float:
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    took = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}: see {log}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", nargs="?", default=str(ROOT / "campaigns/demo.yaml"))
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--link-check", default="quick", choices=["quick", "full"])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="clarke-bench-slurm-"))
    results = work / "results"
    env = {
        **os.environ,
        "CLARKE_STATE_DIR": str(work / "testbeds"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    name = Path(args.campaign).stem
    serial_id, sharded_id = f"{name}-serial", f"{name}-slurm"
    common = ["--results", str(results), "--link-check", args.link_check]
    serial_s = _timed(
        [*CLARKE, "run", args.campaign, "--campaign-id", serial_id, *common],
        env,
        work / "serial.log",
    )
    submit = [*CLARKE, "submit", "slurm", args.campaign, "--shards", str(args.shards)]
    submit += ["--campaign-id", sharded_id, *common, "--wait"]
    with cluster(work / "cluster") as c:
        env["SLURM_CONF"] = str(c.conf)
        sharded_s = _timed(c.login(submit), env, work / "slurm.log")
    table = work / "compare.md"
    subprocess.run(
        [*CLARKE, "compare", str(results / serial_id), str(results / sharded_id),
         "--markdown", str(table)],
        env=env, check=False, capture_output=True,
    )  # fmt: skip
    print(f"campaign {args.campaign}, link checks {args.link_check}; work dir {work}")
    print(f"one clarke run:                      {serial_s:7.1f} s")
    print(f"{args.shards} shards through Slurm (submit to merged): {sharded_s:7.1f} s")
    print(f"ratio (Slurm / one run):             {sharded_s / serial_s:7.2f}")
    print(table.read_text() if table.exists() else "clarke compare wrote no table")


if __name__ == "__main__":
    main()
