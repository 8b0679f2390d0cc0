"""The runner's side of one testbed's agents, the same on both substrates: wait until
they answer, learn which implementation fills each role, read back what is in force,
and apply a link profile or a congestion control only when it is not (each change
once, every apply logged and returned as an `Applied`)."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from clarke.agent.client import AgentClient
from clarke.contract import (
    BaseServerConfig,
    Health,
    LinkConfig,
    LinkState,
    PepConfig,
    ServerConfig,
)
from clarke.errors import ClarkeError, EnvironmentProblem
from clarke.json_value import JsonObject
from clarke.place.plan import Addresses
from clarke.profiles import LinkProfile
from clarke.roles import profile_digest
from clarke.vocab import BROWSERS, LINK_ROLES, LINK_START_ORDER, PEP_START_ORDER, CongestionControl

log = logging.getLogger(__name__)

CONFIGURE_TIMEOUT_S = 240.0  # OpenSAND restarts its entities and the terminal logs on


class LinkStopped(ClarkeError):
    """A link role's agent does not answer, or its implementation stopped."""

    kind = "Link"


@dataclass(frozen=True)
class Applied:
    """One change made to the testbed: what, to which value, on which roles, when, and
    how long it took."""

    what: str  # profile | cc | pep | site | the server settings applied (scheduler ...)
    value: str
    sha256: str | None
    roles: tuple[str, ...]
    at: str
    seconds: float

    def to_dict(self) -> JsonObject:
        return asdict(self) | {"roles": list(self.roles)}


@dataclass(frozen=True)
class LinkView:
    """What the link roles say they run."""

    profile: str | None
    sha256: str | None
    states: dict[str, LinkState]

    @property
    def consistent(self) -> bool:
        """Every link role runs the same profile, and runs."""
        seen = {(s.profile, s.profile_sha256) for s in self.states.values()}
        return len(seen) == 1 and all(s.running for s in self.states.values())


