"""`clarke serve ROLE`: the main process of a role's container in the compose stack.

For terminal, satellite, gateway and server it sets up the container's own network
(addresses come from ComposePlan, as in the netns testbed), starts the role's
implementation, serves the role agent on the mgmt network, and supervises: when the
implementation dies the container exits non-zero; SIGTERM (docker compose stop/down)
stops everything by PID. For the client it sets up the network and then runs the
given command (the campaign) in its place, so the container's exit code is the
campaign's.

    role       implementations          what runs besides the agent
    terminal   satlink | opensand       satlink st (TUN sat0) | OpenSAND ST (TAP, bridge)
    satellite  satlink | opensand       satlink sat | OpenSAND SAT
    gateway    satlink | opensand       satlink gw (TUN sat0) | OpenSAND GW (TAP, bridge)
    server     origin | openlitespeed   the web server, and iperf3 -s for link checks
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import httpx
from cryptography import x509

from clarke import sh, tls
from clarke.agent import auth, roles
from clarke.agent.server import serve as serve_agent
from clarke.compose import containers
from clarke.compose.session import PAGES_DIR, PKI_DIR
from clarke.errors import ClarkeError, EnvironmentProblem, UnknownName
from clarke.link import profiles
from clarke.link.profiles import LinkProfile
from clarke.run.driver import HOST, HTTPS_PORT
from clarke.testbed import procs
from clarke.testbed.backends import Satlink, answers
from clarke.testbed.plan import AGENT_PORT, ComposePlan, compose_plan
from clarke.testbed.verify import IPERF_PORT

log = logging.getLogger(__name__)

IMPLEMENTATIONS: dict[str, tuple[str, ...]] = {
    "terminal": ("satlink", "opensand"),
    "satellite": ("satlink", "opensand"),
    "gateway": ("satlink", "opensand"),
    "server": ("origin", "openlitespeed"),
}
RUN_DIR = Path(os.environ.get("CLARKE_RUN_DIR", "/run/clarke"))
ORIGIN_CONTROL = "127.0.0.1:7001"  # origin's control endpoint: inside the container only
CERT_MARGIN = dt.timedelta(days=1)  # a certificate closer to its end than this is renewed


@dataclass
class Children:
    """Processes this container runs besides the agent. Their output goes to the
    container's own output (`docker compose logs`); they are stopped by PID."""

    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def spawn(self, name: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        log.warning("starting %s: %s", name, sh.render(argv))
        popen = sh.spawn(argv, stdin=subprocess.DEVNULL)
        self.procs[name] = popen
        return popen

    def exited(self) -> str | None:
        for name, popen in self.procs.items():
            if popen.poll() is not None:
                return f"{name} exited with {popen.returncode}"
        return None

    def stop(self) -> None:
        live = {p.pid: procs.start_time(p.pid) for p in self.procs.values() if p.poll() is None}
        procs.stop_pids(live)
        for popen in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=5)


@dataclass
class Served:
    """A running implementation of a role: what the agent serves, how to tell it still
    runs, and how to stop what `children` does not cover."""

    role: roles.Role
    alive: Callable[[], bool] = lambda: True
    stop: Callable[[], None] = lambda: None


