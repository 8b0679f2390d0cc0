"""A recorded site's names on a netns testbed: the authoritative resolver in the
gateway's namespace (clarke.dns, on the gateway's address on the server's LAN, so the
client reaches it across the link), optionally a terminal's cache in front of it, and
in the client a stub on its loopback, which the client's resolv.conf names: it forwards
the site's names (uncached) to the gateway's resolver or the terminal's cache and
answers every other name NXDOMAIN itself, so that what the browser looks up besides the
page (its host's name, Firefox's Remote Settings) stays in the client as it does
without a site. Processes are recorded
in the testbed's state file first, so `clarke testbed down` stops them also after the
runner died; the client's resolv.conf goes back to "no DNS server" when they stop.

The client's resolv.conf is rewritten in place (the same file): `ip netns exec`
bind-mounts /etc/netns/<client>/resolv.conf over /etc/resolv.conf for the client's
agent, which is already running, and a bind mount follows the file, not its name; a
new browser reads it when it starts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from clarke.errors import EnvironmentProblem
from clarke.place import procs
from clarke.place.plan import NetnsPlan
from clarke.place.procs import Proc
from clarke.testbed.build import NO_DNS_SERVER, netns_etc
from clarke.testbed.state import Store

START_TIMEOUT_S = 15.0
Mark = dict[str, int]  # role -> queries logged
CLIENT_STUB = "127.0.0.1"  # the client's loopback: what it asks never leaves unasked
# One lookup may take a satellite round trip or two; glibc's default (5 s, 2 tries)
# leaves room for both and gives up well within a load's timeout.
RESOLV_OPTIONS = "options timeout:5 attempts:2"


def said_ready(out: Path, offset: int) -> bool:
    """Whether a resolver's output log has its `ready` line after byte `offset`."""
    try:
        with out.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return False
    return any(line.startswith("ready ") for line in text.splitlines())


class NetnsSiteNames:
    def __init__(self, plan: NetnsPlan, store: Store, run_dir: Path) -> None:
        self.plan, self.store, self.run_dir = plan, store, run_dir
        self.started: list[Proc] = []
        self.logs: dict[str, Path] = {}

    @property
    def gateway_address(self) -> str:
        return self.plan.gw_lan.address("gateway")

    @property
    def terminal_address(self) -> str:
        return self.plan.st_lan.address("terminal")

    def start(self, names: dict[str, str], cache: bool = False, ttl: int | None = None) -> str:
        """Answer `names` (host -> address) from the gateway side, with a terminal's
        cache in front if `cache`; the client's stub forwards them to the address this
        returns."""
        self.stop()
        zone = self.run_dir / "site-zone.json"
        zone.write_text(json.dumps({"names": names} | ({"ttl": ttl} if ttl is not None else {})))
        self.logs = {"gateway": self.run_dir / "dns-gateway.jsonl"}
        for log in self.logs.values():
            log.unlink(missing_ok=True)
        self._start(
            "gateway",
            ["authoritative", "--zone", str(zone), "--listen", self.gateway_address],
        )
        nameserver = self.gateway_address
        if cache:
            self.logs["terminal"] = self.run_dir / "dns-terminal.jsonl"
            self.logs["terminal"].unlink(missing_ok=True)
            self._start(
                "terminal",
                [
                    "cache", "--upstream", self.gateway_address,
                    "--source", self.terminal_address, "--listen", self.terminal_address,
                ],
            )  # fmt: skip
            nameserver = self.terminal_address
        self.logs["client"] = self.run_dir / "dns-client.jsonl"
        self.logs["client"].unlink(missing_ok=True)
        self._start(
            "client",
            [
                "stub", "--zone", str(zone), "--upstream", nameserver,
                "--source", self.plan.st_lan.address("client"), "--listen", CLIENT_STUB,
            ],
        )  # fmt: skip
        self._point_client(f"# Clarke testbed: a recorded site's names\nnameserver {CLIENT_STUB}\n")
        return nameserver

    def _start(self, role: str, args: list[str]) -> None:
        log = self.logs[role]
        out = self.run_dir / f"dns-{role}.log"
        # The output log is kept across a testbed's resolvers (appended to): only what
        # this start printed says it is ready, not the line of one stopped before it.
        before = out.stat().st_size if out.is_file() else 0
        argv = [sys.executable, "-m", "clarke.dns", *args, "--log", str(log)]
        proc = procs.start(role, f"dns-{role}", self.plan.ns(role), argv, out)
        self._record(add=[proc])
        self.started.append(proc)

        def ready() -> bool:
            return said_ready(out, before)

        try:
            procs.wait_ready(proc, ready, START_TIMEOUT_S)
        except EnvironmentProblem:
            self.stop()
            raise

    def _point_client(self, text: str) -> None:
        path = netns_etc(self.plan) / "resolv.conf"
        with path.open("r+", encoding="utf-8") as f:  # in place: see the module's note
            f.seek(0)
            f.write(text + (RESOLV_OPTIONS + "\n" if "nameserver" in text else ""))
            f.truncate()

    def queries(self, role: str = "gateway", since: Mark | None = None) -> list[dict[str, Any]]:
        """The queries the resolver in `role`'s namespace (gateway, terminal, client)
        answered since it started, or since `since` (mark(): one load's own)."""
        log = self.logs.get(role)
        if log is None or not log.is_file():
            return []
        lines = [line for line in log.read_text().splitlines() if line.strip()]
        return [json.loads(line) for line in lines[(since or {}).get(role, 0) :]]

    def mark(self) -> Mark:
        """Where each resolver's log stands now: queries(role, since=mark) are the ones
        after it (a load's own, when taken before the load)."""
        return {role: len(self.queries(role)) for role in self.logs}

    def stop(self) -> None:
        if self.started:
            procs.stop(self.started, timeout=5)
            self._record(remove=[p.pid for p in self.started])
            self.started = []
            self._point_client(NO_DNS_SERVER)

    def _record(self, add: list[Proc] | None = None, remove: list[int] | None = None) -> None:
        with self.store.locked():
            state = self.store.read(self.plan.id)
            if state is None:
                return
            gone = set(remove or [])
            state.processes = [p for p in state.processes if p.pid not in gone] + (add or [])
            self.store.save(state)
