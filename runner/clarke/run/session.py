"""A testbed session on the netns substrate: the five roles up (`clarke testbed`), the
web server and a role agent in each namespace, and the runner driving every role only
through its agent (run/driver.py, shared with the compose substrate). `clarke load` and
`clarke run` both use it."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clarke import paths, tls
from clarke.agent import auth
from clarke.errors import EnvironmentProblem, InputError
from clarke.run.driver import HOST, HTTPS_PORT, AgentSession, build_pages
from clarke.testbed import lifecycle, netns, procs, verify
from clarke.testbed.backends import Satlink
from clarke.testbed.plan import AGENT_PORT, LINK_ROLES, ROLES, Plan
from clarke.testbed.plan import plan as testbed_plan
from clarke.testbed.state import Store, TestbedState

log = logging.getLogger(__name__)

ORIGIN_CONTROL_PORT = AGENT_PORT + 1
# origin's control endpoint has no token: it listens on the server namespace's loopback,
# where only the server's agent (in that namespace) reaches it, never on mgmt.
ORIGIN_CONTROL = f"127.0.0.1:{ORIGIN_CONTROL_PORT}"


def origin_binary() -> Path:
    env = os.environ.get("CLARKE_ORIGIN")
    root = paths.source_root()
    for candidate in (
        Path(env) if env else None,
        root / "origin/target/release/origin" if root else None,
        Path(shutil.which("origin") or "/nonexistent"),
    ):
        if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise EnvironmentProblem(
        "the origin binary is missing: build it with `cargo build --release` in origin/, "
        "or set CLARKE_ORIGIN"
    )


def netns_etc(plan: Plan) -> Path:
    """`ip netns exec` bind-mounts the files in /etc/netns/<namespace>/ over /etc."""
    return Path("/etc/netns") / plan.ns("client")


def write_client_names(plan: Plan) -> None:
    """The client's names: the test host resolves to the server; nothing else resolves,
    and there is no DNS server, so anything a browser tries to reach outside the page
    fails inside the client and never crosses the link."""
    etc = netns_etc(plan)
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "hosts").write_text(f"127.0.0.1 localhost\n{plan.addresses['server']} {HOST}\n")
    (etc / "resolv.conf").write_text("# Clarke testbed: no DNS server\n")


class NetnsSession(AgentSession):
    """Bring a testbed up (or attach to a running one) with `start()`, drive it, and
    always `close()` it."""

    substrate = "netns"

    def __init__(
        self, profile: str, page_names: list[str], *, testbed_id: int | None = None, **kw: Any
    ) -> None:
        """`testbed_id`: attach to that running testbed instead of bringing one up; the
        other options are AgentSession's."""
        super().__init__(profile, page_names, **kw)
        self.requested_id = testbed_id
        self.plan: Plan | None = None
        self.owns_testbed = False

    # --- lifecycle -----------------------------------------------------------------
    def start(self) -> NetnsSession:
        """Bring a testbed up, or attach to the running one given by id, starting the
        web server and the agents on it where they are not running yet."""
        origin = origin_binary()
        existing = Store().load(self.requested_id) if self.requested_id is not None else None
        if existing is not None:
            if existing.phase != "up":
                raise InputError(f"testbed {existing.id} is {existing.phase}, not up")
            if existing.backend != "satlink":
                raise InputError(
                    f"testbed {existing.id} uses the {existing.backend} backend; "
                    "sessions drive satlink"
                )
            state, plan = existing, testbed_plan(existing.id)
        else:
            state, plan = lifecycle.up(self.initial_profile, self.requested_id, "satlink")
            self.owns_testbed = True
        self.plan = plan
        self.current_profile = state.profile  # an attached testbed may run another profile
        try:
            self._start_roles(origin, state, plan)
        except BaseException:
            self.close()
            raise
        return self

    def _start_roles(self, origin: Path, state: TestbedState, plan: Plan) -> None:
        run_dir = Path(state.run_dir)
        pages_dir, pki_dir = run_dir / "pages", run_dir / "pki"
        self.pages = build_pages(pages_dir, self.page_names, self.registry, self.units)
        self.ca_cert = pki_dir / "ca.pem"
        token_file = auth.ensure_token_file(run_dir / auth.TOKEN_FILE)
        self.agent_token = auth.read_token(token_file)
        running = {p.name for p in state.processes if procs.alive(p)}
        if "origin" in running and all(f"agent-{r}" in running for r in ROLES):
            self.connect_agents(plan)
            self._check_browser()
            return
        tls.issue_testbed_pki(pki_dir, [HOST], label=f"testbed {plan.id}")
        write_client_names(plan)
        for role in ("client", "server"):
            # No TCP state carried from one load to the next (ssthresh, RTT of the peer).
            netns.sysctls(plan.ns(role), {"net.ipv4.tcp_no_metrics_save": "1"})
        lifecycle.start_process(plan.id, "server", "origin", [
            str(origin), "--root", str(pages_dir),
            "--listen", f"{plan.addresses['server']}:{HTTPS_PORT}",
            "--cert", str(pki_dir / "server.pem"), "--key", str(pki_dir / "server.key"),
            "--control", ORIGIN_CONTROL,
            "--tcp-cc", "cubic", "--quic-cc", "cubic",
            "--log", str(run_dir / "origin-connections.log"),
        ])  # fmt: skip
        for role in ROLES:
            argv = [sys.executable, "-m", "clarke", "agent", "--role", role,
                    "--listen", f"{plan.mgmt.address(role)}:{AGENT_PORT}",
                    "--token-file", str(token_file)]  # fmt: skip
            if role in LINK_ROLES:
                argv += ["--satlink-control", str(Satlink.control(run_dir, role))]
            elif role == "server":
                argv += ["--server-control", f"http://{ORIGIN_CONTROL}"]
            else:
                argv += ["--ca-cert", str(self.ca_cert), "--server-name", HOST,
                         "--server-port", str(HTTPS_PORT)]  # fmt: skip
                argv += ["--firefox", self.firefox] if self.firefox else []
            lifecycle.start_process(plan.id, role, f"agent-{role}", argv)
        self.connect_agents(plan)

    def _check_browser(self) -> None:
        """The browser is the client agent's start-up option: an attached testbed's
        agent must run the one asked for."""
        if not self.firefox:
            return
        running = str(self.agents["client"].health().get("firefox", ""))
        wanted = shutil.which(self.firefox) or self.firefox
        if running and os.path.realpath(running) != os.path.realpath(wanted):
            raise InputError(
                f"testbed {self.requested_id}'s client agent runs {running}, not "
                f"{self.firefox}: the browser is fixed when the testbed's agents start "
                "(bring up a new testbed for another browser)"
            )

    def close(self) -> None:
        """Tear down a testbed this session brought up; leave an attached one running."""
        self.close_agents()
        if self.plan is not None and self.owns_testbed:
            lifecycle.down(self.plan.id)
            shutil.rmtree(netns_etc(self.plan), ignore_errors=True)
        self.plan = None

    def __enter__(self) -> NetnsSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- verify ----------------------------------------------------------------------
    def probe_at_client(self, argv: list[str]) -> list[str]:
        assert self.plan is not None
        return netns.exec_argv(self.plan.ns("client"), argv)

    @contextlib.contextmanager
    def iperf_service(self) -> Iterator[None]:
        assert self.plan is not None
        with verify.iperf_server(self.plan):
            yield
