"""A campaign's shards as one Slurm job array, and their merge as a job after it.

`write` puts everything a submission needs into `<results>/<campaign id>.slurm/` on the
shared storage: the campaign file (copied, so editing it later changes nothing that was
submitted), `shards.sbatch` (one array task per shard, each on a whole node, requeued
when its node dies), `merge.sbatch` and `logs/`. `submit` hands both scripts to `sbatch`,
the merge with `--dependency=afterok:<array>`. The scripts are written to be read and
adapted (templates/slurm-*.sbatch); `clarke submit slurm --emit` stops after writing them.

Before anything is written, `check_cluster` asks Slurm for its partitions: no `sbatch`
is exit 3 (a missing part), a controller that does not answer is exit 3 with Slurm's
words, and an unknown partition is exit 2 naming the known ones."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from clarke import sh
from clarke.errors import CommandFailed, EnvironmentProblem, InputError
from clarke.private_files import replace_file
from clarke.submit.model import Submission, check_written
from clarke.submit.steps import merge_step, quote, render, shard_step, template

SHARDS_SCRIPT = "shards.sbatch"
MERGE_SCRIPT = "merge.sbatch"
CAMPAIGN_COPY = "campaign.yaml"
SUBMITTED = "submitted.json"
LOGS = "logs"
# What an #SBATCH line's value may be: one word (sbatch splits the line into options).
PARTITION = re.compile(r"[A-Za-z0-9_.-]+(?:,[A-Za-z0-9_.-]+)*")
TIME = re.compile(r"[0-9]+(?::[0-9]+){0,2}|[0-9]+-[0-9]+(?::[0-9]+){0,2}|(?i:unlimited|infinite)")


@dataclass(frozen=True)
class SlurmOptions:
    """How the jobs are asked of Slurm; each value is a word of an #SBATCH line, so it is
    checked here (InputError naming the option): no control character, no white space."""

    partition: str | None = None
    time: str | None = None  # sbatch --time, e.g. 2:00:00; default: the partition's
    max_restarts: int = 3  # a shard requeued more often than this gives up

    def __post_init__(self) -> None:
        if self.partition is not None:
            allowed = "a partition name: letters, digits, '_', '.' and '-' (several: a,b)"
            check_written(self.partition, "--partition", allowed, PARTITION)
        if self.time is not None:
            allowed = (
                "a Slurm time limit: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS "
                "(e.g. 2:00:00), or UNLIMITED"
            )
            check_written(self.time, "--time", allowed, TIME)


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: int
    state: str
    default: bool


@dataclass(frozen=True)
class Cluster:
    """What Slurm said about the partition the jobs go to."""

    partition: Partition
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Submitted:
    array_job: int
    merge_job: int
    directory: Path


def submission_dir(sub: Submission) -> Path:
    return sub.results / f"{sub.campaign_id}.slurm"


def fields(line: str) -> dict[str, str]:
    """`Key=Value Key=Value` (scontrol -o); the first of each key."""
    out: dict[str, str] = {}
    for word in line.split():
        key, eq, value = word.partition("=")
        if eq and key not in out:
            out[key] = value
    return out


def partitions() -> list[Partition]:
    """Every partition the controller knows (exit 3 when Slurm is missing or silent)."""
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        raise EnvironmentProblem(
            "Slurm's commands (sbatch, scontrol) are not installed here: install the "
            "cluster's Slurm client (Debian: slurm-client), with its slurm.conf and munge key"
        )
    proc = sh.run(["scontrol", "-o", "show", "partition"], check=False, timeout=60)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise EnvironmentProblem(f"Slurm's controller did not answer (scontrol): {detail}")
    out = []
    for line in proc.stdout.splitlines():
        f = fields(line)
        if "PartitionName" in f:
            out.append(
                Partition(
                    f["PartitionName"],
                    int(f.get("TotalNodes", "0") or 0),
                    f.get("State", "?"),
                    f.get("Default") == "YES",
                )
            )
    return out


def check_cluster(sub: Submission, options: SlurmOptions) -> Cluster:
    """The partition the jobs go to, and what to tell the user about it."""
    known = partitions()
    names = ", ".join(p.name for p in known) or "(none)"
    if options.partition is not None:
        chosen = [p for p in known if p.name == options.partition]
        if not chosen:
            raise InputError(
                f"--partition {options.partition}: no such partition; Slurm has: {names}"
            )
    else:
        chosen = [p for p in known if p.default]
        if not chosen:
            raise InputError(f"the cluster has no default partition: give --partition ({names})")
    part = chosen[0]
    notes = []
    if part.state != "UP":
        notes.append(f"partition {part.name} is {part.state}: the jobs wait until it is UP")
    if 0 < part.nodes < sub.shards:
        notes.append(
            f"partition {part.name} has {part.nodes} nodes for {sub.shards} shards: each shard "
            f"takes a whole node, so at most {part.nodes} run at a time"
        )
    return Cluster(part, notes)


def _directives(options: SlurmOptions) -> str:
    lines = []
    if options.partition:
        lines.append(f"#SBATCH --partition={options.partition}")
    if options.time:
        lines.append(f"#SBATCH --time={options.time}")
    return "\n".join(lines)


def scripts(sub: Submission, options: SlurmOptions, where: Path) -> dict[str, str]:
    """The two batch scripts' texts for a submission directory `where`."""
    common = {
        "campaign_id": sub.campaign_id,
        "campaign_id_q": quote(sub.campaign_id),
        "shards": str(sub.shards),
        "results": quote(sub.results),
        "logs": str(where / LOGS),
        "workdir": str(where),
        "directives": _directives(options),
    }
    shards = render(
        template("slurm-shards.sbatch"),
        {
            **common,
            "campaign_name": sub.campaign_name,
            "runs": str(sub.runs),
            "script": str(where / SHARDS_SCRIPT),
            "campaign_file": quote(where / CAMPAIGN_COPY),
            "influx": f"export CLARKE_INFLUX={quote(sub.influx)}" if sub.influx else "",
            "max_restarts": str(options.max_restarts),
            "shard_step": shard_step(sub),
        },
    )
    merge = render(
        template("slurm-merge.sbatch"),
        {**common, "script": str(where / MERGE_SCRIPT), "merge_step": merge_step()},
    )
    return {SHARDS_SCRIPT: shards, MERGE_SCRIPT: merge}


