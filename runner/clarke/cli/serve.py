"""`clarke serve`: a role's process, started by `clarke testbed up` in the role's
namespace, or as the main process of the role's container in the compose stack."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from clarke import registry
from clarke.agent import auth
from clarke.agent.serve import Dirs, place_for, serve_role
from clarke.compose import health
from clarke.place import container
from clarke.place.plan import MAX_ID, compose_plan
from clarke.vocab import ROLES


def _implementation_help() -> str:
    kinds = {"link": "terminal, satellite, gateway", "server": "server", "client": "client"}
    return "Which implementation fills the role (default: the first named). " + " ".join(
        f"{roles}: {', '.join(registry.names(kind))}." for kind, roles in kinds.items()
    )


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("role", type=click.Choice(ROLES))
@click.option(
    "--implementation",
    envvar="CLARKE_IMPLEMENTATION",
    help=_implementation_help() + " Env: CLARKE_IMPLEMENTATION.",
)
@click.option(
    "--testbed",
    "testbed_id",
    type=click.IntRange(0, MAX_ID),
    help="netns: the role of this testbed, in whose namespace this runs (started by "
    "`clarke testbed up`); without it: the compose stack's container.",
)
@click.option("--run-dir", type=click.Path(path_type=Path), help="The role's own files.")
@click.option("--pages-dir", type=click.Path(path_type=Path), help="The pages served.")
@click.option("--pki-dir", type=click.Path(path_type=Path), help="The testbed CA, certificates.")
@click.option(
    "--profile",
    envvar="CLARKE_PROFILE",
    help="compose, link roles: take this link profile at start (on netns the testbed's "
    "first configure brings it). Env: CLARKE_PROFILE.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="CLARKE_AGENT_TOKEN_FILE",
    default=str(auth.COMPOSE_TOKEN_FILE),
    show_default=True,
    help="The agent token every request but GET /health must carry: a file only its "
    "owner may read (netns: the testbed's run dir; compose: the secrets volume). "
    "Env: CLARKE_AGENT_TOKEN_FILE.",
)
@click.option(
    "--firefox",
    help="client: the Firefox binary, a name on PATH or a path (default: the first of "
    "firefox-nightly, firefox, firefox-esr). A load request never names one.",
)
@click.option(
    "--check", is_flag=True, help="Only ask the role's agent for /health: exit 0 if it answers."
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def serve(role: str, command: tuple[str, ...], **given: Any) -> None:
    """Run ROLE in its place: its implementation and its role agent on the mgmt network,
    until stopped. Addresses come from the testbed plan. `clarke serve client --
    COMMAND...` sets up the compose client container's network and runs COMMAND (the
    campaign) in its place."""
    logging.getLogger().setLevel(logging.WARNING)
    testbed_id: int | None = given["testbed_id"]
    firefox: str | None = given["firefox"]
    if given["check"]:
        sys.exit(health.main([role]))
    if command:
        if role != "client":
            raise click.UsageError(f"the {role} role takes no command")
        container.exec_client(compose_plan(), list(command))
    dirs = Dirs(given["run_dir"], given["pages_dir"], given["pki_dir"])
    place = place_for(role, testbed_id, dirs)
    # On netns, `up` configures the link through the agents; a CLARKE_PROFILE in the
    # environment that started it must not make the link apply a profile twice.
    if firefox and role != "client":
        raise click.UsageError("--firefox is an option of the client role")
    link_profile = None if testbed_id is not None else given["profile"]
    sys.exit(serve_role(place, given["implementation"], given["token_file"], link_profile, firefox))
