"""The agent's HTTP server (standard library: it must run wherever a role runs).

What it takes from a caller, in this order, before any role code runs:
- the request line and headers, then the body, each socket read within READ_TIMEOUT_S
  and the whole request within REQUEST_TIMEOUT_S (an idle or trickling connection is
  closed, and never holds anything);
- `Authorization: Bearer <token>` on everything but `GET /health` (401 without, 403
  wrong; without it /health says only which role and implementation answer);
- a route of the agent's table (agent/routes.py: which routes an agent has, what each
  takes and answers; 404 for any other method and path);
- a body of at most MAX_BODY_BYTES with a Content-Length (413 above, 411 chunked),
  holding one JSON object nested at most MAX_JSON_DEPTH deep (400 otherwise); for a
  link role's `POST /config`, config_body_limit(): the largest link profile that
  validates, by the same setting the profile's reader uses (clarke.schedules.limits);
- then, for a change (`/config`, `/load`, `/stats/reset`, the PEP's and the resolver's),
  the agent's one lock, without waiting: a change already in progress makes the next
  one answer 409; then the body as the route's contract model (400 naming each field).
Bad input is a 4xx naming what is wrong; a 5xx is a failing implementation (502), a
reply outside the contract or a bug in the agent (500)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NoReturn
from urllib.parse import urlsplit

from clarke.agent import auth
from clarke.agent.routes import PUBLIC_HEALTH as PUBLIC_HEALTH
from clarke.agent.routes import (
    Call,
    Context,
    NamesHost,
    PepHost,
    Refused,
    Route,
    replied,
    requested,
    routes_of,
)
from clarke.errors import ClarkeError, InputError
from clarke.json_value import JsonObject
from clarke.place.capture import PacketCapture
from clarke.roles import RoleProcess
from clarke.schedules.limits import config_body_limit
from clarke.vocab import LINK_ROLES

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 5.0  # the longest wait for any one read from the caller
REQUEST_TIMEOUT_S = 10.0  # request line, headers and body, all of it
MAX_BODY_BYTES = 1 << 20
MAX_JSON_DEPTH = 32


class RequestCut(Exception):
    """The request did not arrive whole (its deadline passed, its body ended early, the
    caller hung up): the connection is closed without an answer, as nobody reads one.
    Its own class, so that a ConnectionError a role raises while it works (a browser's
    driver that went away) is answered as an error instead of a silent close."""


def _too_deep(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list):
            if depth > limit:
                return True
            children = v.values() if isinstance(v, dict) else v
            stack.extend((c, depth + 1) for c in children)
    return False


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def json_object(data: bytes) -> JsonObject:
    """The body as a JSON object ({} when empty); Refused(400) for anything else."""
    if not data.strip():
        return {}
    try:
        value = json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise Refused(400, f"the body is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, NaN, huge integers
        raise Refused(400, f"the body is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise Refused(400, f"the body must be a JSON object, not {type(value).__name__}")
    if _too_deep(value, MAX_JSON_DEPTH):
        raise Refused(400, f"the body is nested deeper than {MAX_JSON_DEPTH} levels")
    return value


@dataclass(frozen=True)
class Agent:
    """What one agent serves: its routes (agent/routes.py), to the holder of its token,
    one change at a time."""

    context: Context
    token: str
    routes: dict[tuple[str, str], Route]
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def role(self) -> RoleProcess:
        return self.context.role


@contextlib.contextmanager
def _one_change(agent: Agent, route: Route) -> Iterator[None]:
    """For a change, the agent's lock, held until the change is done: never waited for
    (409 while another change or page load runs)."""
    if not route.change:
        yield
        return
    if not agent.lock.acquire(blocking=False):
        raise Refused(409, f"the {agent.role.role} agent is busy with another change or "
                           "page load; ask again when it is done")  # fmt: skip
    try:
        yield
    finally:
        agent.lock.release()


class AgentHandler(BaseHTTPRequestHandler):
    """One request to an agent (make_handler: which agent)."""

    agent: Agent
    server_version = "clarke-agent"

    # --- reading the request within REQUEST_TIMEOUT_S ------------------------------------
    def handle_one_request(self) -> None:
        self._guard = threading.Lock()
        self._reading, self._was_cut, self._body_read = True, False, False
        timer = threading.Timer(REQUEST_TIMEOUT_S, self._cut)
        timer.daemon = True
        timer.start()
        try:
            super().handle_one_request()
        finally:
            timer.cancel()

    def _cut(self) -> None:
        """The request is not in after REQUEST_TIMEOUT_S: close the connection (a
        blocked read returns at once)."""
        with self._guard:
            if not self._reading:
                return
            self._reading, self._was_cut = False, True
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        log.warning("%s: request not complete after %.0f s; closed",
                    self.address_string(), REQUEST_TIMEOUT_S)  # fmt: skip

    def _read_done(self) -> None:
        """The whole request is in: from here on the deadline does not apply.
        RequestCut when it came too late (the connection is closed)."""
        with self._guard:
            if self._was_cut:
                raise RequestCut(f"request not complete after {REQUEST_TIMEOUT_S:.0f} s")
            self._reading = False

    def _body_limit(self) -> int:
        """A link role's profile may be long (its schedule); every other body is small."""
        if self.agent.role.role in LINK_ROLES and urlsplit(self.path).path == "/config":
            return max(MAX_BODY_BYTES, config_body_limit())
        return MAX_BODY_BYTES

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding"):
            raise Refused(411, "send the body with a Content-Length, not chunked")
        raw = (self.headers.get("Content-Length") or "0").strip()
        if not raw.isdigit():
            raise Refused(400, f"Content-Length {raw[:40]!r} is not a number of bytes")
        n, limit = int(raw), self._body_limit()
        if n > limit:
            raise Refused(413, f"the body is {n} bytes; the limit is {limit}")
        try:
            data = self.rfile.read(n) if n else b""
        except OSError as e:  # the read timeout, a reset
            raise RequestCut(f"reading the body: {e}") from None
        if len(data) < n:
            raise RequestCut(f"the body ended after {len(data)} of {n} bytes")
        self._body_read = True
        return data

    def _drain(self) -> None:
        """Read a body left unread (within the limits), so that the caller sees the
        answer rather than a connection reset."""
        if self._body_read or self.headers.get("Transfer-Encoding"):
            return
        raw = (self.headers.get("Content-Length") or "0").strip()
        n = int(raw) if raw.isdigit() else 0
        if 0 < n <= self._body_limit():
            with contextlib.suppress(OSError):
                self.rfile.read(n)

    def _authorized(self, route: Route | None) -> bool:
        """Whether the caller showed the token; Refused unless it may go on."""
        verdict = auth.check(self.headers.get("Authorization"), self.agent.token)
        if verdict == auth.OK:
            return True
        if verdict == auth.WRONG:
            raise Refused(403, "wrong agent token")
        if route is not None and route.public:
            return False
        raise Refused(401, "this agent needs `Authorization: Bearer <token>`")

    def _read(self, method: str, path: str) -> tuple[Route, bool, JsonObject]:
        """The request's route, whether the caller showed the token, and its body: all
        of the request, read (a refused one too, so that its caller sees the answer)."""
        route = self.agent.routes.get((method, path))
        try:
            full = self._authorized(route)
            if route is None:
                raise Refused(404, f"no {method} {path} on the {self.agent.role.role} agent")
            body = json_object(self._body()) if method == "POST" else {}
        except Refused:
            self._drain()
            self._read_done()
            raise
        self._read_done()
        return route, full, body

    # --- answering -----------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)

    def _reply(self, code: int, body: JsonObject) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(code)
            if code == 401:
                self.send_header("WWW-Authenticate", 'Bearer realm="clarke-agent"')
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError as e:  # the caller left (or was cut off): nothing to answer
            log.warning("%s: answer %d not sent: %s", self.address_string(), code, e)
            self.close_connection = True

    def _answer(self, route: Route, body: JsonObject, query: str) -> JsonObject:
        """The route's answer to the request, within the contract (Refused 500 outside
        it); a change holds the agent's lock from the check of its body to its answer."""
        with _one_change(self.agent, route):
            call = Call(body, query, requested(route.body, route.path, body))
            answer = route.handle(self.agent.context, call)
        return replied(self.agent.role, route, answer)

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        try:
            route, full, body = self._read(method, url.path)
            answer = self._answer(route, body, url.query)
            if not full:
                answer = {k: answer[k] for k in route.public if k in answer}
            self._reply(200, answer)
        except Refused as e:
            self._reply(e.status, {"error": str(e)})
        except RequestCut as e:
            log.warning("%s: %s %s: %s", self.address_string(), method, url.path, e)
            self.close_connection = True
        except ClarkeError as e:
            # The kind of error travels with it: the runner raises the same kind.
            said = {"error": str(e), "exit_code": e.exit_code}
            self._reply(400 if e.exit_code == 2 else 502, said)
        except ValueError as e:  # e.g. pydantic's ValidationError
            self._reply(400, {"error": f"bad request: {e}"})
        except Exception as e:  # a bug: answer, keep serving, keep the traceback
            log.exception("%s %s failed", method, url.path)
            role = self.agent.role.role
            self._reply(500, {"error": f"internal error in the {role} agent: {e!r}"})

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")


