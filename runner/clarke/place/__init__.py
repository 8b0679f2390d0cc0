"""Where a role runs: a *place* is what a substrate supplies to a role's implementation.

    Place         one role's place: its testbed's addresses, its directories, and how
                  its commands reach the role's network (a netns testbed's namespace,
                  or the compose stack's container)
    plan.py       names and addresses of every testbed, both substrates (the one place)
    netns.py      `ip` and `sysctl` wrappers (namespaces, veths, addresses, routes)
    procs.py      processes: start in a namespace, wait until ready, stop by PID
    container.py  a role container's own network (compose)
    echo.py       `python -m clarke.place.echo`: ICMP echoes with microsecond RTTs

A role's agent runs in its place (started inside the namespace by `clarke testbed up`,
or as the container's main process), so an implementation's commands run there as
they are; `ns` is set only when a caller outside the namespace drives an
implementation directly (tests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clarke.place import netns
from clarke.place.plan import Addresses


@dataclass(frozen=True)
class Place:
    """One role's place.

    substrate   netns | compose
    role        the role it holds
    plan        its testbed's addresses (NetnsPlan or ComposePlan)
    run_dir     the role's own files: configuration, control sockets, logs
    pages_dir   the pages the server serves (the client's runner writes them)
    pki_dir     the testbed CA and the server's certificate (the server makes them)
    ns          commands enter this namespace first (None: this process is in it)"""

    substrate: str
    role: str
    plan: Addresses
    run_dir: Path
    pages_dir: Path
    pki_dir: Path
    ns: str | None = None

    def argv(self, argv: Sequence[str]) -> list[str]:
        """argv as a command in this place."""
        return netns.exec_argv(self.ns, argv) if self.ns else list(argv)

    def ip(self) -> list[str]:
        """`ip` for this place's network."""
        return netns.ip(self.ns)

    def address(self, network: str) -> str:
        """This role's address on one of its networks (st-lan, emu, gw-lan, sat, mgmt)."""
        net = {n.name: n for n in self.plan.networks}[network]
        return net.address(self.role)

    def iface(self, network: str) -> str:
        """The interface holding this role's address on `network`, found by address, so
        that the names a substrate gives interfaces do not matter."""
        return netns.interface_of(self.address(network), self.ns)
