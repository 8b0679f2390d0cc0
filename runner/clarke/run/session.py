"""A testbed session on the netns substrate: the five roles up (`clarke testbed`), the
web server and a role agent in each namespace, and the runner driving every role only
through its agent. `clarke load` and `clarke run` both use it.

    runner ──mgmt── agents: client (Firefox), terminal/satellite/gateway (satlink),
                            server (origin's control endpoint)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from clarke import paths, tls
from clarke.agent.client import AgentClient
from clarke.browser.load import ExpectedObject, LoadRequest, LoadResult
from clarke.campaign.plan import Run
from clarke.errors import ClarkeError, EnvironmentProblem, InputError
from clarke.link import profiles
from clarke.pages import build as page_build
from clarke.pages.models import Registry, Units
from clarke.results.record import Status
from clarke.testbed import lifecycle, netns, procs
from clarke.testbed.backends import Satlink
from clarke.testbed.plan import AGENT_PORT, LINK_ROLES, ROLES, Plan
from clarke.testbed.plan import plan as testbed_plan
from clarke.testbed.state import Store, TestbedState

log = logging.getLogger(__name__)

HOST = tls.DEFAULT_HOST
HTTPS_PORT = 443
ORIGIN_CONTROL_PORT = AGENT_PORT + 1
QUIC_CC = {"cubic": "cubic", "bbr": "bbr", "reno": "newreno"}
PROTOCOL_OF = {"1.1": "h1", "2": "h2", "3": "h3"}


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


def build_pages(
    out: Path, page_names: list[str], registry: Registry, units: Units
) -> dict[str, Any]:
    """Build the pages a session serves; returns the manifest entries by page name."""
    specs = [registry.page_by_name(n, units) for n in dict.fromkeys(page_names)]
    manifest = json.loads(page_build.build(specs, out, units).read_text())
    return {p["name"]: p for p in manifest["pages"]}


class NetnsSession:
    """Bring a testbed up (or attach to a running one) with `start()`, drive it, and
    always `close()` it."""

    def __init__(
        self,
        profile: str,
        page_names: list[str],
        *,
        engine: str,
        registry: Registry | None = None,
        units: Units = Units.si,
        firefox: str | None = None,
        window: tuple[int, int] = (1366, 768),
        testbed_id: int | None = None,
        timeout_s: float = 180.0,
    ) -> None:
        self.initial_profile = profile
        self.page_names = page_names
        self.registry, self.units = registry or Registry.default(), units
        self.engine, self.firefox, self.window = engine, firefox, window
        self.requested_id, self.timeout_s = testbed_id, timeout_s
        self.pages: dict[str, Any] = {}
        self.plan: Plan | None = None
        self.agents: dict[str, AgentClient] = {}
        self.implementations = {"link": "satlink", "server": "origin", "client": "firefox"}
        self.ca_cert: Path | None = None
        self.current_profile = profile
        self.current_cc: str | None = None
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
        self.agents = {role: AgentClient(role, plan.agent_url(role)) for role in ROLES}
        running = {p.name for p in state.processes if procs.alive(p)}
        if "origin" in running and all(f"agent-{r}" in running for r in ROLES):
            self._wait_for_agents()
            return
        tls.issue_testbed_pki(pki_dir, [HOST], label=f"testbed {plan.id}")
        write_client_names(plan)
        for role in ("client", "server"):
            # No TCP state carried from one load to the next (ssthresh, RTT of the peer).
            netns.sysctls(plan.ns(role), {"net.ipv4.tcp_no_metrics_save": "1"})
        server_mgmt = plan.mgmt.address("server")
        lifecycle.start_process(plan.id, "server", "origin", [
            str(origin), "--root", str(pages_dir),
            "--listen", f"{plan.addresses['server']}:{HTTPS_PORT}",
            "--cert", str(pki_dir / "server.pem"), "--key", str(pki_dir / "server.key"),
            "--control", f"{server_mgmt}:{ORIGIN_CONTROL_PORT}",
            "--tcp-cc", "cubic", "--quic-cc", "cubic",
            "--log", str(run_dir / "origin-connections.log"),
        ])  # fmt: skip
        for role in ROLES:
            argv = [sys.executable, "-m", "clarke", "agent", "--role", role,
                    "--listen", f"{plan.mgmt.address(role)}:{AGENT_PORT}"]  # fmt: skip
            if role in LINK_ROLES:
                argv += ["--satlink-control", str(Satlink.control(run_dir, role))]
            elif role == "server":
                argv += ["--server-control", f"http://{server_mgmt}:{ORIGIN_CONTROL_PORT}"]
            lifecycle.start_process(plan.id, role, f"agent-{role}", argv)
        self._wait_for_agents()

    def _wait_for_agents(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        pending = dict(self.agents)
        last_error = ""
        while pending:
            for role, agent in list(pending.items()):
                try:
                    agent.health()
                    del pending[role]
                except ClarkeError as e:
                    last_error = str(e)
            if pending and time.monotonic() > deadline:
                raise EnvironmentProblem(
                    f"role agents did not answer within {timeout:.0f} s: {', '.join(pending)} "
                    f"({last_error})"
                )
            if pending:
                time.sleep(0.2)

    def close(self) -> None:
        """Tear down a testbed this session brought up; leave an attached one running."""
        for agent in self.agents.values():
            agent.close()
        if self.plan is not None and self.owns_testbed:
            lifecycle.down(self.plan.id)
            shutil.rmtree(netns_etc(self.plan), ignore_errors=True)
        self.plan = None

    def __enter__(self) -> NetnsSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what the campaign loop needs --------------------------------------------------
    def versions(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for role, agent in self.agents.items():
            h = agent.health()
            out[f"clarke_{role}"] = str(h.get("clarke", ""))
            if role == "client":
                out["firefox"] = str(h.get("firefox_version", ""))
            elif role == "server":
                out["origin"] = str((h.get("origin") or {}).get("version", ""))
            else:
                out[f"satlink_{role}"] = str((h.get("satlink") or {}).get("version", ""))
        return out

    def apply_profile(self, name: str) -> None:
        config = profiles.load(name).to_satlink_config()
        for role in LINK_ROLES:
            self.agents[role].configure({"link": config})
        self.current_profile = name

    def apply_cc(self, cc: str) -> None:
        self.agents["server"].configure({"tcp_cc": cc, "quic_cc": QUIC_CC[cc]})
        self.current_cc = cc

    def request(
        self,
        page: str,
        http: str,
        connections: int,
        prefs: dict[str, bool | int | str] | None = None,
    ) -> LoadRequest:
        assert self.plan is not None
        entry = self.pages[page]
        return LoadRequest(
            url=f"https://{HOST}/{entry['path']}",
            http=http,
            host=HOST,
            port=HTTPS_PORT,
            connections=connections,
            ca_cert=str(self.ca_cert),
            firefox=self.firefox,
            window=self.window,
            timeout_s=self.timeout_s,
            expected_objects=[
                ExpectedObject(path=o["path"], bytes=o["bytes"]) for o in entry["objects"]
            ],
            lcp_candidates=entry["lcp_candidates"],
            prefs=prefs or {},
        )

    def load(self, run: Run) -> tuple[LoadResult, dict[str, Any]]:
        return self.load_page(run.page, run.http, run.cc, run.connections)

    def load_page(
        self,
        page: str,
        http: str,
        cc: str,
        connections: int,
        prefs: dict[str, bool | int | str] | None = None,
    ) -> tuple[LoadResult, dict[str, Any]]:
        req = self.request(page, http, connections, prefs)
        self.agents["server"].reset_stats()
        for role in LINK_ROLES:
            self.agents[role].reset_stats()
        raw = self.agents["client"].load(
            req.model_dump(mode="json"), self.engine, timeout=self.timeout_s + 120
        )
        result = LoadResult.model_validate(raw)
        server = self.agents["server"].stats()
        link = {role: self.agents[role].stats() for role in LINK_ROLES}
        entry = self.pages[page]
        details = server_verdict(server, http, cc, entry["total_bytes"], 1 + len(entry["objects"]))
        details["link_stats"] = link
        if result.status is Status.ok and details.get("failure"):
            result = result.model_copy(
                update={"status": Status.failed, "reason": details["failure"]}
            )
        return result, details


def server_verdict(
    stats: dict[str, Any], http: str, cc: str, page_bytes: int, page_requests: int
) -> dict[str, Any]:
    """What the server saw for one load: its connections, whether each used the requested
    congestion control and protocol, and the protocol overhead on the wire."""
    conns = [c for c in stats.get("connections", []) if c.get("requests", 0) > 0]
    want_proto, want_cc = PROTOCOL_OF[http], (QUIC_CC[cc] if http == "3" else cc)
    failure = ""
    if not conns:
        failure = "the server saw no request for the page"
    else:
        wrong_cc = [c for c in conns if c.get("cc") != want_cc]
        wrong_proto = [c for c in conns if c.get("protocol") != want_proto]
        if wrong_proto:
            got = ", ".join(sorted({str(c.get("protocol")) for c in wrong_proto}))
            failure = (
                f"server saw {got} on {len(wrong_proto)} of {len(conns)} connections, "
                f"asked for {want_proto}"
            )
        elif wrong_cc:
            got = ", ".join(sorted({str(c.get("cc")) for c in wrong_cc}))
            failure = (
                f"server used {got} on {len(wrong_cc)} of {len(conns)} connections, "
                f"asked for {want_cc}"
            )
    requests = sum(int(c.get("requests", 0)) for c in conns)
    if not failure and requests != page_requests:
        # Anything beyond the page (a browser's background request) crossed the link.
        failure = f"server answered {requests} requests, the page has {page_requests}"
    wire = sum(int(c.get("wire_bytes_sent", 0)) for c in conns)
    ip = sum(int(c.get("ip_bytes_estimate", 0)) for c in conns)
    app = sum(int(c.get("app_bytes_sent", 0)) for c in conns)
    metrics: dict[str, float | None] = {
        "connections_used": float(len(conns)),
        "server_requests": float(requests),
        "app_bytes": float(app),
        "wire_bytes": float(wire),
        "ip_bytes": float(ip),
        "overhead": (wire - page_bytes) / page_bytes if conns and page_bytes else None,
        "retrans_bytes": float(sum(int(c.get("retrans_bytes", 0)) for c in conns)),
        "lost_packets": float(sum(int(c.get("lost_packets", 0)) for c in conns)),
    }
    return {
        "failure": failure,
        "metrics": metrics,
        "server_connections": conns,
        "server_cc": sorted({str(c.get("cc")) for c in conns}),
    }
