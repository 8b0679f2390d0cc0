"""A recorded site's resolver in a role's place, the same on both substrates: the
client's, terminal's and gateway's agents run it on request (POST /names/start,
/names/stop; GET /names/queries), each the one its place calls for:

    gateway   authoritative   the site's names, on its address on the server's LAN, so
                              the client's lookups cross the link to reach it
    terminal  cache           a terminal's DNS cache on its address on the client's LAN,
                              forwarding to the gateway's resolver
    client    stub            on the client's loopback, which the client's resolv.conf
                              names while it runs: the site's names go (uncached) to the
                              gateway's resolver or the terminal's cache; every other name
                              is NXDOMAIN here, so that what a browser looks up besides
                              the page (its host's name, its own services) stays in the
                              client as it does without a site

A request gives only the names (host -> address, inside the server's LAN) and, at the
client, whether the terminal's cache is in the way: the agent picks the program, the
addresses and the files. Each resolver logs its queries as JSON lines in the role's run
directory; `queries(since)` reads them back. A resolver is a child of the agent: it
stops with the agent, also when `clarke testbed down` or `docker compose down` stops it,
and dies with it when the agent is killed (SIGKILL): it gets SIGTERM from the kernel
then (a parent-death signal: place/procs.py).

The client's resolv.conf is rewritten in place and what it said is kept in the run
directory until the stub stops: on a netns testbed that is /etc/netns/<client>/resolv.conf
(`ip netns exec` bind-mounts it over /etc/resolv.conf, and a bind mount follows the file,
not its name; a browser started later reads it), in the client container its own
/etc/resolv.conf. An agent killed while its stub ran leaves it naming a stub that is
gone: the next agent's start puts it back from the kept copy (`recover`), as the next
stub's start would."""

from __future__ import annotations

import ipaddress
import json
import logging
import sys
import threading
from pathlib import Path

from clarke.contract import NamesStart
from clarke.errors import ClarkeError, EnvironmentProblem, InputError
from clarke.json_value import JsonObject
from clarke.place import Place, procs
from clarke.place.plan import NetnsPlan
from clarke.sites.zone import Zone

log = logging.getLogger(__name__)
NAMES_ROLES = ("client", "terminal", "gateway")
RESOLVERS = {"gateway": "authoritative", "terminal": "cache", "client": "stub"}
START_TIMEOUT_S = 15.0
CLIENT_STUB = "127.0.0.1"  # the client's loopback: what it asks never leaves unasked
# One lookup may take a satellite round trip or two; glibc's default (5 s, 2 tries)
# leaves room for both and gives up well within a load's timeout.
RESOLV_OPTIONS = "options timeout:5 attempts:2"
RESOLV_MARK = "# Clarke testbed: a recorded site's names"


def said_ready(out: Path, offset: int) -> bool:
    """Whether a resolver's output log has its `ready` line after byte `offset`."""
    try:
        with out.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return False
    return any(line.startswith("ready ") for line in text.splitlines())


def resolv_conf(place: Place) -> Path:
    """The client's resolv.conf: the namespace's own file on netns (never the host's),
    the container's on compose."""
    if isinstance(place.plan, NetnsPlan):
        return Path("/etc/netns") / place.plan.ns(place.role) / "resolv.conf"
    return Path("/etc/resolv.conf")


