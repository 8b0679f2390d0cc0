"""A role container's own network, as `clarke serve` sets it up: Docker attaches the
container to its networks (docker-compose.yml, addresses from ComposePlan); the rest is
ours. Docker also gives every container a default route, even on internal networks;
the roles drop it, so that nothing but the testbed's own routes exists."""

from __future__ import annotations

import json
import logging

from clarke import sh
from clarke.errors import EnvironmentProblem

log = logging.getLogger(__name__)


def addresses() -> dict[str, str]:
    """This container's IPv4 addresses: {address: interface}."""
    out = sh.run(["ip", "-j", "-4", "addr", "show"]).stdout
    return {
        a["local"]: link["ifname"]
        for link in json.loads(out or "[]")
        for a in link.get("addr_info", [])
        if a.get("family") == "inet"
    }


def interface_of(address: str) -> str:
    """The interface that holds `address` (Docker names them eth0, eth1 … in an order of
    its own, so the address from the plan is what identifies a network)."""
    found = addresses()
    if address not in found:
        have = ", ".join(sorted(found)) or "none"
        raise EnvironmentProblem(
            f"this container has no address {address} (it has: {have}); is it attached to "
            "the networks docker-compose.yml gives its role?"
        )
    return found[address]


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


def tun_address(dev: str, cidr: str) -> None:
    sh.run(["ip", "addr", "replace", cidr, "dev", dev])
    sh.run(["ip", "link", "set", dev, "up"])


def read_sysctl(key: str) -> str:
    with open(f"/proc/sys/{key.replace('.', '/')}") as f:
        return f.read().strip()