def make_handler(
    role: RoleProcess,
    token: str,
    capture: PacketCapture | None = None,
    pep: PepHost | None = None,
    names: NamesHost | None = None,
) -> type[BaseHTTPRequestHandler]:
    """The handler class of one agent: its role's routes and those of what it hosts
    beside it (agent/routes.py), for `token`."""
    if not auth.TOKEN_RE.fullmatch(token):
        raise InputError("an agent needs a token of at least 128 bits (clarke.agent.auth)")
    context = Context(role, capture, pep, names)

    class Handler(AgentHandler):
        agent = Agent(context, token, routes_of(context))
        timeout = READ_TIMEOUT_S  # every socket read and write (StreamRequestHandler)

    return Handler


def check_listen_address(host: str) -> None:
    """Agents listen on one address of the management network, never on all."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise InputError(f"--listen: {host!r} is not an IP address") from None
    if address.is_unspecified or address.is_multicast:
        raise InputError(
            f"--listen: {host} would listen on every interface; give the role's address "
            "on the management network"
        )


@dataclass(frozen=True)
class Slots:
    """What an agent hosts beside its role, where the role has it: the terminal's
    packet capture, a station's PEP, a recorded site's resolver."""

    capture: PacketCapture | None = None
    pep: PepHost | None = None
    names: NamesHost | None = None


def serve(
    role: RoleProcess,
    host: str,
    port: int,
    token: str,
    ready: threading.Event | None = None,
    slots: Slots = Slots(),
) -> None:
    check_listen_address(host)
    handler = make_handler(role, token, slots.capture, slots.pep, slots.names)
    httpd = ThreadingHTTPServer((host, port), handler)
    log.info("%s agent (%s) on %s:%d", role.role, role.implementation, host, port)
    if ready:
        ready.set()
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()
