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
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar, Final, Protocol

from pydantic import ValidationError

from clarke import __version__
from clarke.campaign.dimension import Dimension
from clarke.errors import InputError, ValidationFailed
from clarke.json_value import JsonObject
from clarke.place import Place
from clarke.profiles import LinkProfile
from clarke.schema import problems_of

KINDS = ("link", "server", "client", "pep")


class RoleProcess(Protocol):
    role: str
    implementation: str

    def health(self) -> JsonObject: ...
    def state(self) -> JsonObject: ...
    def configure(self, body: JsonObject) -> JsonObject: ...
    def stats(self) -> JsonObject: ...
    def reset_stats(self) -> JsonObject: ...
    def problem(self) -> str | None: ...
    def stop(self) -> None: ...


class Every:
    """Capability data's "every value" (Implementation.supports)."""

    def __repr__(self) -> str:
        return "EVERY"


EVERY: Final = Every()
# What an implementation takes of each dimension, by the dimension's name.
Capabilities = Mapping[str, Collection[str] | Every]


class Implementation(ABC):
    """One registry entry. Subclasses set the class attributes and `start`."""

    kind: str  # link | server | client | pep
    name: str
    summary: str  # one line, for --help
    install: str  # how to get it, for EnvironmentProblem
    # Capability data: the values it takes of each dimension its kind puts in force
    # (campaign/dimensions.py, `applied_by`), as text, by the dimension's name, or
    # EVERY; a dimension it does not name it takes at its default only. `notes`: why it
    # takes no more of one, for the refusal.
    supports: ClassVar[Capabilities] = {}
    notes: ClassVar[Mapping[str, str]] = {}

    @abstractmethod
    def check_environment(self) -> None:
        """EnvironmentProblem naming this implementation and how to install it."""

    def check_profile(self, profile: LinkProfile, source: str = "link profile") -> None:
        """Links: InputError naming every field this implementation cannot emulate. By
        default every profile is taken (servers and clients get none)."""
        return None

    def takes(self, dimension: Dimension[Any], value: object) -> bool:
        taken = self.supports.get(dimension.name)
        text = dimension.text(value)
        return (
            isinstance(taken, Every)
            or text == dimension.default_text()
            or (taken is not None and text in taken)
        )

    def refusal(self, dimension: Dimension[Any], value: object) -> str:
        """Why it does not take `value` (for an InputError naming the field)."""
        taken = self.supports.get(dimension.name)
        default = dimension.default_text()
        values = sorted({*(taken if taken is not None and not isinstance(taken, Every) else ())}
                        | ({default} if default is not None else set()))  # fmt: skip
        note = self.notes.get(dimension.name, "")
        return (
            f"{dimension.text(value)}: the {self.name} {self.kind} does not take it"
            + (f" ({note})" if note else "")
            + f"; it takes {', '.join(values) or 'none'}"
        )

    @abstractmethod
    def start(self, place: Place) -> RoleProcess:
        """Start (or prepare) the role `place.role` in its place."""


class ServerImplementation(Implementation):
    """A server: what only servers say of themselves."""

    kind = "server"
    # Whether its connection records say how each TLS handshake went (full or resumed,
    # what the ClientHello offered), which context isolation needs.
    reports_handshakes: bool = False
    # Its own stream scheduler, as docs/scheduling.md and its state name it.
    own_scheduler: str = ""
    # Whether it holds each response as a page's server delays ask (docs/pages.md);
    # another server would send every object at once and so load another page.
    holds_responses: bool = False


# --- the link roles' configuration ---------------------------------------------------------


def profile_digest(profile: LinkProfile) -> str:
    """The content hash of a profile: SHA-256 of its canonical JSON. Two names for the
    same content have the same digest; any change of a value changes it."""
    data = profile.model_dump(by_alias=True, mode="json")
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def link_config(name: str, profile: LinkProfile) -> JsonObject:
    """The link roles' POST /config body."""
    return {"name": name, "profile": profile.model_dump(by_alias=True, mode="json")}


def parse_link_config(body: JsonObject) -> tuple[str, LinkProfile]:
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


def health_of(role: str, implementation: str, **own: object) -> JsonObject:
    """A role's GET /health, ready to serve: who answers (role, implementation, Clarke's
    version), then what its implementation reports under its own key."""
    return {
        "role": role,
        "implementation": implementation,
        "clarke": __version__,
        "ready": True,
        **own,
    }


def link_state(name: str | None, digest: str | None, running: bool) -> JsonObject:
    """A link role's state: the profile in force (None before the first configure)."""
    return {"profile": name, "profile_sha256": digest, "running": running}


class ProfileInForce:
    """The link profile a link role has in force, and the lock every change of it takes
    (held also while the role puts a profile in force, so that `when_idle` tells a role
    starting up from one that died)."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.digest: str | None = None
        self.lock = threading.RLock()

    def state(self, running: bool) -> JsonObject:
        return link_state(self.name, self.digest, running)

    def configure(
        self,
        body: JsonObject,
        running: Callable[[], bool],
        put_in_force: Callable[[str, LinkProfile], None],
    ) -> JsonObject:
        """A link role's POST /config: the profile `body` names, put in force by
        `put_in_force` unless it is in force already (and the role `running`)."""
        name, profile = parse_link_config(body)
        digest = profile_digest(profile)
        with self.lock:
            if running() and (name, digest) == (self.name, self.digest):
                return {"applied": False, "state": self.state(running())}
            put_in_force(name, profile)
            self.name, self.digest = name, digest
            return {"applied": True, "state": self.state(running())}

    def when_idle(self, look: Callable[[], str | None]) -> str | None:
        """`look()` with the lock held when no change is under way; None while one is
        (what a role starting up does is that change's answer)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            return look()
        finally:
            self.lock.release()
