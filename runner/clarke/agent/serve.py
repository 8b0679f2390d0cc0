"""`clarke serve ROLE`: a role's process, the same on both substrates. It takes its place
(a netns testbed's namespace, where `clarke testbed up` started it, or its container in
the compose stack), starts the implementation that fills the role (clarke.registry),
serves the role's agent on the mgmt network and supervises: when the implementation
dies the process exits 1 (the testbed's status, or Docker, shows it); SIGTERM stops
everything by PID and exits 0.

    role       implementations          what runs besides the agent
    terminal   satlink | opensand | netem   satlink st | OpenSAND ST | a netem qdisc
    satellite  satlink | opensand | netem   satlink sat | OpenSAND SAT | (the bridge)
    gateway    satlink | opensand | netem   satlink gw | OpenSAND GW | a netem qdisc
    server     origin | openlitespeed   the web server, and iperf3 -s for link checks
    client     firefox                  a browser per page load
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

from clarke import profiles, registry
from clarke.agent import auth
from clarke.agent.names_slot import NAMES_ROLES, NamesSlot
from clarke.agent.pep_slot import HOP_KEY_LABEL, PepSlot
from clarke.agent.server import Slots, check_listen_address
from clarke.agent.server import serve as serve_agent
from clarke.browser.client import Firefox
from clarke.errors import ClarkeError
from clarke.place import Place, container
from clarke.place.capture import PacketCapture
from clarke.place.plan import AGENT_PORT, compose_plan
from clarke.place.plan import plan as netns_plan
from clarke.roles import RoleProcess, link_config
from clarke.vocab import LINK_ROLES, PEP_ROLES, Substrate

log = logging.getLogger(__name__)
CAPTURE_ROLE, CAPTURE_NETWORK = "terminal", "st-lan"


@dataclass(frozen=True)
class Dirs:
    """A place's directories; on compose each defaults to its environment variable."""

    run_dir: Path | None = None
    pages_dir: Path | None = None
    pki_dir: Path | None = None


def place_for(role: str, testbed_id: int | None, dirs: Dirs) -> Place:
    """The netns place of testbed `testbed_id` (this process runs in its namespace), or
    the compose stack's container (set up here: routes, no default route)."""
    env = os.environ
    if testbed_id is not None:
        missing = [k for k, v in vars(dirs).items() if v is None]
        if missing:
            raise ClarkeError(f"clarke serve --testbed needs {', '.join(missing)}")
        assert dirs.run_dir and dirs.pages_dir and dirs.pki_dir
        return Place(
            Substrate.netns.value,
            role,
            netns_plan(testbed_id),
            dirs.run_dir,
            dirs.pages_dir,
            dirs.pki_dir,
        )
    plan = compose_plan()
    container.prepare(role, plan)
    return Place(
        Substrate.compose.value,
        role,
        plan,
        dirs.run_dir or Path(env.get("CLARKE_RUN_DIR", "/run/clarke")),
        dirs.pages_dir or Path(env.get("CLARKE_PAGES_DIR", "/srv/pages")),
        dirs.pki_dir or Path(env.get("CLARKE_PKI_DIR", "/pki")),
    )


def serve_role(
    place: Place,
    implementation: str | None,
    token_file: Path,
    profile: str | None = None,
    firefox: str | None = None,
) -> int:
    """Run the role until SIGTERM (0) or until its implementation dies (1). `token_file`:
    the agent token every request but GET /health must carry (agent/auth.py); `profile`:
    a link role takes this profile at start (compose: CLARKE_PROFILE); `firefox`: the
    client's browser binary (requests never name one)."""
    token = auth.read_token(token_file)  # before anything starts: no token, no agent
    mgmt = place.plan.mgmt.address(place.role)
    check_listen_address(mgmt)
    impl = registry.for_role(place.role, implementation)
    if place.role == "client" and firefox:
        impl = Firefox(firefox)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    process: RoleProcess | None = None
    # The terminal captures on request: its interface to the client's LAN carries every
    # packet that crosses the satellite hop, whatever emulates the link.
    capture = PacketCapture(place, CAPTURE_NETWORK) if place.role == CAPTURE_ROLE else None
    # The stations host a PEP beside the link (none until a load asks for one).
    hop_key = auth.derive_key(token, HOP_KEY_LABEL)
    pep = PepSlot(place, hop_key) if place.role in PEP_ROLES else None
    # A recorded site's resolvers: the gateway's, a terminal's cache, the client's stub.
    names = NamesSlot(place) if place.role in NAMES_ROLES else None
    try:
        if names is not None:
            names.recover()  # a client's resolv.conf left naming a dead agent's stub
        process = impl.start(place)
        if profile and place.role in LINK_ROLES:
            process.configure(link_config(profile, profiles.read(profile)))
        threading.Thread(
            target=serve_agent,
            args=(process, mgmt, AGENT_PORT, token),
            kwargs={"slots": Slots(capture, pep, names)},
            daemon=True,
        ).start()
        log.warning("%s (%s) ready; agent on %s:%d", place.role, impl.name, mgmt, AGENT_PORT)
        while not stopping.wait(0.5):
            # A PEP that stops says so in its state (loads asking for it fail); the
            # link goes on.
            gone = process.problem()
            if gone:
                log.error("%s: %s; stopping", place.role, gone)
                return 1
        return 0
    finally:
        if names is not None:
            with contextlib.suppress(ClarkeError, OSError):
                names.stop()
        if pep is not None:
            pep.stop()
        if capture is not None:
            with contextlib.suppress(ClarkeError):
                capture.close()
        if process is not None:
            with contextlib.suppress(ClarkeError):
                process.stop()