class Agents:
    def __init__(self, plan: Addresses, roles: Iterable[str], token: str) -> None:
        """`token`: the testbed's agent token, sent with every request."""
        self.clients = {role: AgentClient(role, plan.agent_url(role), token) for role in roles}
        self.health: dict[str, Health] = {}
        self.applied: list[Applied] = []

    def __getitem__(self, role: str) -> AgentClient:
        return self.clients[role]

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def wait_ready(self, timeout: float = 60) -> None:
        """Until every agent answers /health; then `implementations` is known."""
        deadline = time.monotonic() + timeout
        pending = dict(self.clients)
        last_error = ""
        while pending:
            for role, agent in list(pending.items()):
                try:
                    self.health[role] = agent.health()
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

    @property
    def implementations(self) -> dict[str, str]:
        """Which implementation fills each role (recorded with every result)."""
        h = self.health
        links = sorted({str(h[r].implementation) for r in LINK_ROLES if r in h})
        return {
            "link": "+".join(links),
            "server": str(h["server"].implementation if "server" in h else None),
            "client": str(h["client"].implementation if "client" in h else None),
        }

    def versions(self) -> dict[str, str]:
        """clarke_<role> for every role; each installed browser's version; <implementation>_<role>
        for the link roles and <implementation> for the server."""
        out: dict[str, str] = {}
        for role, agent in self.clients.items():
            h = agent.health()
            out[f"clarke_{role}"] = h.clarke
            impl = h.implementation or ""
            if role == "client":
                for browser in BROWSERS:
                    if h.said(f"{browser}_version"):
                        out[browser] = str(h.said(f"{browser}_version"))
                continue
            version = str((h.said(impl) or {}).get("version", ""))
            out[impl if role == "server" else f"{impl}_{role}"] = version
        return out

    def quic_offered(self) -> set[str] | None:
        """The server's QUIC congestion controls, None when it does not say."""
        server = self.health.get("server") or self["server"].health()
        offered = (server.said(str(server.implementation)) or {}).get("quic_available")
        return set(offered) if isinstance(offered, list) else None

    # --- the link ----------------------------------------------------------------------
    def link(self) -> LinkView:
        """Read back what the link roles run; LinkStopped when one does not answer or
        its implementation is not running any more."""
        states: dict[str, LinkState] = {}
        for role in LINK_START_ORDER:
            try:
                states[role] = self[role].link_state()
            except ClarkeError as e:
                raise LinkStopped(f"the link stopped answering: {e}") from None
        first = states[LINK_START_ORDER[0]]
        view = LinkView(first.profile, first.profile_sha256, states)
        stopped = [r for r, s in states.items() if s.profile and not s.running]
        if stopped:
            raise LinkStopped(f"the link stopped: {', '.join(stopped)} no longer running")
        return view

    def ensure_profile(self, name: str, profile: LinkProfile) -> Applied | None:
        """Make the link run `profile` under `name`: nothing when it does already, else
        POST /config to the link roles in their start order."""
        digest = profile_digest(profile)
        view = self.link()
        if view.consistent and (view.profile, view.sha256) == (name, digest):
            return None
        started, t0 = dt.datetime.now(dt.UTC), time.monotonic()
        body = LinkConfig(name=name, profile=profile)
        applied = tuple(
            role
            for role in LINK_START_ORDER
            if self[role].configure(body, timeout=CONFIGURE_TIMEOUT_S).applied
        )
        seconds = round(time.monotonic() - t0, 3)
        done = Applied("profile", name, digest, applied, started.isoformat(), seconds)
        self.applied.append(done)
        log.warning(
            "applied link profile %s (%s) to %s in %.1f s",
            name,
            digest[:12],
            ", ".join(applied),
            done.seconds,
        )
        return done

    # --- the stations' PEP ----------------------------------------------------------------
    def ensure_pep(self, body: PepConfig) -> Applied | None:
        """Make terminal and gateway run the PEP `body` names (agent/pep_slot.py), each
        only when it does not already."""
        started, t0 = dt.datetime.now(dt.UTC), time.monotonic()
        applied = tuple(role for role in PEP_START_ORDER if self[role].pep_configure(body).applied)
        if not applied:
            return None
        done = Applied(
            "pep", body.preset or body.name, None, applied, started.isoformat(),
            round(time.monotonic() - t0, 3),
        )  # fmt: skip
        self.applied.append(done)
        log.warning(
            "applied PEP %s to %s (%s)", body.preset or body.name, ", ".join(applied), body.body()
        )
        return done

    # --- the server ----------------------------------------------------------------------
    def cc_body(self, cc: str) -> BaseServerConfig:
        """TCP's and QUIC's algorithm of the same family. A server whose QUIC stack lacks
        it keeps its QUIC setting (its h3 loads with this cc then fail as such)."""
        quic = CongestionControl(cc).quic
        offered = self.quic_offered()
        if offered is None or quic in offered:
            return ServerConfig.model_validate({"tcp_cc": cc, "quic_cc": quic})
        return ServerConfig.model_validate({"tcp_cc": cc})

    def ensure_server(self, settings: Mapping[str, object]) -> Applied | None:
        """The server settings `settings` names (fields of its POST /config: the
        dimensions it puts in force, campaign/dimensions.py), in one request; the
        server's configure changes only what differs from what is in force, and says
        whether it changed anything (None here when not)."""
        body = ServerConfig.model_validate(dict(settings))
        started, t0 = dt.datetime.now(dt.UTC), time.monotonic()
        if not body.body() or not self["server"].configure(body).applied:
            return None
        fields = body.body()
        done = Applied(
            "+".join(fields), ",".join(str(v) for v in fields.values()), None, ("server",),
            started.isoformat(), round(time.monotonic() - t0, 3),
        )  # fmt: skip
        self.applied.append(done)
        log.warning("applied %s to the server", ", ".join(f"{k} {v}" for k, v in fields.items()))
        return done

    def ensure_site(self, site: str | None) -> Applied | None:
        """The recorded site the server serves (its name under the pages directory's
        sites/, server/site.py; None: none), applied when the server says another is in
        force. A server that cannot replay sites refuses it (InputError, its reason)."""
        if self["server"].server_state().site == site:
            return None
        started, t0 = dt.datetime.now(dt.UTC), time.monotonic()
        body = ServerConfig(site=site)
        if not self["server"].configure(body, timeout=CONFIGURE_TIMEOUT_S).applied:
            return None
        done = Applied(
            "site", site or "none", None, ("server",), started.isoformat(),
            round(time.monotonic() - t0, 3),
        )  # fmt: skip
        self.applied.append(done)
        log.warning("applied site %s to the server", site or "none")
        return done

    def ensure_cc(self, cc: str) -> Applied | None:
        body = self.cc_body(cc)
        state = self["server"].server_state().body()
        if all(state.get(k) == v for k, v in body.body().items()):
            return None
        started, t0 = dt.datetime.now(dt.UTC), time.monotonic()
        self["server"].configure(body)
        done = Applied(
            "cc",
            cc,
            None,
            ("server",),
            started.isoformat(),
            round(time.monotonic() - t0, 3),
        )
        self.applied.append(done)
        log.warning("applied congestion control %s to the server (%s)", cc, body.body())
        return done