def _copy_campaign(sub: Submission, where: Path) -> None:
    """The campaign (and its page models file, at the same place beside it). A directory
    of an earlier submission under this id must hold the same campaign: its shards
    resume with it."""
    copy = where / CAMPAIGN_COPY
    if copy.exists() and copy.read_bytes() != sub.campaign_file.read_bytes():
        raise InputError(
            f"{where} holds another campaign file under id {sub.campaign_id}: a submission "
            "again under the same id continues its shards with the same campaign; give a new "
            "--campaign-id for another"
        )
    shutil.copyfile(sub.campaign_file, copy)
    if sub.models_file:
        source = (sub.campaign_file.parent / sub.models_file).resolve()
        target = (where / sub.models_file).resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def check_paths(sub: Submission) -> None:
    """Exit 2 for a campaign merged already under this id, or a results path that
    #SBATCH lines cannot name."""
    where = submission_dir(sub)
    if sub.merged_dir.exists():
        raise InputError(
            f"{sub.merged_dir} exists: campaign {sub.campaign_id} has been merged already; "
            "give a new --campaign-id"
        )
    if sub.models_file and not (where / sub.models_file).resolve().is_relative_to(where.resolve()):
        raise InputError(
            f"{sub.campaign_file}: pages.models_file {sub.models_file!r} lies outside the "
            "campaign's directory: put it beside the campaign to submit it"
        )
    if any(c.isspace() for c in str(where)):
        raise InputError(
            f"--results {sub.results}: a path with white space cannot be named in #SBATCH "
            "lines (the logs' paths); choose another"
        )


def write(sub: Submission, options: SlurmOptions) -> Path:
    """The submission directory with the campaign and both batch scripts."""
    check_paths(sub)
    where = submission_dir(sub)
    (where / LOGS).mkdir(parents=True, exist_ok=True)
    _copy_campaign(sub, where)
    # An InfluxDB URL with a password is in the shards' script: then only its owner
    # may read the scripts, from before their first byte is written (a new file,
    # renamed over the old one, whose mode is set first: replace_file).
    mode = 0o700 if sub.influx and urlsplit(sub.influx).password else 0o755
    for name, text in scripts(sub, options, where).items():
        replace_file(where / name, text.encode(), mode)
    return where


def _sbatch(argv: list[str]) -> int:
    """Submit; the job id (`sbatch --parsable` prints `id` or `id;cluster`)."""
    proc = sh.run(["sbatch", "--parsable", *argv], check=False, timeout=120)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise CommandFailed(f"sbatch {' '.join(argv)}: {detail}")
    first = proc.stdout.strip().split(";")[0]
    if not first.isdigit():
        raise CommandFailed(f"sbatch {' '.join(argv)}: no job id in its answer {proc.stdout!r}")
    return int(first)


def submit(sub: Submission, where: Path) -> Submitted:
    """The array, then the merge after it; a merge that cannot be submitted cancels the
    array (nothing is left running that nobody would merge)."""
    array = _sbatch([str(where / SHARDS_SCRIPT)])
    try:
        merge = _sbatch([f"--dependency=afterok:{array}", str(where / MERGE_SCRIPT)])
    except CommandFailed:
        sh.run(["scancel", str(array)], check=False)
        raise
    done = Submitted(array, merge, where)
    record = {
        "campaign_id": sub.campaign_id,
        "shards": sub.shards,
        "array_job": array,
        "merge_job": merge,
        "shard_dirs": [str(sub.shard_dir(i)) for i in range(1, sub.shards + 1)],
        "merged_dir": str(sub.merged_dir),
    }
    (where / SUBMITTED).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return done


def emitted_commands(where: Path) -> list[str]:
    """How to submit the written scripts by hand."""
    return [
        f"array=$(sbatch --parsable {quote(where / SHARDS_SCRIPT)})",
        f'sbatch --dependency=afterok:"${{array%%;*}}" {quote(where / MERGE_SCRIPT)}',
    ]
