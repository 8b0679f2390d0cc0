"""`clarke testbed up|down|status|check`: the netns testbed (runner/clarke/testbed/)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import click

from clarke import profiles
from clarke.cli.options import (
    FiniteFloat,
    implementation_option,
    link_option,
    options_into,
    substrate_option,
)
from clarke.compose.substrate import ComposeSubstrate
from clarke.errors import InputError
from clarke.link import netem
from clarke.place import netns, plan
from clarke.run.linkcheck import check as linkcheck
from clarke.run.linkcheck.check import CheckLevel
from clarke.run.session.session import Session
from clarke.run.session.settings import ROLES_ONLY
from clarke.testbed import lifecycle
from clarke.testbed.substrate import NetnsSubstrate
from clarke.vocab import ROLES

MAX_CHECK_S = 3600.0  # an hour of echoes or of bulk transfer each way
MIN_ECHO_INTERVAL_S = 0.001  # the echo tool's own timing is no finer
MAX_ECHOES = 360_000  # an hour every 10 ms: each is kept with its send time


@click.group()
def testbed() -> None:
    """Build, check and remove netns testbeds: client, terminal, satellite, gateway and
    server as network namespaces joined by an emulated satellite link (needs root)."""


@testbed.command()
@click.option("--profile", "profile_name", required=True, help=profiles.help_text())
@click.option(
    "--id",
    "testbed_id",
    type=click.IntRange(0, plan.MAX_ID),
    help="Testbed id (addresses and names derive from it); default: the lowest free one.",
)
@link_option()
@implementation_option("server", defaults_here=True)
@click.option(
    "--firefox",
    help="The client's Firefox binary, a name on PATH or a path, for the testbed's life "
    "(default: the first of firefox-nightly, firefox, firefox-esr).",
)
@click.option("--json", "as_json", is_flag=True, help="Print id, namespaces and addresses as JSON.")
def up(
    profile_name: str,
    testbed_id: int | None,
    link: str,
    server: str,
    firefox: str | None,
    as_json: bool,
) -> None:
    """Build a testbed: every role's namespace and agent, the link on the profile;
    nothing is left behind if this fails."""
    done = lifecycle.up(profile_name, testbed_id, link, server, firefox=firefox)
    state, p = done.state, done.plan
    if as_json:
        out = {
            "id": state.id,
            "namespaces": {r: p.ns(r) for r in ROLES},
            "addresses": p.addresses,
            "mgmt": p.mgmt_addresses,
            "profile": state.profile,
            "profile_sha256": state.profile_sha256,
            "link": state.link,
            "server": state.server,
            "run_dir": state.run_dir,
            "applied": [done.applied.to_dict()] if done.applied else [],
        }
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(
        f"testbed {state.id} up: profile {state.profile}, link {state.link}, server {state.server}"
    )
    for role in ROLES:
        click.echo(
            f"  {role:<10}{p.ns(role):<18}{p.addresses[role]:<16}mgmt {p.mgmt.address(role)}"
        )
    click.echo(f"  runner    (root namespace) {p.root_mgmt_link} mgmt {p.mgmt.address('runner')}")
    for note in state.host_changes:
        click.echo(f"  host change: {note}")


@testbed.command()
@click.option("--id", "testbed_id", type=click.IntRange(0, plan.MAX_ID), help="Testbed id.")
@click.option(
    "--all", "everything", is_flag=True, help="Every testbed, also ones without a state file."
)
def down(testbed_id: int | None, everything: bool) -> None:
    """Stop a testbed's processes and remove its namespaces and links (safe to repeat)."""
    netns.require_root_and_tun()
    if testbed_id is None and not everything:
        raise InputError("give either --id ID or --all")
    if testbed_id is not None and everything:
        raise InputError("give either --id ID or --all, not both")
    removed = lifecycle.down_all() if testbed_id is None else [lifecycle.down(testbed_id)]
    if not any(r.anything for r in removed):
        click.echo("nothing to remove")
    for r in removed:
        if r.anything:
            click.echo(
                f"testbed {r.id}: removed {len(r.namespaces)} namespaces, stopped "
                f"{len(r.processes)} processes, {len(r.links)} root links"
            )


@testbed.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def status(as_json: bool) -> None:
    """List testbeds: profile, implementations, namespaces, agents and whether all answer."""
    netns.require_root_and_tun()
    entries = lifecycle.status()
    if as_json:
        click.echo(json.dumps(entries, indent=2))
        return
    if not entries:
        click.echo("no testbeds")
    for e in entries:
        alive = sum(p["alive"] for p in e["processes"])
        click.echo(
            f"testbed {e['id']}: {e['phase']}, profile {e['profile']}, link {e['link']}, "
            f"server {e['server']}, {len(e['namespaces'])} namespaces, "
            f"{alive}/{len(e['processes'])} processes alive"
            f"{'' if e['healthy'] else '  (UNHEALTHY)'}"
        )
    click.echo(netem.describe())


def _check(
    substrate: str,
    testbed_id: int | None,
    profile_name: str | None,
    samples: int,
    duration: float,
    omit: float,
) -> linkcheck.Report:
    """netns: the testbed's link on the profile it runs (or --profile, applied first);
    compose: the stack's link roles through their agents, measured from this container
    (the client's)."""
    if substrate == "compose":
        if not profile_name:
            raise click.UsageError(
                "--substrate compose needs --profile (the link runs what it is given)"
            )
        sub: ComposeSubstrate | NetnsSubstrate = ComposeSubstrate(roles_only=True)
        label: int | str = "compose"
    else:
        netns.require_root_and_tun()
        state, _ = lifecycle.running(testbed_id)
        sub = NetnsSubstrate(state.id)
        profile_name = profile_name or state.profile
        label = state.id
    session = Session(sub, [], ROLES_ONLY)
    try:
        session.start(profile_name)
        session.ensure_profile(profile_name)
        return session.link().measure(profile_name, CheckLevel(samples, duration, omit), label)
    finally:
        session.close()