class NamesSlot:
    def __init__(self, place: Place) -> None:
        if place.role not in NAMES_ROLES:
            raise ClarkeError(
                f"a site's resolvers run at {', '.join(NAMES_ROLES)}, not the {place.role}"
            )
        self.place = place
        self.resolver = RESOLVERS[place.role]
        self.children = procs.Children()
        self.log = place.run_dir / f"dns-{place.role}.jsonl"
        self.out = place.run_dir / f"dns-{place.role}.log"
        self.zone_file = place.run_dir / f"site-zone-{place.role}.json"
        self.saved_resolv = place.run_dir / f"resolv.conf.before-{RESOLVERS['client']}"
        self._lock = threading.Lock()

    def _addresses(self) -> dict[str, str]:
        plan = self.place.plan
        return {
            "gateway": plan.gw_lan.address("gateway"),
            "terminal": plan.st_lan.address("terminal"),
            "client": plan.st_lan.address("client"),
        }

    def _check_zone(self, zone: Zone | None) -> Zone:
        if zone is None:
            raise InputError(
                f"POST /names/start: zone: the {self.place.role} needs the site's names"
            )
        lan = self.place.plan.gw_lan.prefix
        outside = [f"{h} {a}" for h, a in zone.names.items() if ipaddress.ip_address(a) not in lan]
        if outside:
            raise InputError(
                f"POST /names/start: zone: names outside the server's LAN {lan}: "
                + ", ".join(outside[:5])
            )
        return zone

    def start(self, request: NamesStart) -> JsonObject:
        """The role's resolver for `request`'s names, replacing one that runs."""
        with self._lock:
            self._stop()
            self.place.run_dir.mkdir(parents=True, exist_ok=True)
            at = self._addresses()
            role = self.place.role
            if role == "terminal":
                args = ["cache", "--upstream", at["gateway"], "--source", at["terminal"]]
                listen = at["terminal"]
            else:
                zone = self._check_zone(request.zone)
                self.zone_file.write_text(json.dumps(zone.model_dump()))
                if role == "gateway":
                    args, listen = ["authoritative", "--zone", str(self.zone_file)], at["gateway"]
                else:
                    upstream = at["terminal"] if request.cache else at["gateway"]
                    args = ["stub", "--zone", str(self.zone_file), "--upstream", upstream,
                            "--source", at["client"]]  # fmt: skip
                    listen = CLIENT_STUB
            self._run([*args, "--listen", listen])
            if role == "client":
                self._point_resolv_conf()
            return {"resolver": self.resolver, "listen": listen}

    def _run(self, args: list[str]) -> None:
        self.log.unlink(missing_ok=True)
        # The output log is appended to across starts: only what this start printed says
        # it is ready, not the line of one stopped before it.
        before = self.out.stat().st_size if self.out.is_file() else 0
        argv = [sys.executable, "-m", "clarke.dns", *args, "--log", str(self.log)]
        self.children.spawn(
            self.resolver, self.place.argv(argv), log=self.out, die_with_parent=True
        )
        try:
            self.children.started(
                self.resolver,
                lambda: said_ready(self.out, before),
                f"the {self.place.role}'s resolver",
                START_TIMEOUT_S,
                lambda: self.out.read_text(errors="replace")[before:].strip()[-2000:],
            )
        except EnvironmentProblem:
            self._stop()  # and the client's resolv.conf as it was
            raise

    def _point_resolv_conf(self) -> None:
        path = resolv_conf(self.place)
        if not path.is_file():
            raise EnvironmentProblem(
                f"{path} is missing: the client's names cannot be pointed at its stub"
            )
        if not self.saved_resolv.is_file():  # a stub left running by a dead agent kept it
            self.saved_resolv.write_text(path.read_text())
        self._rewrite(path, f"{RESOLV_MARK}\nnameserver {CLIENT_STUB}\n{RESOLV_OPTIONS}\n")

    @staticmethod
    def _rewrite(path: Path, text: str) -> None:
        with path.open("r+", encoding="utf-8") as f:  # in place: see the module's note
            f.seek(0)
            f.write(text)
            f.truncate()

    def queries(self, since: int = 0) -> JsonObject:
        if not self.log.is_file():
            return {"queries": [], "total": 0}
        lines = [line for line in self.log.read_text().splitlines() if line.strip()]
        return {"queries": [json.loads(line) for line in lines[since:]], "total": len(lines)}

    def stop(self) -> JsonObject:
        with self._lock:
            return {"stopped": self._stop()}

    def recover(self) -> None:
        """At the agent's start, before any request: a resolv.conf that a stub's start
        pointed at the stub and no stop restored (the agent was killed, and the stub
        died with it) is put back as it was, from the copy in the run directory. Logged;
        a failure too, which leaves the agent running (the next stub's start or stop
        tries again)."""
        if self.place.role != "client" or not self.saved_resolv.is_file():
            return
        path = resolv_conf(self.place)
        try:
            with self._lock:
                self._stop()
        except OSError as e:
            log.error("%s: could not put it back as it was before a stub: %s", path, e)
            return
        log.warning("%s: put back as it was before the stub of an agent that died", path)

    def _stop(self) -> bool:
        running = bool(self.children.procs)
        self.children.stop()
        if self.place.role == "client" and self.saved_resolv.is_file():
            self._rewrite(resolv_conf(self.place), self.saved_resolv.read_text())
            self.saved_resolv.unlink()
        return running
