"""`clarke serve`: the main process of a role's container in the compose stack."""

from __future__ import annotations

import logging
import sys

import click

ROLES = ("client", "terminal", "satellite", "gateway", "server")
DEFAULTS = {"terminal": "satlink", "satellite": "satlink", "gateway": "satlink", "server": "origin"}


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("role", type=click.Choice(ROLES))
@click.option(
    "--implementation",
    envvar="CLARKE_IMPLEMENTATION",
    help="terminal, satellite, gateway: satlink (default) or opensand; server: origin "
    "(default) or openlitespeed. Env: CLARKE_IMPLEMENTATION.",
)
@click.option(
    "--check", is_flag=True, help="Only ask the role's agent for /health: exit 0 if it answers."
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def serve(role: str, implementation: str | None, check: bool, command: tuple[str, ...]) -> None:
    """Run ROLE in this container of the compose stack (docker-compose.yml): its network,
    its implementation and its role agent on the mgmt network, until the container is
    stopped. `clarke serve client -- COMMAND...` sets up the client's network and runs
    COMMAND (the campaign) in its place. Addresses come from the testbed plan."""
    from clarke.compose import serve as impl

    logging.getLogger().setLevel(logging.WARNING)
    if check:
        impl.health(role)
        return
    if role == "client":
        impl.exec_client(list(command))
    if command:
        raise click.UsageError(f"the {role} role takes no command")
    sys.exit(impl.serve_role(role, implementation or DEFAULTS[role]))
