"""The merge job of `clarke submit slurm` (merge.sbatch) run with the real `clarke` on
recorded data split into shards, one of them lost: it writes the merged directory and
its report from what there is, lists the missing shard and fails (exit 2). The same
merge step with every shard there: tests/integration/test_k8s.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clarke.results import store
from clarke.results.journal import Journal
from clarke.submit import slurm
from helpers import split_results


def test_the_merge_job_fails_listing_a_missing_shard_after_merging_the_rest(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    src = Path("tests/data/recorded-repeats")
    code, _, err = run_cli(
        "submit", "slurm", str(src / "campaign.yaml"), "--shards", "2", "--results",
        str(results), "--campaign-id", "recorded-repeats", "--emit",
    )  # fmt: skip
    assert code == 0, err
    first, lost = split_results(src, results, 2)
    lost.rename(tmp_path / "lost")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    script = results / "recorded-repeats.slurm" / slurm.MERGE_SCRIPT
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "missing shards: 2/2" in proc.stderr and "is incomplete" in proc.stderr
    merged = results / "recorded-repeats"
    assert len(list(Journal.in_dir(merged).records())) == len(list(Journal.in_dir(first).records()))
    assert (merged / "report.html").is_file() and (merged / store.META).is_file()