@dataclass(frozen=True)
class CheckOptions:
    """What `clarke testbed check` was asked."""

    testbed_id: int | None
    samples: int
    duration: float
    omit: float
    as_json: bool
    out: Path | None
    substrate: str
    profile_name: str | None


@testbed.command(name="check")
@click.option("--id", "testbed_id", type=click.IntRange(0, plan.MAX_ID), help="Testbed id.")
@click.option(
    "--samples", type=click.IntRange(1, 10_000), default=20, show_default=True,
    help="Echo requests for the RTT.",
)  # fmt: skip
@click.option(
    "--duration", type=FiniteFloat(0, MAX_CHECK_S, min_open=True), default=10.0,
    show_default=True, help=f"Seconds of each bulk transfer (at most {MAX_CHECK_S:g}).",
)  # fmt: skip
@click.option(
    "--omit", type=FiniteFloat(0, MAX_CHECK_S), default=4.0, show_default=True,
    help="Start-up seconds not counted (less than --duration).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--out", type=click.Path(path_type=Path), help="Also write the JSON report here.")
@substrate_option(
    "compose: the running compose stack, from its client container (docs/compose.md)."
)
@click.option(
    "--profile",
    "profile_name",
    help="Apply this link profile through the link agents first, then measure it "
    "(netns: default the profile the testbed runs; compose: required).",
)
@options_into(CheckOptions)
def check_cmd(o: CheckOptions) -> None:
    """Measure RTT, rate each way and loss, compare with the profile; exit 1 outside
    the profile's tolerance."""
    if o.omit >= o.duration:
        raise click.BadParameter(
            f"{o.omit:g} s: must be less than --duration ({o.duration:g} s)", param_hint="--omit"
        )
    report = _check(o.substrate, o.testbed_id, o.profile_name, o.samples, o.duration, o.omit)
    data = report.to_dict()
    if o.out:
        o.out.write_text(json.dumps(data, indent=2, default=str))
    click.echo(json.dumps(data, indent=2, default=str) if o.as_json else linkcheck.render(report))
    if not report.ok:
        raise SystemExit(1)


@testbed.command(name="check-schedule")
@click.option("--id", "testbed_id", type=click.IntRange(0, plan.MAX_ID), help="Testbed id.")
@click.option(
    "--duration", type=FiniteFloat(0, MAX_CHECK_S, min_open=True), default=60.0,
    show_default=True, help=f"Seconds of echoes (at most {MAX_CHECK_S:g}).",
)  # fmt: skip
@click.option(
    "--interval", type=FiniteFloat(MIN_ECHO_INTERVAL_S, MAX_CHECK_S), default=0.01,
    show_default=True,
    help=f"Seconds between echoes ({MIN_ECHO_INTERVAL_S:g} at least, at most --duration; "
    f"{MAX_ECHOES:,} echoes at most).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check_schedule(testbed_id: int | None, duration: float, interval: float, as_json: bool) -> None:
    """Echo requests along the schedule of the profile the testbed runs (satlink): the
    error against the schedule's RTT per step (p50, p99), and how long after each step
    that changes the RTT the change showed. docs/schedules.md."""
    from clarke.run.linkcheck.follow import follow

    if interval > duration:
        raise click.BadParameter(
            f"{interval:g} s: longer than --duration ({duration:g} s), not one echo",
            param_hint="--interval",
        )
    if duration / interval > MAX_ECHOES:
        raise click.BadParameter(
            f"{interval:g} s over --duration {duration:g} s: {duration / interval:,.0f} echoes, "
            f"at most {MAX_ECHOES:,}",
            param_hint="--interval",
        )
    netns.require_root_and_tun()
    state, _ = lifecycle.running(testbed_id)
    session = Session(NetnsSubstrate(state.id), [], ROLES_ONLY)
    try:
        session.start(state.profile)
        session.ensure_profile(state.profile)
        report = follow(session.link().probe(), profiles.read(state.profile), duration, interval)
    finally:
        session.close()
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(
        f"{state.profile}: {report['sent']} echoes every {report['interval_ms']:.0f} ms, "
        f"{report['lost']} lost; error against the schedule p50 {report['error_p50_ms']:.3f} ms, "
        f"p99 {report['error_p99_ms']:.3f} ms"
    )
    for st in report["steps"]:
        click.echo(
            f"  steps return {st['return_step']:>3} forward {st['forward_step']:>3}: "
            f"{st['echoes']:>5} echoes, expected {st['expected_rtt_ms']:.3f} ms, error p50 "
            f"{st['error_p50_ms']:+.3f} p99 {st['error_p99_ms']:+.3f} ms"
        )
    for ch in report["changes"]:
        after = ch["shown_after_ms"]
        click.echo(
            f"  change at link time {ch['at_link_s']:.3f} s: {ch['expected_from_ms']:.3f} -> "
            f"{ch['expected_to_ms']:.3f} ms, shown "
            + ("never" if after is None else f"{after:.0f} ms after the first echo past it")
        )
