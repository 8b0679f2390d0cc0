"""The agent's routes, one declaration each: method and path, the contract's model of
the request body (clarke.contract; none: the body is the role's to check) and of the
reply, whether it is a change (it takes the agent's one lock, without waiting), whether
a caller without the token may ask it (and what it then sees), and the small handler
that answers it. The HTTP side (agent/server.py) reads a request within its limits,
checks the token, finds the route, validates the body, calls the handler and checks
its answer against the reply's model; a path that is not in an agent's table is a 404.

Every agent: `GET /health` (public: without the token, only which role and
implementation answer), `GET /state`, `GET /stats`, and the changes `POST /config`,
`POST /stats/reset`; a role that loads pages (the client) also the change `POST /load`.
An agent hosting more has its routes too:
- a link agent built with a PacketCapture: `POST /capture/start` {"max_bytes"} and
  `POST /capture/stop` (the packets, base64, with tcpdump's counts); a capture runs
  beside loads and changes, one at a time;
- a station's agent built with a PepSlot (its performance-enhancing proxy,
  agent/pep_slot.py): `GET /pep/state`, `GET /pep/stats`, and the changes
  `POST /pep/config`, `POST /pep/stats/reset`;
- the client's, terminal's and gateway's agents built with a NamesSlot (a recorded
  site's resolver, agent/names_slot.py): the changes `POST /names/start`,
  `POST /names/stop`, and `GET /names/queries?since=N`."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable
from urllib.parse import parse_qs

from pydantic import BaseModel, ValidationError

from clarke.browser.load import LoadResult
from clarke.contract import (
    CaptureStart,
    CaptureStopped,
    Configured,
    Health,
    NamesQueries,
    NamesStart,
    NamesStarted,
    PepConfig,
    Reply,
    Stats,
    config_of,
    kind_of_role,
    state_of,
)
from clarke.errors import InputError
from clarke.json_value import JsonObject
from clarke.place.capture import PacketCapture
from clarke.roles import RoleProcess
from clarke.schema import problems_of
from clarke.vocab import Engine

log = logging.getLogger(__name__)

PUBLIC_HEALTH = ("role", "implementation", "clarke", "ready")

M = TypeVar("M", bound=BaseModel)


class PepHost(Protocol):
    """A station's PEP (agent/pep_slot.py)."""

    def state(self) -> JsonObject: ...
    def configure(self, config: PepConfig) -> JsonObject: ...
    def stats(self) -> JsonObject: ...
    def reset_stats(self) -> JsonObject: ...


class NamesHost(Protocol):
    """A role's resolver for a recorded site (agent/names_slot.py)."""

    def start(self, request: NamesStart) -> JsonObject: ...
    def stop(self) -> JsonObject: ...
    def queries(self, since: int = 0) -> JsonObject: ...


@runtime_checkable
class Loader(Protocol):
    """A role that loads pages (the client): POST /load."""

    def load(self, body: JsonObject, engine: str) -> JsonObject: ...


class Refused(Exception):
    """An answer with a 4xx status, before any role code ran (or a 500 for a reply
    outside the contract)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Context:
    """What an agent's handlers answer from: its role, and what it hosts beside it."""

    role: RoleProcess
    capture: PacketCapture | None = None
    pep: PepHost | None = None
    names: NamesHost | None = None


@dataclass(frozen=True)
class Call:
    """One request as its handler takes it: the body (a JSON object; {} for a GET),
    its query string, and the body as the route's contract model when it has one."""

    body: JsonObject
    query: str = ""
    model: BaseModel | None = None

    def model_as(self, kind: type[M]) -> M:
        """The validated body, as the route declared it."""
        assert isinstance(self.model, kind), f"the route validates {kind.__name__}"
        return self.model


Handle = Callable[[Context, Call], JsonObject]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handle: Handle
    reply: type[BaseModel]  # the contract's model of the answer
    body: type[BaseModel] | None = None  # the contract's model of the request body
    change: bool = False  # holds the agent's lock while it runs (409 when it is taken)
    public: tuple[str, ...] = ()  # without the token: answered, with only these fields


def requested(model: type[BaseModel] | None, path: str, body: JsonObject) -> BaseModel | None:
    """A request's body as the contract's model (clarke.contract); InputError (400)
    naming each field that is not as the contract says."""
    if model is None:
        return None
    try:
        return model.model_validate(body)
    except ValidationError as e:
        raise InputError(f"POST {path}: " + "; ".join(problems_of(e))) from None


