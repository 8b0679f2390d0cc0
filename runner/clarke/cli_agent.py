"""`clarke agent`: the role agent, started by the testbed in each role's namespace or
container."""

from __future__ import annotations

from pathlib import Path

import click

from clarke import tls
from clarke.agent import auth, roles
from clarke.agent.server import check_listen_address, serve
from clarke.browser.load import BrowserSetup

ROLES = ("client", "terminal", "satellite", "gateway", "server")


@click.command()
@click.option("--role", type=click.Choice(ROLES), required=True, help="The role this agent serves.")
@click.option(
    "--listen",
    required=True,
    help="ADDR:PORT: the role's address on the management network (never 0.0.0.0).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The bearer token every request but GET /health must carry (a file only its "
    "owner may read).",
)
@click.option("--satlink-control", help="terminal/satellite/gateway: satlink's control socket.")
@click.option("--server-control", help="server: the web server's control URL (origin).")
@click.option(
    "--server-implementation",
    default="origin",
    show_default=True,
    help="server: which web server is behind --server-control.",
)
@click.option(
    "--firefox",
    help="client: the Firefox binary (a name on PATH or a path) [default: the first of "
    "firefox-nightly, firefox, firefox-esr].",
)
@click.option(
    "--ca-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    help="client: the testbed CA (PEM) every load's profile trusts.",
)
@click.option(
    "--server-name",
    default=tls.DEFAULT_HOST,
    show_default=True,
    help="client: the only host a load request's URL may name.",
)
@click.option(
    "--server-port",
    type=click.IntRange(1, 65535),
    default=443,
    show_default=True,
    help="client: the only port a load request's URL may name.",
)
def agent(
    role: str,
    listen: str,
    token_file: Path,
    satlink_control: str | None,
    server_control: str | None,
    server_implementation: str,
    firefox: str | None,
    ca_cert: Path | None,
    server_name: str,
    server_port: int,
) -> None:
    """Serve a role's agent: GET /health, POST /config, GET /stats, POST /stats/reset,
    and POST /load on the client. Every path the agent uses is one of these options; a
    request carries values only."""
    host, _, port = listen.rpartition(":")
    if not port.isdigit():
        raise click.BadParameter(f"{listen!r} is not ADDR:PORT", param_hint="--listen")
    check_listen_address(host.strip("[]"))
    if role != "client" and (firefox or ca_cert):
        raise click.UsageError("--firefox and --ca-cert are options of the client role")
    token = auth.read_token(token_file)
    impl: roles.Role
    if role == "client":
        if ca_cert is not None and not ca_cert.is_file():
            raise click.BadParameter(f"{ca_cert}: no such file", param_hint="--ca-cert")
        setup = BrowserSetup(
            firefox=firefox, ca_cert=ca_cert, server_name=server_name, server_port=server_port
        )
        impl = roles.ClientRole(setup)
    elif role == "server":
        if not server_control:
            raise click.UsageError("--server-control is required for the server role")
        impl = roles.HttpControlledRole(role, server_implementation, server_control)
    else:
        if not satlink_control:
            raise click.UsageError(f"--satlink-control is required for the {role} role")
        impl = roles.SatlinkRole(role, satlink_control)
    serve(impl, host.strip("[]"), int(port), token)