def wait_until(ready: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise EnvironmentProblem(f"{what} not ready after {timeout:.0f} s")
        time.sleep(0.1)


def ensure_pki(pki_dir: Path) -> tls.TestbedPki:
    """The stack's CA and server certificate, made by the server on its first start and
    kept in the pki volume (the client trusts the CA from there); renewed when missing
    or about to expire."""
    pki = tls.TestbedPki(pki_dir / "ca.pem", pki_dir / "server.pem", pki_dir / "server.key")
    with contextlib.suppress(OSError, ValueError):
        cert = x509.load_pem_x509_certificate(pki.cert.read_bytes())
        left = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
        if pki.ca_cert.is_file() and pki.key.is_file() and left > CERT_MARGIN:
            return pki
    log.warning("issuing the testbed CA and server certificate in %s", pki_dir)
    return tls.issue_testbed_pki(pki_dir, [HOST], label="compose")


def initial_profile() -> tuple[str, LinkProfile]:
    """The link containers start on CLARKE_PROFILE (default geo); the runner applies
    each run's profile through the agents anyway."""
    name = os.environ.get("CLARKE_PROFILE") or "geo"
    return name, profiles.load(name)


# --- link roles --------------------------------------------------------------------------


def start_satlink(role: str, plan: ComposePlan, children: Children) -> Served:
    backend = Satlink()
    backend.check()
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    _, profile = initial_profile()
    (RUN_DIR / "link.json").write_text(json.dumps(profile.to_satlink_config(), indent=2))
    popen = children.spawn(f"satlink-{role}", backend.argv(plan, RUN_DIR, role))
    sock = Satlink.control(RUN_DIR, role)
    wait_until(lambda: popen.poll() is not None or answers(role, sock), f"satlink {role}")
    if popen.poll() is not None:
        raise EnvironmentProblem(f"satlink {role} exited during start-up ({popen.returncode})")
    if role != "satellite":
        from clarke.testbed import netns

        netns.batch(None, Satlink.link_end_commands(plan, role))
    return Served(roles.SatlinkRole(role, str(sock)))


def start_opensand(role: str, plan: ComposePlan, children: Children) -> Served:
    from clarke.link.opensand_role import OpenSandRole

    name, profile = initial_profile()
    impl = OpenSandRole.for_compose(role, plan, name, profile)
    impl.start()
    return Served(impl, alive=impl.alive, stop=impl.stop)


# --- server --------------------------------------------------------------------------


def _server_common(plan: ComposePlan, children: Children) -> tls.TestbedPki:
    pki = ensure_pki(PKI_DIR)
    containers.route(str(plan.st_lan.prefix), via=plan.next_hop("server"))
    # verify's bulk transfers (clarke testbed verify, and before/after each campaign).
    children.spawn(
        "iperf3", ["iperf3", "-s", "-B", plan.addresses["server"], "-p", str(IPERF_PORT)]
    )
    return pki


def start_origin(plan: ComposePlan, children: Children) -> Served:
    from clarke.run.session import origin_binary

    pki = _server_common(plan, children)
    PAGES_DIR.mkdir(parents=True, exist_ok=True)
    popen = children.spawn("origin", [
        str(origin_binary()), "--root", str(PAGES_DIR),
        "--listen", f"{plan.addresses['server']}:{HTTPS_PORT}",
        "--cert", str(pki.cert), "--key", str(pki.key),
        "--control", ORIGIN_CONTROL,
        "--tcp-cc", "cubic", "--quic-cc", "cubic",
    ])  # fmt: skip
    role = roles.HttpControlledRole("server", "origin", f"http://{ORIGIN_CONTROL}")

    def answering() -> bool:
        try:
            httpx.get(f"http://{ORIGIN_CONTROL}/health", timeout=1, trust_env=False)
        except httpx.TransportError:
            return popen.poll() is not None
        return True

    wait_until(answering, "origin")
    if popen.poll() is not None:
        raise EnvironmentProblem(f"origin exited during start-up ({popen.returncode})")
    return Served(role)


def start_openlitespeed(plan: ComposePlan, children: Children) -> Served:
    from clarke.server.openlitespeed import OpenLiteSpeedRole

    pki = _server_common(plan, children)
    impl = OpenLiteSpeedRole.for_compose(plan, pki, PAGES_DIR)
    impl.start()
    return Served(impl, alive=impl.alive, stop=impl.stop)


STARTERS: dict[str, Callable[[str, ComposePlan, Children], Served]] = {
    "satlink": start_satlink,
    "opensand": start_opensand,
    "origin": lambda _role, plan, children: start_origin(plan, children),
    "openlitespeed": lambda _role, plan, children: start_openlitespeed(plan, children),
}


# --- the process -----------------------------------------------------------------------


def check_choice(role: str, implementation: str) -> None:
    if role not in IMPLEMENTATIONS:
        raise UnknownName("role", role, [*IMPLEMENTATIONS, "client"])
    if implementation not in IMPLEMENTATIONS[role]:
        raise UnknownName(f"implementation of the {role} role", implementation,
                          list(IMPLEMENTATIONS[role]))  # fmt: skip


def serve_role(role: str, implementation: str) -> int:
    """Run a role's container until SIGTERM (0) or until its implementation dies (1)."""
    check_choice(role, implementation)
    token = auth.read_token(auth.COMPOSE_TOKEN_FILE)  # the secrets service wrote it
    plan = compose_plan()
    mgmt = plan.mgmt.address(role)
    containers.interface_of(mgmt)  # attached as the plan says, or a clear error
    if containers.drop_default_route():
        log.warning("%s: dropped Docker's default route (the testbed has no way out)", role)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    children = Children()
    served: Served | None = None
    try:
        served = STARTERS[implementation](role, plan, children)
        agent = threading.Thread(
            target=serve_agent, args=(served.role, mgmt, AGENT_PORT, token), daemon=True
        )
        agent.start()
        log.warning("%s (%s) ready; agent on %s:%d", role, implementation, mgmt, AGENT_PORT)
        while not stopping.wait(0.5):
            gone = children.exited() or (None if served.alive() else f"{implementation} died")
            if gone:
                log.error("%s: %s; stopping the container", role, gone)
                return 1
        return 0
    finally:
        if served is not None:
            with contextlib.suppress(ClarkeError):
                served.stop()
        children.stop()


def exec_client(argv: list[str]) -> NoReturn:
    """The client container: its route into the link, no other way out, then the
    command (the campaign) in this process's place."""
    plan = compose_plan()
    containers.interface_of(plan.st_lan.address("client"))
    containers.drop_default_route()
    containers.route(str(plan.gw_lan.prefix), via=plan.next_hop("client"))
    if not argv:
        raise EnvironmentProblem("clarke serve client needs a command to run after --")
    sys.stdout.flush()
    os.execvp(argv[0], argv)


def health(role: str) -> dict[str, Any]:
    """The role agent's /health, for the container's HEALTHCHECK."""
    url = compose_plan().agent_url(role)
    try:
        resp = httpx.get(f"{url}/health", timeout=5, trust_env=False)
    except httpx.TransportError as e:
        raise EnvironmentProblem(f"{role} agent at {url}: {e}") from None
    if resp.status_code != 200:
        raise EnvironmentProblem(f"{role} agent at {url}: {resp.status_code} {resp.text}")
    return resp.json()
