"""Driving a testbed's roles through their agents: the part of a session that is the same
on both substrates. NetnsSession (run/session.py) and ComposeSession (compose/session.py)
only differ in how the roles come up, where the pages and the testbed CA live, and where
verify's client-side commands run.

    runner ──mgmt── agents: client (Firefox), terminal/satellite/gateway (satlink or
                            OpenSAND), server (origin or OpenLiteSpeed)
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from clarke import tls
from clarke.agent.client import AgentClient
from clarke.browser.load import ExpectedObject, LoadRequest, LoadResult
from clarke.campaign.plan import Run
from clarke.errors import ClarkeError, EnvironmentProblem
from clarke.link import profiles
from clarke.pages import build as page_build
from clarke.pages.models import Registry, Units
from clarke.results.record import Status
from clarke.testbed import verify
from clarke.testbed.plan import LINK_ROLES, ROLES, Addresses

log = logging.getLogger(__name__)

HOST = tls.DEFAULT_HOST
HTTPS_PORT = 443
QUIC_CC = {"cubic": "cubic", "bbr": "bbr", "reno": "newreno"}
PROTOCOL_OF = {"1.1": "h1", "2": "h2", "3": "h3"}
# OpenSAND's start order: the satellite first, then the gateway, then the terminal,
# which logs on to the gateway through the satellite.
LINK_CONFIG_ORDER = ("satellite", "gateway", "terminal")
LINK_CHECKS = {
    # samples: pings; duration/omit: seconds of iperf3 per direction and of slow start left out
    "full": {"samples": 20, "duration": 10, "omit": 4},
    "quick": {"samples": 10, "duration": 5, "omit": 2},
}


def build_pages(
    out: Path, page_names: list[str], registry: Registry, units: Units
) -> dict[str, Any]:
    """Build the pages a session serves; returns the manifest entries by page name."""
    specs = [registry.page_by_name(n, units) for n in dict.fromkeys(page_names)]
    manifest = json.loads(page_build.build(specs, out, units).read_text())
    return {p["name"]: p for p in manifest["pages"]}


class AgentSession:
    """What a campaign needs from a testbed, through the role agents only. Subclasses
    bring the roles up in `start()`, fill `plan`, `pages`, `ca_cert` and `agents`, and say
    where verify runs (`probe_at_client`, `iperf_service`)."""

    substrate = ""

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
        timeout_s: float = 180.0,
    ) -> None:
        self.initial_profile = profile
        self.page_names = page_names
        self.registry, self.units = registry or Registry.default(), units
        self.engine, self.firefox, self.window = engine, firefox, window
        self.timeout_s = timeout_s
        self.pages: dict[str, Any] = {}
        self.plan: Addresses | None = None
        self.agents: dict[str, AgentClient] = {}
        self.implementations: dict[str, str] = {}
        self.ca_cert: Path | None = None
        self.agent_token = ""  # the testbed's agent token (clarke.agent.auth), set by start()
        self.current_profile = profile
        self.current_cc: str | None = None
        self.server_quic_cc: set[str] | None = None  # None: the server did not say
        self._counting_role: dict[str, str] = {}  # direction -> the link role counting it

    def start(self) -> AgentSession:
        """Bring the roles up (or attach to them) and connect to their agents."""
        raise NotImplementedError

    def close(self) -> None:
        """Undo what `start` did; safe to call twice and after a failed start."""
        raise NotImplementedError

    # --- the agents ------------------------------------------------------------------
    def connect_agents(
        self, plan: Addresses, timeout: float = 60, skip: tuple[str, ...] = ()
    ) -> None:
        """Wait until every role's agent answers (but those skipped), then learn which
        implementation fills each role (recorded with every result)."""
        self.agents = {
            role: AgentClient(role, plan.agent_url(role), self.agent_token)
            for role in ROLES
            if role not in skip
        }
        deadline = time.monotonic() + timeout
        pending = dict(self.agents)
        health: dict[str, dict[str, Any]] = {}
        last_error = ""
        while pending:
            for role, agent in list(pending.items()):
                try:
                    health[role] = agent.health()
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
        server = health["server"]
        offered = (server.get(str(server.get("implementation"))) or {}).get("quic_available")
        self.server_quic_cc = set(offered) if isinstance(offered, list) else None
        links = sorted({str(health[r].get("implementation")) for r in LINK_ROLES})
        self.implementations = {
            "link": "+".join(links),
            "server": str(health["server"].get("implementation")),
            "client": str(health.get("client", {}).get("implementation")),
        }

    def close_agents(self) -> None:
        for agent in self.agents.values():
            agent.close()
        self.agents = {}

    def versions(self) -> dict[str, str]:
        """clarke_<role> for every role; the browser's version; <implementation>_<role>
        for the link roles and <implementation> for the server, from their agents."""
        out: dict[str, str] = {}
        for role, agent in self.agents.items():
            h = agent.health()
            out[f"clarke_{role}"] = str(h.get("clarke", ""))
            impl = str(h.get("implementation", ""))
            if role == "client":
                out["firefox"] = str(h.get("firefox_version", ""))
                continue
            version = str((h.get(impl) or {}).get("version", ""))
            out[impl if role == "server" else f"{impl}_{role}"] = version
        return out

    # --- configuration -----------------------------------------------------------------
    def apply_profile(self, name: str) -> None:
        """The link roles' contract: {"name", "profile"} with the whole profile, whatever
        emulates the link (satlink takes it at run time, OpenSAND restarts)."""
        body = {
            "name": name,
            "profile": profiles.load(name).model_dump(by_alias=True, mode="json"),
        }
        for role in LINK_CONFIG_ORDER:
            self.agents[role].configure(body)
        self.current_profile = name

    def apply_cc(self, cc: str) -> None:
        """TCP's and QUIC's algorithm of the same family (QUIC has NewReno for reno).
        A server whose QUIC stack lacks it keeps its QUIC setting: its h3 loads with
        this cc then fail as such (`load_page`), its h1 and h2 loads run."""
        body = {"tcp_cc": cc}
        if self.quic_offers(cc):
            body["quic_cc"] = QUIC_CC[cc]
        self.agents["server"].configure(body)
        self.current_cc = cc

    def quic_offers(self, cc: str) -> bool:
        return self.server_quic_cc is None or QUIC_CC[cc] in self.server_quic_cc

    # --- one load --------------------------------------------------------------------
    def request(
        self,
        page: str,
        http: str,
        connections: int,
        prefs: dict[str, bool | int | str] | None = None,
    ) -> LoadRequest:
        entry = self.pages[page]
        return LoadRequest(
            url=f"https://{HOST}/{entry['path']}",
            http=http,
            connections=connections,
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
        if http == "3" and not self.quic_offers(cc):
            offered = ", ".join(sorted(self.server_quic_cc or ()))
            reason = (
                f"the server ({self.implementations.get('server')}) has no {QUIC_CC[cc]} "
                f"for QUIC (it offers {offered}): not loaded"
            )
            return LoadResult.failed(self.engine, reason), {"substrate": self.substrate}
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
        details["substrate"] = self.substrate
        if result.status is Status.ok and details.get("failure"):
            result = result.model_copy(
                update={"status": Status.failed, "reason": details["failure"]}
            )
        return result, details

    # --- the link as it is -------------------------------------------------------------
    def probe_at_client(self, argv: list[str]) -> list[str]:
        """argv as a command that runs at the client end of the testbed."""
        raise NotImplementedError

    def iperf_service(self) -> contextlib.AbstractContextManager[None]:
        """An iperf3 server listening at the server's address during the block."""
        raise NotImplementedError

    def link_bytes(self, direction: str) -> verify.Counted | None:
        """IP bytes the link carried in `direction` since the last reset, from the link
        agent that counts them (`bytes_onto_link`: satlink counts at the sending
        station, OpenSAND at the receiving station's TAP), with the time it counted
        them on its own clock where it says (`counted_at_s`); None where none counts."""
        known = self._counting_role.get(direction)
        for role in (known,) if known else LINK_ROLES:
            try:
                stats = self.agents[role].stats()
            except ClarkeError:
                continue
            value = (stats.get("bytes_onto_link") or {}).get(direction)
            if isinstance(value, int | float):
                # One agent request per sample from now on.
                self._counting_role[direction] = role
                at = stats.get("counted_at_s")
                return (int(value), float(at)) if isinstance(at, int | float) else int(value)
        return None

    def probe(self) -> verify.Probe:
        assert self.plan is not None

        def reset() -> None:
            for role in LINK_ROLES:
                self.agents[role].reset_stats()

        return verify.Probe(
            addresses=self.plan,
            at_client=self.probe_at_client,
            serve_iperf=self.iperf_service,
            link_bytes=self.link_bytes,
            reset_link=reset,
            link_stats=lambda: {role: self.agents[role].stats() for role in LINK_ROLES},
        )

    def verify_link(self, profile_name: str, phase: str, level: str = "full") -> dict[str, Any]:
        """Measure the link as it is now (ping, iperf3 each way) against its profile."""
        prof = profiles.load(profile_name)
        check = LINK_CHECKS[level]
        report = verify.verify(
            self.probe(),
            self.substrate,
            profile_name,
            prof,
            self.implementations.get("link", ""),
            samples=check["samples"],
            duration=check["duration"],
            omit=check["omit"],
        )
        ping = report.ping
        fwd, ret = report.throughput.get("forward", {}), report.throughput.get("return", {})
        return {
            "phase": phase,
            "profile": profile_name,
            "backend": self.implementations.get("link", ""),
            "substrate": self.substrate,
            "passed": report.ok,
            "time_ns": int(dt.datetime.now(dt.UTC).timestamp() * 1e9),
            "rtt_mean_ms": ping.get("mean"),
            "rtt_stdev_ms": ping.get("stdev"),
            "rtt_p50_ms": ping.get("p50"),
            "rtt_p99_ms": ping.get("p99"),
            "rtt_max_ms": ping.get("max"),
            "rtt_expected_ms": verify.expected_rtt_ms(prof),
            "forward_mbps": (fwd.get("rate_bps") or 0) / 1e6,
            "return_mbps": (ret.get("rate_bps") or 0) / 1e6,
            "forward_expected_mbps": prof.forward.rate_mbps,
            "return_expected_mbps": prof.return_.rate_mbps,
            "rate_from": {d: t.get("rate_from") for d, t in report.throughput.items()},
            "rate_method": {d: t.get("rate_method") for d, t in report.throughput.items()},
            "checks": [asdict(c) for c in report.checks],
        }


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
    measured = [c for c in conns if "wire_bytes_sent" in c]
    wire = sum(int(c.get("wire_bytes_sent", 0)) for c in measured)
    ip = sum(int(c.get("ip_bytes_estimate", 0)) for c in measured)
    app = sum(int(c.get("app_bytes_sent", 0)) for c in conns)
    # Overhead only where every connection of the load reported its wire bytes.
    complete = bool(conns) and len(measured) == len(conns)
    metrics: dict[str, float | None] = {
        "connections_used": float(len(conns)),
        "server_requests": float(requests),
        "app_bytes": float(app),
        "wire_bytes": float(wire) if complete else None,
        "ip_bytes": float(ip) if complete else None,
        "overhead": (wire - page_bytes) / page_bytes if complete and page_bytes else None,
        "retrans_bytes": float(sum(int(c.get("retrans_bytes", 0)) for c in measured)),
        "lost_packets": float(sum(int(c.get("lost_packets", 0)) for c in measured)),
    }
    return {
        "failure": failure,
        "metrics": metrics,
        "server_connections": conns,
        "server_cc": sorted({str(c.get("cc")) for c in conns}),
    }
