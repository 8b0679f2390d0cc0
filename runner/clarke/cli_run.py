"""`clarke run`: execute a whole campaign."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click
from rich.console import Console

from clarke import registry
from clarke.errors import InputError
from clarke.vocab import SUBSTRATES


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
    "--campaign-id", help="Campaign id (default: <name>-<UTC time>); give every shard the same one."
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
@click.option(
    "--substrate",
    type=click.Choice(SUBSTRATES),
    envvar="CLARKE_SUBSTRATE",
    default="netns",
    show_default=True,
    help="netns: build the five roles as network namespaces on this host (root); compose: "
    "drive the roles of the running compose stack, from its client container. "
    "Env: CLARKE_SUBSTRATE.",
)
@click.option(
    "--link-check",
    type=click.Choice(["full", "quick"]),
    default="full",
    show_default=True,
    help="How long the link is measured before each profile's first run and after the last: "
    "full (20 pings, 10 s of iperf3 each way) or quick (10 pings, 5 s each way).",
)
@click.option(
    "--link",
    type=click.Choice(registry.names("link")),
    help="The link's implementation (default: the campaign's `implementations: link`, else "
    "satlink). " + registry.help_text("link"),
)
@click.option(
    "--server",
    type=click.Choice(registry.names("server")),
    help="The server's implementation (default: the campaign's, else origin). "
    + registry.help_text("server"),
)
@click.option(
    "--capture",
    type=click.Choice(["none", "failed", "all"]),
    default="none",
    show_default=True,
    help="Keep a capture of each load under <results>/captures/<run>-a<attempt>/: the "
    "satellite hop's packets (pcap), the browser's TLS key log and HTTP/3 qlog files. "
    "failed: only for loads that failed. docs/captures.md says how to open them.",
)
@click.option(
    "--capture-max-mb",
    type=click.IntRange(1, 512),
    default=100,
    show_default=True,
    help="Per load: the most MB of pcap, and of key log and qlog files together.",
)
def run(
    campaign_file: Path,
    influx_url: str | None,
    resume: Path | None,
    shard: str | None,
    campaign_id: str | None,
    results_base: Path,
    testbed_id: int | None,
    substrate: str,
    link_check: str,
    link: str | None,
    server: str | None,
    capture: str,
    capture_max_mb: int,
) -> None:
    """Run CAMPAIGN_FILE on a testbed: every run of its plan (or of one shard), each
    verified and recorded in the journal and InfluxDB, then a summary per matrix cell.

    Ctrl-C abandons the current load, tears the testbed down and says how to resume.
    Exits 1 when no run got a successful load, 2 on bad input, 3 when a part is
    missing (checked before anything runs)."""
    # Here, not at the top: the summaries' statistics (scipy) take a second to import,
    # which every other command (and every role's agent) would pay.
    from clarke.run.campaign import none_succeeded, print_outcome, run_campaign
    from clarke.run.captures import CaptureMode

    console = Console(stderr=False, width=200)
    if _several_implementations(campaign_file, resume, link, server):
        if shard or testbed_id is not None or substrate != "netns" or capture != "none":
            raise InputError(
                "a campaign on several implementations runs each on a new netns testbed: "
                "--shard, --testbed, --substrate compose and --capture take one (pin it "
                "with --link and --server)"
            )
        _run_implementations(
            campaign_file, influx_url, resume, campaign_id, results_base, link_check, link,
            server, console,
        )  # fmt: skip
        return
    # `docker compose stop` and job schedulers send SIGTERM: end like Ctrl-C does (the
    # current load abandoned, the testbed torn down, how to resume printed).
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        results_dir, outcome, records, runs = run_campaign(
            campaign_file,
            influx_url=influx_url,
            resume=resume,
            shard=shard,
            results_base=results_base,
            campaign_id=campaign_id,
            testbed_id=testbed_id,
            console=console,
            link_check=link_check,
            substrate=substrate,
            link=link,
            server=server,
            capture=CaptureMode(capture),
            capture_max_bytes=capture_max_mb * 1_000_000,
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    print_outcome(results_dir, outcome, records, console)
    if outcome.interrupted:
        sys.exit(130)
    if outcome.aborted:
        sys.exit(1)
    if none_succeeded(runs, records):
        console.print("[red]no run got a successful load[/]")
        sys.exit(1)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _several_implementations(
    campaign_file: Path, resume: Path | None, link: str | None, server: str | None
) -> bool:
    from clarke.run.implementations import is_top_directory, wanted_combinations

    if resume is not None:
        return is_top_directory(resume)
    return len(wanted_combinations(campaign_file, link, server)) > 1


def _run_implementations(
    campaign_file: Path,
    influx_url: str | None,
    resume: Path | None,
    campaign_id: str | None,
    results_base: Path,
    link_check: str,
    link: str | None,
    server: str | None,
    console: Console,
) -> None:
    from clarke.run.implementations import State, run_implementations

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        top, index, interrupted = run_implementations(
            campaign_file,
            influx_url=influx_url,
            resume=resume,
            results_base=results_base,
            campaign_id=campaign_id,
            console=console,
            link_check=link_check,
            link=link,
            server=server,
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
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
