"""The runner's session on the compose substrate. The runner lives in the client
container: commands "at the client" run right here, the client's agent is a child of the
runner, and every other role is reached through its agent on the mgmt network. The
pages go to a volume the server mounts; the testbed CA comes from a volume the server
writes (the server makes its certificate when it starts)."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clarke import sh
from clarke.agent import auth
from clarke.errors import EnvironmentProblem
from clarke.run.driver import HOST, HTTPS_PORT, AgentSession, build_pages
from clarke.testbed import procs
from clarke.testbed.plan import AGENT_PORT, ComposePlan, compose_plan

log = logging.getLogger(__name__)

PAGES_DIR = Path(os.environ.get("CLARKE_PAGES_DIR", "/srv/pages"))
PKI_DIR = Path(os.environ.get("CLARKE_PKI_DIR", "/pki"))
LOG_DIR = Path(os.environ.get("CLARKE_LOG_DIR", "/var/log/clarke"))


class ComposeSession(AgentSession):
    substrate = "compose"

    def __init__(
        self,
        profile: str,
        page_names: list[str],
        *,
        pages_dir: Path = PAGES_DIR,
        pki_dir: Path = PKI_DIR,
        roles_only: bool = False,
        **kw: Any,
    ) -> None:
        """`pages_dir`: the volume the server serves; `pki_dir`: where the server wrote
        the stack's CA; `roles_only`: only reach the other roles' agents (no pages, no
        browser: `clarke testbed verify`); the other options are AgentSession's."""
        super().__init__(profile, page_names, **kw)
        self.roles_only = roles_only
        self.pages_dir, self.pki_dir = pages_dir, pki_dir
        self.plan: ComposePlan | None = None
        self._client_agent: subprocess.Popen[bytes] | None = None

    def start(self) -> ComposeSession:
        plan = compose_plan()
        self.plan = plan
        try:
            # The stack's agent token: the secrets service wrote it (docs/compose.md).
            self.agent_token = auth.read_token(auth.COMPOSE_TOKEN_FILE)
            if not self.roles_only:
                self.pages = build_pages(self.pages_dir, self.page_names, self.registry, self.units)
                self.ca_cert = self._wait_for_ca()
                self._start_client_agent(plan)
            self.connect_agents(plan, skip=("client",) if self.roles_only else ())
        except BaseException:
            self.close()
            raise
        # The link containers start on CLARKE_PROFILE; the campaign applies each run's
        # profile anyway, so nothing is assumed about what they run now.
        self.current_profile = ""
        return self

    def _wait_for_ca(self, timeout: float = 60) -> Path:
        ca = self.pki_dir / "ca.pem"
        deadline = time.monotonic() + timeout
        while not ca.is_file():
            if time.monotonic() > deadline:
                raise EnvironmentProblem(
                    f"no testbed CA at {ca} after {timeout:.0f} s: the server container "
                    "writes it when it starts (is the pki volume mounted, is the server up?)"
                )
            time.sleep(0.5)
        return ca

    def _start_client_agent(self, plan: ComposePlan) -> None:
        """The client's agent runs in this container, as the runner's child."""
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "clarke", "agent", "--role", "client",
                "--listen", f"{plan.mgmt.address('client')}:{AGENT_PORT}",
                "--token-file", str(auth.COMPOSE_TOKEN_FILE), "--ca-cert", str(self.ca_cert),
                "--server-name", HOST, "--server-port", str(HTTPS_PORT)]  # fmt: skip
        argv += ["--firefox", self.firefox] if self.firefox else []
        with (LOG_DIR / "agent-client.log").open("ab") as out:
            self._client_agent = sh.spawn(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )

    def close(self) -> None:
        self.close_agents()
        child, self._client_agent = self._client_agent, None
        if child is not None:
            procs.stop_pids({child.pid: procs.start_time(child.pid)})
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)

    def __enter__(self) -> ComposeSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- verify: the runner is the client; the server container runs iperf3 -s ----------
    def probe_at_client(self, argv: list[str]) -> list[str]:
        return argv

    @contextlib.contextmanager
    def iperf_service(self) -> Iterator[None]:
        yield
