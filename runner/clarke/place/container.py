"""A role container's own network, as `clarke serve` sets it up: Docker attaches the
container to its networks (docker-compose.yml, addresses from ComposePlan); the rest is
ours. Docker also gives every container a default route, even on internal networks;
the roles drop it, so that nothing but the testbed's own routes exists."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import NoReturn

from clarke import sh
from clarke.errors import EnvironmentProblem
from clarke.place import netns
from clarke.place.plan import ComposePlan

log = logging.getLogger(__name__)


def drop_default_route() -> bool:
    """Remove Docker's default route; True if there was one."""
    routes = json.loads(sh.run(["ip", "-j", "route", "show", "default"]).stdout or "[]")
    if not routes:
        return False
    sh.run(["ip", "route", "del", "default"])
    return True


def route(prefix: str, *, via: str | None = None, dev: str | None = None) -> None:
    argv = ["ip", "route", "replace", prefix]
    if via:
        argv += ["via", via]
    if dev:
        argv += ["dev", dev]
    sh.run(argv)


def read_sysctl(key: str) -> str:
    with open(f"/proc/sys/{key.replace('.', '/')}") as f:
        return f.read().strip()


def prepare(role: str, plan: ComposePlan) -> None:
    """A role container's network as the testbed plan says: attached to its mgmt
    network, no default route, and client and server routed into the link."""
    netns.interface_of(plan.mgmt.address(role))  # attached as the plan says, or a clear error
    if drop_default_route():
        log.warning("%s: dropped Docker's default route (the testbed has no way out)", role)
    if role in ("client", "server"):
        route(str(plan.remote_lan(role).prefix), via=plan.next_hop(role))


def exec_client(plan: ComposePlan, argv: list[str]) -> NoReturn:
    """The client container: its route into the link, no other way out, then the
    command (the campaign) in this process's place."""
    if not argv:
        raise EnvironmentProblem("clarke serve client needs a command to run after --")
    netns.interface_of(plan.st_lan.address("client"))
    drop_default_route()
    route(str(plan.gw_lan.prefix), via=plan.next_hop("client"))
    sys.stdout.flush()
    os.execvp(argv[0], argv)