def replied(role: RoleProcess, route: Route, answer: JsonObject) -> JsonObject:
    """`answer`, checked against the contract's reply for `route` before it is sent: an
    implementation that answers outside it is a bug, said as one (500)."""
    try:
        route.reply.model_validate(answer)
    except ValidationError as e:
        log.error("%s %s: %s", role.role, route.path, e)
        raise Refused(
            500,
            f"the {role.role} agent's {role.implementation} answered {route.path} outside "
            "the contract: " + "; ".join(problems_of(e)),
        ) from None
    return answer


# --- the role's own ---------------------------------------------------------------------
def _health(ctx: Context, call: Call) -> JsonObject:
    return ctx.role.health()


def _state(ctx: Context, call: Call) -> JsonObject:
    return ctx.role.state()


def _stats(ctx: Context, call: Call) -> JsonObject:
    return ctx.role.stats()


def _reset_stats(ctx: Context, call: Call) -> JsonObject:
    return ctx.role.reset_stats()


def _configure(ctx: Context, call: Call) -> JsonObject:
    return ctx.role.configure(call.body)  # checked against the contract, passed as sent


def _load(ctx: Context, call: Call) -> JsonObject:
    assert isinstance(ctx.role, Loader)
    return ctx.role.load(call.body, parse_qs(call.query).get("engine", [Engine.selenium])[0])


# --- a link's packet capture ------------------------------------------------------------
def _capture_start(ctx: Context, call: Call) -> JsonObject:
    assert ctx.capture is not None
    return ctx.capture.start(call.model_as(CaptureStart).max_bytes)


def _capture_stop(ctx: Context, call: Call) -> JsonObject:
    assert ctx.capture is not None
    got = ctx.capture.stop()
    return {
        "interface": got.interface,
        "pcap_b64": base64.b64encode(got.pcap).decode(),
        "bytes": len(got.pcap),
        "truncated": got.truncated,
        "captured": got.captured,
        "dropped": got.dropped,
    }


CAPTURE_ROUTES = (
    Route("POST", "/capture/start", _capture_start, Stats, body=CaptureStart),
    Route("POST", "/capture/stop", _capture_stop, CaptureStopped),
)


# --- a station's PEP --------------------------------------------------------------------
def pep_routes(pep: PepHost) -> tuple[Route, ...]:
    """The routes of a station's PEP (an agent has them only where it hosts one)."""

    def configure(ctx: Context, call: Call) -> JsonObject:
        return pep.configure(call.model_as(PepConfig))

    return (
        Route("GET", "/pep/state", lambda ctx, call: pep.state(), Reply),
        Route("GET", "/pep/stats", lambda ctx, call: pep.stats(), Stats),
        Route("POST", "/pep/config", configure, Configured, body=PepConfig, change=True),
        Route("POST", "/pep/stats/reset", lambda ctx, call: pep.reset_stats(), Stats, change=True),
    )


# --- a recorded site's resolver ---------------------------------------------------------
def _since(query: str) -> int:
    """GET /names/queries' `since`: a count of queries, 0 when not given."""
    given = parse_qs(query, keep_blank_values=True).get("since", ["0"])
    if len(given) != 1 or not given[0].isdecimal() or len(given[0]) > 12:
        raise Refused(400, f"since must be one count of queries (0 or more), not {given}")
    return int(given[0])


def names_routes(names: NamesHost) -> tuple[Route, ...]:
    """The routes of a recorded site's resolver (where the agent hosts one)."""

    def start(ctx: Context, call: Call) -> JsonObject:
        return names.start(call.model_as(NamesStart))

    def queries(ctx: Context, call: Call) -> JsonObject:
        return names.queries(_since(call.query))

    return (
        Route("POST", "/names/start", start, NamesStarted, body=NamesStart, change=True),
        Route("POST", "/names/stop", lambda ctx, call: names.stop(), Reply, change=True),
        Route("GET", "/names/queries", queries, NamesQueries),
    )


def routes_of(ctx: Context) -> dict[tuple[str, str], Route]:
    """An agent's table: (method, path) -> its route; a role's own /state reply and
    /config request are its kind's (clarke.contract)."""
    kind = kind_of_role(ctx.role.role)
    table = [
        Route("GET", "/health", _health, Health, public=PUBLIC_HEALTH),
        Route("GET", "/state", _state, state_of(kind)),
        Route("GET", "/stats", _stats, Stats),
        Route("POST", "/stats/reset", _reset_stats, Stats, change=True),
        Route("POST", "/config", _configure, Configured, body=config_of(kind), change=True),
    ]
    if isinstance(ctx.role, Loader):
        table.append(Route("POST", "/load", _load, LoadResult, change=True))
    if ctx.capture is not None:
        table += CAPTURE_ROUTES
    if ctx.pep is not None:
        table += pep_routes(ctx.pep)
    if ctx.names is not None:
        table += names_routes(ctx.names)
    return {(route.method, route.path): route for route in table}
