"""The compose substrate as a session sees it. The runner lives in the client container:
commands "at the client" run right here, the client's agent is a child of the runner
(`clarke serve client`), and every other role is reached through its agent on the mgmt
network. The pages go to a volume the server mounts; the testbed CA comes from a volume
the server writes (the server makes its certificate when it starts)."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

from clarke import sh
from clarke.agent import auth
from clarke.agent.agents import Applied
from clarke.errors import EnvironmentProblem, InputError
from clarke.place import procs
from clarke.place.plan import ComposePlan, compose_plan
from clarke.vocab import Browser

log = logging.getLogger(__name__)

PAGES_DIR = Path(os.environ.get("CLARKE_PAGES_DIR", "/srv/pages"))
PKI_DIR = Path(os.environ.get("CLARKE_PKI_DIR", "/pki"))
LOG_DIR = Path(os.environ.get("CLARKE_LOG_DIR", "/var/log/clarke"))


class ComposeSubstrate:
    name = "compose"

    def __init__(
        self,
        pages_dir: Path = PAGES_DIR,
        pki_dir: Path = PKI_DIR,
        roles_only: bool = False,
        firefox: str | None = None,
    ) -> None:
        """`roles_only`: only reach the other roles' agents (no pages, no browser:
        `clarke testbed check --substrate compose`); `firefox`: the client agent's
        browser binary."""
        self.pages_dir, self.pki_dir, self.roles_only = pages_dir, pki_dir, roles_only
        self.firefox = firefox
        self.plan: ComposePlan | None = None
        self.applied: list[Applied] = []  # the stack was brought up by Docker
        self._client_agent: subprocess.Popen[bytes] | None = None

    def start(self, profile: str) -> ComposePlan:
        self.plan = compose_plan()
        if not self.roles_only:
            self._wait_for_ca()
            self._start_client_agent()
        return self.plan

    @property
    def ca_cert(self) -> Path:
        return self.pki_dir / "ca.pem"

    @property
    def agent_token(self) -> str:
        """The stack's agent token: the secrets service wrote it (docs/compose.md)."""
        return auth.read_token(auth.COMPOSE_TOKEN_FILE)

    def _wait_for_ca(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not self.ca_cert.is_file():
            if time.monotonic() > deadline:
                raise EnvironmentProblem(
                    f"no testbed CA at {self.ca_cert} after {timeout:.0f} s: the server "
                    "container writes it when it starts (is the pki volume mounted, is the "
                    "server up?)"
                )
            time.sleep(0.5)

    def _start_client_agent(self) -> None:
        """The client's agent runs in this container, as the runner's child."""
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "clarke", "serve", "client",
                "--implementation", Browser.firefox,
                "--pages-dir", str(self.pages_dir), "--pki-dir", str(self.pki_dir),
                "--token-file", str(auth.COMPOSE_TOKEN_FILE)]  # fmt: skip
        argv += ["--firefox", self.firefox] if self.firefox else []
        with (LOG_DIR / "agent-client.log").open("ab") as out:
            self._client_agent = sh.spawn(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )

    def at_client(self, argv: list[str]) -> list[str]:
        return argv

    def cross_endpoints(self) -> NoReturn:
        raise InputError(
            "cross traffic needs endpoints behind the terminal and the gateway (xclient, "
            "xserver), which only the netns substrate builds; the compose stack has no "
            "such containers yet: run campaigns with cross_traffic on netns"
        )

    def note_profile(self, name: str, sha256: str) -> None:
        """No state file: the link containers are the only record."""

    def close(self) -> None:
        child, self._client_agent = self._client_agent, None
        if child is not None:
            procs.stop_pids({child.pid: procs.start_time(child.pid)})
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)
