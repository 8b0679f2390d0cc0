"""`clarke run`: execute a whole campaign."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from clarke.campaign.plan import CampaignPlan, ShardBy
from clarke.cli.options import capture_max_mb_option, implementation_option, substrate_option
from clarke.errors import InputError
from clarke.ids import IdParam
from clarke.results import store

if TYPE_CHECKING:
    from clarke.run.loop.options import RunOptions


@click.command()
@click.argument("campaign_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--influx",
    "influx_url",
    envvar="CLARKE_INFLUX",
    help="InfluxDB to stream results to: http://[user:pass@]host:port[/database]. "
    "Env: CLARKE_INFLUX. The journal keeps everything either way.",
)
@click.option(
    "--resume",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Continue an interrupted campaign in this results directory; finished runs "
    "are not repeated.",
)
@click.option("--shard", help="Run only the i-th of N disjoint slices of the plan, e.g. 2/4.")
@click.option(
    "--shard-by",
    type=click.Choice([b.value for b in ShardBy]),
    help="How --shard slices the plan: index (default: every N-th run of the plan) or "
    "repetition (each cell's repetitions spread over the N slices).",
)
@click.option(
    "--parallel",
    type=int,
    help="netns: run the campaign on this many testbeds at once, each on its own CPU set "
    "(shared when the host has fewer cores), each cell's repetitions spread over them, "
    "merged into one results directory <id>/ with a check that the testbeds agree; each "
    "testbed's own directory and log are in <id>.testbeds/, which --resume takes. "
    "docs/running.md.",
)
@click.option(
    "--campaign-id",
    type=IdParam(),
    help="Campaign id (default: <name>-<UTC time>), a name (letters, digits, '.', '_', '-'), "
    "not a path; give every shard the same one.",
)
@click.option(
    "--results",
    "results_base",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("results"),
    show_default=True,
    help="Where results directories go.",
)
@click.option(
    "--testbed",
    "testbed_id",
    type=int,
    help="netns: use this running testbed instead of a new one.",
)
@substrate_option(
    "netns: build the five roles as network namespaces on this host (root); compose: "
    "drive the roles of the running compose stack, from its client container."
)
@click.option(
    "--link-check",
    type=click.Choice(["full", "quick"]),
    default="full",
    show_default=True,
    help="How long the link is measured before each profile's first run and after the last: "
    "full (20 pings, 10 s of iperf3 each way) or quick (10 pings, 5 s each way).",
)
@implementation_option(
    "link", default_said="default: the campaign's `implementations: link`, else satlink"
)
@implementation_option("server", default_said="default: the campaign's, else origin")
@click.option(
    "--capture",
    type=click.Choice(["none", "failed", "all"]),
    default="none",
    show_default=True,
    help="Keep a capture of each load under <results>/captures/<run>-a<attempt>/: the "
    "satellite hop's packets (pcap), the browser's TLS key log and HTTP/3 qlog files. "
    "failed: only for loads that failed. docs/captures.md says how to open them.",
)
@capture_max_mb_option("Per load: the most MB of pcap, and of key log and qlog files together.")
def run(campaign_file: Path, **given: Any) -> None:
    """Run CAMPAIGN_FILE on a testbed: every run of its plan (or of one shard), each
    verified and recorded in the journal and InfluxDB, then a summary per matrix cell.

    Ctrl-C abandons the current load, tears the testbed down (every testbed, with
    --parallel) and says how to resume. Exits 1 when no run got a successful load, 2 on
    bad input, 3 when a part is missing (checked before anything runs)."""
    # Here, not at the top: the summaries' statistics (scipy) take a second to import,
    # which every other command (and every role's agent) would pay.
    from clarke.campaign.plan import plan_file

    given = dict(given)
    parallel: int | None = given.pop("parallel")
    console = Console(stderr=False, width=200)
    check_parallel_options(parallel, given)
    options = _options(given)
    # The campaign, read and planned once: everything below takes this plan.
    plan = plan_file(campaign_file)
    several = _several_implementations(plan, options)
    if parallel is not None and parallel > 1:
        if several:
            raise InputError(
                f"--parallel {parallel}: the campaign lists several implementations; pin "
                "one with --link and --server (a campaign on several implementations runs "
                "each on a new testbed in turn)"
            )
        _run_parallel(plan, parallel, options, console)
        return
    if several:
        if (
            options.shard
            or options.testbed_id is not None
            or options.substrate != "netns"
            or (options.capture != "none")
        ):
            raise InputError(
                "a campaign on several implementations runs each on a new netns testbed: "
                "--shard, --testbed, --substrate compose and --capture take one (pin it "
                "with --link and --server)"
            )
        _run_implementations(plan, options, console)
        return
    _run_one(plan, options, console)


def _options(given: dict[str, Any]) -> RunOptions:
    """The options as one value (clarke.run.loop.options)."""
    from clarke.run.loop.options import RunOptions, Shard
    from clarke.run.session.captures import CaptureMode

    shard = given.pop("shard")
    shard_by = ShardBy(given.pop("shard_by") or ShardBy.run_index.value)
    capture = CaptureMode(given.pop("capture"))
    capture_max_bytes = given.pop("capture_max_mb") * 1_000_000
    return RunOptions(
        **given,
        shard=Shard.parse(shard, shard_by) if shard else None,
        capture=capture,
        capture_max_bytes=capture_max_bytes,
    )


def _run_one(plan: CampaignPlan, options: RunOptions, console: Console) -> None:
    from clarke.run.loop.run import none_succeeded, print_outcome, run_campaign

    with _sigterm_as_interrupt():
        done = run_campaign(plan, options, console)
    print_outcome(done.results_dir, done.outcome, done.records, console)
    if done.outcome.interrupted:
        sys.exit(130)
    if done.outcome.aborted:
        sys.exit(1)
    if none_succeeded(done.runs, done.records):
        console.print("[red]no run got a successful load[/]")
        sys.exit(1)


def check_parallel_options(parallel: int | None, given: dict[str, Any]) -> None:
    """What --parallel (and --shard-by) cannot be combined with: exit 2, naming the
    options, before anything is read or started."""
    from clarke.run.parallel.testbeds import is_parallel_dir

    shard, shard_by, resume = given["shard"], given["shard_by"], given["resume"]
    capture = given["capture"]
    if shard_by is not None and not shard:
        raise InputError(f"--shard-by {shard_by} slices the plan for --shard; give --shard i/N")
    if parallel is None or parallel == 1:
        if resume is not None and is_parallel_dir(resume):
            raise InputError(
                f"--resume {resume}: it was run with --parallel; resume it with --parallel "
                "and the same number of testbeds"
            )
        return
    if parallel < 1:
        raise InputError(f"--parallel {parallel}: the number of testbeds must be 1 or more")
    cpus = len(os.sched_getaffinity(0))
    if parallel > cpus:
        raise InputError(
            f"--parallel {parallel}: at most {cpus} here, one testbed per CPU this process may "
            f"use: with more, testbeds share CPUs and their loads' times measure each other's "
            "work, not the link (and every testbed holds a browser, five agents and a link "
            "emulator in memory)"
        )
    clashes = [
        ("--shard", shard is not None),
        ("--testbed", given["testbed_id"] is not None),
        ("--substrate compose", given["substrate"] != "netns"),
        ("--capture", capture != "none"),
    ]
    named = [name for name, given in clashes if given]
    if named:
        raise InputError(
            f"--parallel {parallel} cannot be combined with {', '.join(named)}: it slices the "
            "plan itself (by repetition) and brings up its own netns testbeds"
            + (", and keeps no captures" if capture != "none" else "")
        )


def _run_parallel(plan: CampaignPlan, count: int, options: RunOptions, console: Console) -> None:
    from clarke.run.parallel.testbeds import print_parallel_outcome, run_parallel

    with _sigterm_as_interrupt():
        outcome = run_parallel(plan, count, options, console)
    print_parallel_outcome(outcome, console)
    if outcome.interrupted:
        sys.exit(130)
    if outcome.failed_lanes or outcome.merged is None:
        sys.exit(1)
    meta = store.read_meta(outcome.merged)
    planned = len(store.read_plan(outcome.merged).runs)
    if len(meta.missing_runs) == planned:
        console.print("[red]no run got a successful load[/]")
        sys.exit(1)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """`docker compose stop` and job schedulers send SIGTERM: end like Ctrl-C does (the
    current load abandoned, the testbed torn down, how to resume printed)."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _several_implementations(plan: CampaignPlan, options: RunOptions) -> bool:
    from clarke.run.implementations.several import is_top_directory, wanted_combinations

    if options.resume is not None:
        return is_top_directory(options.resume)
    return len(wanted_combinations(plan, options)) > 1


def _run_implementations(plan: CampaignPlan, options: RunOptions, console: Console) -> None:
    from clarke.run.implementations.several import State, run_implementations

    with _sigterm_as_interrupt():
        top, index, interrupted = run_implementations(plan, options, console)
    for combo in index.combinations:
        where = f" in {combo.results}" if combo.results else ""
        why = f": {combo.reason}" if combo.reason else ""
        console.print(
            f"{combo.label}: {combo.state.value}{where}, "
            f"{combo.runs_ok}/{combo.runs} runs with a successful load{why}"
        )
    console.print(f"the table: clarke report --by implementation {top}")
    if interrupted:
        console.print(f"[yellow]interrupted: continue with clarke run --resume {top} ...[/]")
        sys.exit(130)
    ran = [c for c in index.combinations if c.state is not State.not_installed]
    if not ran or any(c.state is not State.complete or c.runs_ok == 0 for c in ran):
        sys.exit(1)
