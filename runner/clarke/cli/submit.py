"""`clarke submit`: a campaign's shards on a cluster's scheduler (docs/scale.md).

`clarke submit slurm` submits one job array (a task per shard, each on a whole node)
and a merge job after it; `clarke submit k8s --emit` writes the Kubernetes Indexed Job
and merge Job from the same shard and merge steps (clarke.submit)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from clarke.campaign.plan import ShardBy
from clarke.cli.options import Decorator, implementation_option
from clarke.errors import ClarkeError, InputError
from clarke.results import store
from clarke.submit import k8s, slurm, slurm_jobs
from clarke.submit.model import ShardRunArgs, Submission, SubmitOptions, prepare


def _common(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options every engine takes: the campaign, its shards, what `clarke run` gets."""
    options: list[Decorator] = [
        click.argument("campaign_file", type=click.Path(path_type=Path, dir_okay=False)),
        click.option(
            "--shards",
            type=int,
            required=True,
            help="How many shards (`clarke run --shard i/N`), one node each.",
        ),
        click.option(
            "--campaign-id",
            help="The campaign id every shard is given (default: <name>-<UTC time>).",
        ),
        click.option(
            "--shard-by",
            type=click.Choice([b.value for b in ShardBy]),
            default=ShardBy.run_index.value,
            show_default=True,
            help="How the plan is sliced (clarke run --shard-by).",
        ),
        click.option(
            "--link-check",
            type=click.Choice(["full", "quick"]),
            default="full",
            show_default=True,
            help="Each shard's link checks (clarke run --link-check).",
        ),
        implementation_option("link", help="Pin the link's implementation."),
        implementation_option("server", help="Pin the server's implementation."),
        click.option(
            "--influx",
            help="InfluxDB every shard streams to (CLARKE_INFLUX in the jobs); the journals "
            "keep everything either way.",
        ),
        click.option(
            "--max-restarts",
            type=click.IntRange(0, 100),
            default=3,
            show_default=True,
            help="A shard whose node dies runs again and resumes, at most this many times.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _submit_options(params: dict[str, Any], results: Path) -> SubmitOptions:
    return SubmitOptions(
        campaign_file=params["campaign_file"],
        shards=params["shards"],
        results=results,
        campaign_id=params["campaign_id"],
        run=ShardRunArgs(
            link_check=params["link_check"],
            link=params["link"],
            server=params["server"],
            shard_by=ShardBy(params["shard_by"]),
        ),
        influx=params["influx"],
    )


def _sizes(sub: Submission) -> str:
    sizes = sub.shard_sizes
    shown = ", ".join(map(str, sizes[:10])) + (", ..." if len(sizes) > 10 else "")
    return f"{sub.runs} runs in {sub.shards} shards ({shown} runs)"


@click.group()
def submit() -> None:
    """Run a campaign's shards on a cluster: one `clarke run --shard i/N` per node, then
    their merge (docs/scale.md). Slurm: submitted from here; Kubernetes: manifests."""


@submit.command("slurm")
@_common
@click.option("--partition", help="The partition (default: the cluster's default one).")
@click.option("--time", "time_limit", help="Each job's time limit (sbatch --time, e.g. 2:00:00).")
@click.option(
    "--results",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("results"),
    show_default=True,
    help="Where the shards' and the merged directories go: storage every node reaches at "
    "the same path.",
)
@click.option(
    "--emit",
    is_flag=True,
    help="Write the batch scripts (<results>/<id>.slurm/) and print how to submit them; "
    "submit nothing.",
)
@click.option(
    "--wait",
    is_flag=True,
    help="Stay until the merge job has ended, saying every change of a job's state; exit 0 "
    "only when every run of the plan has a successful load.",
)
def slurm_cmd(**params: Any) -> None:
    """Submit CAMPAIGN_FILE to Slurm: one job array (a task per shard, each on a whole
    node, requeued and resumed when its node dies) and a merge job after it (afterok)
    that writes the merged directory and its report.

    Exits 2 on bad input (shards below 1 or more than the plan fills, an unknown
    partition), 3 when Slurm is not installed or its controller does not answer."""
    if params["emit"] and params["wait"]:
        raise InputError("--emit submits nothing, so there is nothing to --wait for")
    sub = prepare(_submit_options(params, params["results"]))
    options = slurm.SlurmOptions(
        partition=params["partition"],
        time=params["time_limit"],
        max_restarts=params["max_restarts"],
    )
    slurm.check_paths(sub)
    if params["emit"]:
        where = slurm.write(sub, options)
        click.echo(f"campaign {sub.campaign_id}: {_sizes(sub)}; batch scripts in {where}")
        click.echo("submit them (the merge after every shard succeeded):")
        for line in slurm.emitted_commands(where):
            click.echo(f"  {line}")
        return
    cluster = slurm.check_cluster(sub, options)
    where = slurm.write(sub, options)
    done = slurm.submit(sub, where)
    _print_submitted(sub, cluster, done)
    if params["wait"]:
        _wait(sub, done)


def _print_submitted(sub: Submission, cluster: slurm.Cluster, done: slurm.Submitted) -> None:
    logs = done.directory / slurm.LOGS
    click.echo(
        f"campaign {sub.campaign_id}: {_sizes(sub)}, each on a whole node of partition "
        f"{cluster.partition.name}"
    )
    for note in cluster.notes:
        click.echo(f"note: {note}")
    click.echo(f"shards: job {done.array_job} (array tasks 1-{sub.shards})")
    click.echo(f"merge:  job {done.merge_job} (once every shard has succeeded)")
    click.echo(f"batch scripts and logs: {done.directory}")
    click.echo(f"watch:  squeue -j {done.array_job},{done.merge_job}")
    click.echo(f"        tail -f {shlex.quote(str(logs))}/shard-1.out")
    click.echo(f"cancel: scancel {done.array_job} {done.merge_job}")
    click.echo(f"merged results, when done: {sub.merged_dir}")


def _wait(sub: Submission, done: slurm.Submitted) -> None:
    try:
        jobs = slurm_jobs.wait(done, sub.shards, click.echo)
    except KeyboardInterrupt:
        click.echo(
            f"stopped waiting; the jobs go on (scancel {done.array_job} {done.merge_job} "
            "ends them)",
            err=True,
        )
        raise
    if (sub.merged_dir / store.META).is_file():
        missing = store.read_meta(sub.merged_dir).missing_runs
        click.echo(
            f"merged: {sub.merged_dir}: {sub.runs - len(missing)} of {sub.runs} runs with a "
            f"successful load; report: {sub.merged_dir / 'report.html'}"
        )
        if not missing and jobs[-1].state == "COMPLETED":
            return
        if missing:
            raise ClarkeError(
                f"{len(missing)} runs without a successful load: {', '.join(missing)}"
            )
    failed = [j for j in jobs if j.state != "COMPLETED"]
    logs = done.directory / slurm.LOGS
    for job in failed:
        name = "merge" if job.label == "merge" else f"shard-{job.label.split()[1].split('/')[0]}"
        click.echo(f"{job.label}: {job.describe()}; log: {logs / (name + '.out')}", err=True)
    raise ClarkeError(
        f"campaign {sub.campaign_id} was not merged; once the logs' reasons are dealt with, "
        "the same `clarke submit slurm` with --campaign-id "
        f"{sub.campaign_id} continues the shards' directories"
    )


@submit.command("k8s")
@_common
@click.option(
    "--emit",
    is_flag=True,
    help="Write the manifests (required: Clarke applies nothing to a cluster itself).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory for clarke-campaign.yaml and clarke-merge.yaml, and for "
    "clarke-influx-secret.yaml when --influx holds a password (default: k8s-<id>/).",
)
@click.option(
    "--image",
    default=k8s.K8sOptions.image,
    show_default=True,
    help="Clarke's client image, where the cluster pulls it from.",
)
@click.option(
    "--storage",
    default=k8s.K8sOptions.storage,
    show_default=True,
    help="Size of the results volume (ReadWriteMany).",
)
def k8s_cmd(**params: Any) -> None:
    """Write CAMPAIGN_FILE's shards as a Kubernetes Indexed Job (a pod per shard, each
    with its own netns testbed) and their merge as a Job, from the same steps as the
    Slurm batch scripts; apply them with kubectl (docs/kubernetes.md). Only parsed here:
    no cluster has run them."""
    if not params["emit"]:
        raise InputError(
            "clarke submit k8s writes manifests for kubectl and applies nothing itself: give --emit"
        )
    sub = prepare(_submit_options(params, Path("/results")))
    options = k8s.K8sOptions(
        image=params["image"], storage=params["storage"], max_restarts=params["max_restarts"]
    )
    out = params["out"] or Path(f"k8s-{sub.campaign_id}")
    paths = k8s.write(sub, options, out)
    written = ", ".join(map(str, paths.values()))
    click.echo(f"campaign {sub.campaign_id}: {_sizes(sub)}; written: {written}")
    secret = paths.get(k8s.SECRET_MANIFEST)
    if secret:
        click.echo(
            f"the InfluxDB user and password are in {secret} alone (a Secret, mode 0600); "
            "keep that file to yourself"
        )
    click.echo("apply them (docs/kubernetes.md):")
    if secret:
        click.echo(f"  kubectl apply -f {shlex.quote(str(secret))}")
    click.echo(f"  kubectl apply -f {shlex.quote(str(paths[k8s.SHARDS_MANIFEST]))}")
    click.echo("  kubectl wait --for=condition=complete job/clarke-shards --timeout=2h")
    click.echo(f"  kubectl apply -f {shlex.quote(str(paths[k8s.MERGE_MANIFEST]))}")
