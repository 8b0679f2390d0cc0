"""`clarke agent`: the role agent, started by the testbed in each role's namespace or
container."""

from __future__ import annotations

import click

from clarke.agent import roles
from clarke.agent.server import serve

ROLES = ("client", "terminal", "satellite", "gateway", "server")


@click.command()
@click.option("--role", type=click.Choice(ROLES), required=True, help="The role this agent serves.")
@click.option("--listen", required=True, help="HOST:PORT on the management network.")
@click.option("--satlink-control", help="terminal/satellite/gateway: satlink's control socket.")
@click.option("--server-control", help="server: the web server's control URL (origin).")
@click.option(
    "--server-implementation",
    default="origin",
    show_default=True,
    help="server: which web server is behind --server-control.",
)
def agent(
    role: str,
    listen: str,
    satlink_control: str | None,
    server_control: str | None,
    server_implementation: str,
) -> None:
    """Serve a role's agent: GET /health, POST /config, GET /stats, POST /stats/reset,
    and POST /load on the client."""
    host, _, port = listen.rpartition(":")
    impl: roles.Role
    if role == "client":
        impl = roles.ClientRole()
    elif role == "server":
        if not server_control:
            raise click.UsageError("--server-control is required for the server role")
        impl = roles.HttpControlledRole(role, server_implementation, server_control)
    else:
        if not satlink_control:
            raise click.UsageError(f"--satlink-control is required for the {role} role")
        impl = roles.SatlinkRole(role, satlink_control)
    serve(impl, host, int(port))
