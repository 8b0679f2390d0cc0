"""The contract every role implementation keeps, whatever fills the role and wherever it
runs. An implementation (clarke.registry lists them) is one object per (kind, name):

    kind     link (terminal, satellite, gateway), server, client, or pep (a
             performance-enhancing proxy at terminal and gateway, hosted by those
             roles' agents beside the link: clarke.pep)
    check_environment()      what it needs is installed; EnvironmentProblem (exit 3)
                             naming the implementation and how to install it
    check_profile(profile)   links: InputError naming each profile field it cannot
                             emulate, before anything runs
    start(place)             its process(es) for one role in a place (clarke.place):
                             a RoleProcess, which the role's agent serves

A RoleProcess is what the agent's endpoints call (clarke.agent.server):

    health()      GET /health    role, implementation, versions, readiness
    state()       GET /state     what is in force: a link's profile (name and content
                                 hash), a server's congestion controls
    configure(b)  POST /config   idempotent: a no-op when b is already in force;
                                 returns {"applied": bool, "state": state()}
    stats()       GET /stats     normalised counters: a station's `bytes_onto_link`
                                 {direction: IP bytes} (vocab.SENDER / RECEIVER), drops
    reset_stats() POST /stats/reset
    problem()     why it stopped working (a process died), None while it works
    stop()        stop everything it started

The link roles' POST /config body is the whole profile: {"name": "geo", "profile":
{...as in profiles/geo.yaml...}} (link_config); a server's is {"tcp_cc", "quic_cc"}."""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from typing import Any, Protocol

from pydantic import ValidationError

from clarke.errors import InputError, ValidationFailed
from clarke.place import Place
from clarke.profiles import LinkProfile
from clarke.schema import problems_of
from clarke.vocab import Scheduler

KINDS = ("link", "server", "client", "pep")


class RoleProcess(Protocol):
    role: str
    implementation: str

    def health(self) -> dict[str, Any]: ...
    def state(self) -> dict[str, Any]: ...
    def configure(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def stats(self) -> dict[str, Any]: ...
    def reset_stats(self) -> dict[str, Any]: ...
    def problem(self) -> str | None: ...
    def stop(self) -> None: ...


class Implementation(ABC):
    """One registry entry. Subclasses set the class attributes and `start`."""

    kind: str  # link | server | client | pep
    name: str
    summary: str  # one line, for --help
    install: str  # how to get it, for EnvironmentProblem
    # Servers: whether their connection records say how each TLS handshake went (full
    # or resumed, what the ClientHello offered), which context isolation needs.
    reports_handshakes: bool = False
    # Servers: the stream schedulers (vocab.Scheduler) it can be given besides its own,
    # and what its own is (docs/scheduling.md).
    schedulers: tuple[str, ...] = ()
    own_scheduler: str = ""
    # What its state (contract.ServerState.scheduler) says while it runs its own.
    own_scheduler_state: str = Scheduler.own.value

    @abstractmethod
    def check_environment(self) -> None:
        """EnvironmentProblem naming this implementation and how to install it."""

    def check_profile(self, profile: LinkProfile, source: str = "link profile") -> None:
        """Links: InputError naming every field this implementation cannot emulate. By
        default every profile is taken (servers and clients get none)."""
        return None

    def check_scheduler(self, scheduler: str, source: str = "scheduler") -> None:
        """Servers: InputError naming `source` when this server cannot run `scheduler`
        (every server runs its own)."""
        if scheduler == Scheduler.own or scheduler in self.schedulers:
            return
        own = f" ({self.own_scheduler})" if self.own_scheduler else ""
        can = ", ".join([Scheduler.own, *self.schedulers])
        raise InputError(
            f"{source}: {scheduler}: the {self.name} server keeps its own stream "
            f"scheduler{own}; it takes {can} (origin takes every scheduler; "
            "docs/scheduling.md)"
        )

    def scheduler_state(self, scheduler: str) -> str:
        """Servers: what its state says while `scheduler` is in force (its own: as it
        names it), so that a scheduler already in force is not asked for again."""
        return self.own_scheduler_state if scheduler == Scheduler.own else scheduler

    @abstractmethod
    def start(self, place: Place) -> RoleProcess:
        """Start (or prepare) the role `place.role` in its place."""


# --- the link roles' configuration ---------------------------------------------------------


def profile_digest(profile: LinkProfile) -> str:
    """The content hash of a profile: SHA-256 of its canonical JSON. Two names for the
    same content have the same digest; any change of a value changes it."""
    data = profile.model_dump(by_alias=True, mode="json")
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def link_config(name: str, profile: LinkProfile) -> dict[str, Any]:
    """The link roles' POST /config body."""
    return {"name": name, "profile": profile.model_dump(by_alias=True, mode="json")}


def parse_link_config(body: dict[str, Any]) -> tuple[str, LinkProfile]:
    """(name, profile) of a link role's POST /config body; InputError naming what is
    wrong."""
    name = body.get("name")
    if not isinstance(body.get("profile"), dict) or not isinstance(name, str) or not name:
        raise InputError(
            'POST /config for a link role takes {"name": NAME, "profile": {...link profile...}}'
        )
    try:
        return name, LinkProfile.model_validate(body["profile"])
    except ValidationError as e:
        raise ValidationFailed(f"link profile {name!r}", problems_of(e)) from None


def link_state(name: str | None, digest: str | None, running: bool) -> dict[str, Any]:
    """A link role's state: the profile in force (None before the first configure)."""
    return {"profile": name, "profile_sha256": digest, "running": running}
