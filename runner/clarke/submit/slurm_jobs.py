"""The submitted jobs' states, as Slurm's controller reports them (`scontrol -o show job`),
and `clarke submit slurm --wait`: a line for every change of a shard's or the merge's
state until the merge job has ended.

The controller keeps a finished job for MinJobAge (300 s by default); a job it has
forgotten is reported as `gone` (sacct, where the cluster keeps accounting, still has
it). What the campaign got is judged from the merged directory, not from these states."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass

from clarke import sh
from clarke.errors import EnvironmentProblem
from clarke.submit.slurm import Submitted, fields

# A job in one of these will not change again (squeue(1), JOB STATE CODES).
ENDED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
        "gone",
    }
)
POLL_S = 3.0


@dataclass(frozen=True)
class Job:
    label: str  # "shard 2/3" or "merge"
    job_id: int
    state: str
    reason: str = ""
    restarts: int = 0
    exit_code: str = ""
    node: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    def describe(self) -> str:
        parts = [self.state]
        if self.node and self.node not in ("(null)", ""):
            parts.append(f"on {self.node}")
        if self.ended and self.exit_code:
            parts.append(f"exit {self.exit_code}")
        if self.reason and self.reason != "None" and not self.ended:
            parts.append(f"({self.reason})")
        if self.restarts:
            parts.append(f"restarts {self.restarts}")
        return " ".join(parts)


def _show(job_id: int) -> list[dict[str, str]]:
    proc = sh.run(["scontrol", "-o", "show", "job", str(job_id)], check=False, timeout=60)
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return []
        detail = (proc.stderr or proc.stdout).strip()
        raise EnvironmentProblem(f"Slurm's controller did not answer (scontrol): {detail}")
    return [fields(line) for line in proc.stdout.splitlines() if line.strip()]


def _task_ids(spec: str) -> list[int]:
    """`3`, `1-3`, `1,3-4` or `1-8%2` (a pending array's remaining tasks)."""
    out: list[int] = []
    for part in spec.split("%")[0].split(","):
        first, dash, last = part.partition("-")
        if not first.isdigit():
            continue
        end = int(last) if dash and last.isdigit() else int(first)
        out += range(int(first), end + 1)
    return out


def _job(label: str, f: dict[str, str]) -> Job:
    return Job(
        label=label,
        job_id=int(f.get("JobId", "0") or 0),
        state=f.get("JobState", "?"),
        reason=f.get("Reason", ""),
        restarts=int(f.get("Restarts", "0") or 0),
        exit_code=f.get("ExitCode", ""),
        node=f.get("BatchHost") or f.get("NodeList", ""),
    )


def snapshot(submitted: Submitted, shards: int) -> list[Job]:
    """Every shard's job (one per array task) and the merge job, shard 1 first."""
    by_task: dict[int, Job] = {}
    for f in _show(submitted.array_job):
        for task in _task_ids(f.get("ArrayTaskId", "")):
            by_task[task] = _job(f"shard {task}/{shards}", f)
    jobs = [
        by_task.get(i) or Job(f"shard {i}/{shards}", submitted.array_job, "gone")
        for i in range(1, shards + 1)
    ]
    merge = _show(submitted.merge_job)
    jobs.append(_job("merge", merge[0]) if merge else Job("merge", submitted.merge_job, "gone"))
    return jobs


def wait(
    submitted: Submitted,
    shards: int,
    say: Callable[[str], None],
    poll_s: float = POLL_S,
) -> list[Job]:
    """Until the merge job has ended (it ends when a shard fails: --kill-on-invalid-dep);
    says every change of a job's state; returns the last states."""
    seen: dict[str, str] = {}
    while True:
        jobs = snapshot(submitted, shards)
        for job in jobs:
            now = job.describe()
            if seen.get(job.label) != now:
                seen[job.label] = now
                stamp = dt.datetime.now().strftime("%H:%M:%S")
                say(f"{stamp} {job.label}: {now}")
        if jobs[-1].ended:
            return jobs
        time.sleep(poll_s)
