"""`clarke testbed up|down|status|verify`: the netns testbed (runner/clarke/testbed/)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clarke.errors import InputError
from clarke.link import profiles
from clarke.testbed import backends, lifecycle, plan, verify


def _profile_help() -> str:
    try:
        names = ", ".join(profiles.available())
        return f"Link profile: {names}, or a profile file NAME.yaml."
    except FileNotFoundError:
        return "Link profile (profiles/NAME.yaml)."


@click.group()
def testbed() -> None:
    """Build, check and remove netns testbeds: client, terminal, satellite, gateway and
    server as network namespaces joined by an emulated satellite link (needs root)."""


@testbed.command()
@click.option("--profile", "profile_name", required=True, help=_profile_help())
@click.option(
    "--id",
    "testbed_id",
    type=click.IntRange(0, plan.MAX_ID),
    help="Testbed id (addresses and names derive from it); default: the lowest free one.",
)
@click.option(
    "--backend",
    type=click.Choice(["auto", *backends.NAMES]),
    default="auto",
    show_default=True,
    help="Link emulation; auto means satlink.",
)
@click.option("--json", "as_json", is_flag=True, help="Print id, namespaces and addresses as JSON.")
def up(profile_name: str, testbed_id: int | None, backend: str, as_json: bool) -> None:
    """Build a testbed and start its link; nothing is left behind if this fails."""
    state, p = lifecycle.up(profile_name, testbed_id, backend)
    if as_json:
        out = {
            "id": state.id,
            "namespaces": {r: p.ns(r) for r in plan.ROLES},
            "addresses": p.addresses,
            "mgmt": p.mgmt_addresses,
            "profile": state.profile,
            "backend": state.backend,
            "run_dir": state.run_dir,
        }
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"testbed {state.id} up: profile {state.profile}, backend {state.backend}")
    for role in plan.ROLES:
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
    from clarke.testbed import netns

    netns.require_root_and_tun()
    if everything == (testbed_id is not None):
        raise InputError("give either --id ID or --all")
    removed = lifecycle.down_all() if everything else [lifecycle.down(testbed_id)]  # type: ignore[arg-type]
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
    """List testbeds: profile, backend, namespaces, processes and whether all are alive."""
    from clarke.testbed import netns

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
            f"testbed {e['id']}: {e['phase']}, profile {e['profile']}, backend {e['backend']}, "
            f"{len(e['namespaces'])} namespaces, {alive}/{len(e['processes'])} processes alive"
            f"{'' if e['healthy'] else '  (UNHEALTHY)'}"
        )
    click.echo(backends.describe_netem())


def _verify_netns(
    testbed_id: int | None, samples: int, duration: float, omit: float
) -> verify.Report:
    from clarke.testbed import netns

    netns.require_root_and_tun()
    state, p = lifecycle.load_up(testbed_id)
    return verify.verify(
        verify.netns_probe(p, backends.select(state.backend), Path(state.run_dir)),
        state.id,
        state.profile,
        lifecycle.load_profile(state.profile),
        state.backend,
        samples=samples,
        duration=duration,
        omit=omit,
    )


def _verify_compose(
    profile_name: str | None, samples: int, duration: float, omit: float
) -> verify.Report:
    """The compose stack: the link roles through their agents, the measurements from
    this container (the client's)."""
    from clarke.compose.session import ComposeSession

    if not profile_name:
        raise click.UsageError(
            "--substrate compose needs --profile (the link runs what it is given)"
        )
    profile = lifecycle.load_profile(profile_name)
    session = ComposeSession(profile_name, [], engine="selenium", roles_only=True)
    try:
        session.start()
        session.apply_profile(profile_name)
        return verify.verify(
            session.probe(),
            "compose",
            profile_name,
            profile,
            session.implementations["link"],
            samples=samples,
            duration=duration,
            omit=omit,
        )
    finally:
        session.close()


@testbed.command(name="verify")
@click.option("--id", "testbed_id", type=click.IntRange(0, plan.MAX_ID), help="Testbed id.")
@click.option("--samples", default=20, show_default=True, help="Echo requests for the RTT.")
@click.option("--duration", default=10.0, show_default=True, help="Seconds of each bulk transfer.")
@click.option("--omit", default=4.0, show_default=True, help="Start-up seconds not counted.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--out", type=click.Path(path_type=Path), help="Also write the JSON report here.")
@click.option(
    "--substrate",
    type=click.Choice(["netns", "compose"]),
    envvar="CLARKE_SUBSTRATE",
    default="netns",
    show_default=True,
    help="compose: the running compose stack, from its client container "
    "(docs/compose.md). Env: CLARKE_SUBSTRATE.",
)
@click.option(
    "--profile",
    "profile_name",
    help="compose: apply this link profile through the link agents, then measure it.",
)
def verify_cmd(
    testbed_id: int | None,
    samples: int,
    duration: float,
    omit: float,
    as_json: bool,
    out: Path | None,
    substrate: str,
    profile_name: str | None,
) -> None:
    """Measure RTT, rate each way and loss, compare with the profile; exit 1 outside
    the profile's tolerance."""
    if substrate == "compose":
        report = _verify_compose(profile_name, samples, duration, omit)
    else:
        if profile_name:
            raise click.UsageError("--profile goes with --substrate compose")
        report = _verify_netns(testbed_id, samples, duration, omit)
    data = report.to_dict()
    if out:
        out.write_text(json.dumps(data, indent=2, default=str))
    click.echo(json.dumps(data, indent=2, default=str) if as_json else verify.render(report))
    if not report.ok:
        raise SystemExit(1)
