"""The agent's HTTP server (standard library: it must run wherever a role runs).

What it takes from a caller, in this order, before any role code runs:
- the request line and headers, then the body, each socket read within READ_TIMEOUT_S
  and the whole request within REQUEST_TIMEOUT_S (an idle or trickling connection is
  closed, and never holds anything);
- `Authorization: Bearer <token>` on everything but `GET /health` (401 without, 403
  wrong; without it /health says only which role and implementation answer);
- a body of at most MAX_BODY_BYTES with a Content-Length (413 above, 411 chunked),
  holding one JSON object nested at most MAX_JSON_DEPTH deep (400 otherwise); for a
  link role's `POST /config`, config_body_limit(): the largest link profile that
  validates, by the same setting the profile's reader uses (clarke.schedules.limits);
- then, for a change (`/config`, `/load`, `/stats/reset`), the agent's one lock,
  without waiting: a change already in progress makes the next one answer 409.
A link agent built with a PacketCapture also takes `POST /capture/start` {"max_bytes"}
and `POST /capture/stop` (the packets, base64, with tcpdump's counts): a capture runs
beside loads and changes, one at a time. A station's agent built with a PepSlot takes
`GET /pep/state`, `GET /pep/stats`, `POST /pep/config` and `POST /pep/stats/reset`
(its performance-enhancing proxy; a change takes the agent's lock like /config). The
client's, terminal's and gateway's agents built with a NamesSlot take `POST
/names/start`, `POST /names/stop` and `GET /names/queries?since=N` (a recorded site's
resolver: agent/names_slot.py; start and stop take the lock like /config).
Bad input is a 4xx naming what is wrong; a 5xx is a failing implementation (502) or a
bug in the agent (500)."""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import logging
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NoReturn, Protocol, runtime_checkable
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ValidationError

from clarke.agent import auth
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
from clarke.errors import ClarkeError, InputError
from clarke.place.capture import PacketCapture
from clarke.roles import RoleProcess
from clarke.schedules.limits import config_body_limit
from clarke.schema import problems_of
from clarke.vocab import LINK_ROLES, Engine

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 5.0  # the longest wait for any one read from the caller
REQUEST_TIMEOUT_S = 10.0  # request line, headers and body, all of it
MAX_BODY_BYTES = 1 << 20
MAX_JSON_DEPTH = 32
PUBLIC_HEALTH = ("role", "implementation", "clarke", "ready")
ROUTES = {
    ("GET", "/health"),
    ("GET", "/state"),
    ("GET", "/stats"),
    ("POST", "/stats/reset"),
    ("POST", "/config"),
    ("POST", "/load"),
}
CAPTURE_ROUTES = {("POST", "/capture/start"), ("POST", "/capture/stop")}
# A station's agent (terminal, gateway) built with a PepSlot: its PEP (agent/pep_slot.py).
PEP_ROUTES = {
    ("GET", "/pep/state"),
    ("GET", "/pep/stats"),
    ("POST", "/pep/config"),
    ("POST", "/pep/stats/reset"),
}

# An agent built with a NamesSlot: a recorded site's resolver (agent/names_slot.py).
NAMES_ROUTES = {("POST", "/names/start"), ("POST", "/names/stop"), ("GET", "/names/queries")}


class PepHost(Protocol):
    """A station's PEP (agent/pep_slot.py)."""

    def state(self) -> dict[str, Any]: ...
    def configure(self, config: PepConfig) -> dict[str, Any]: ...
    def stats(self) -> dict[str, Any]: ...
    def reset_stats(self) -> dict[str, Any]: ...


class NamesHost(Protocol):
    """A role's resolver for a recorded site (agent/names_slot.py)."""

    def start(self, request: NamesStart) -> dict[str, Any]: ...
    def stop(self) -> dict[str, Any]: ...
    def queries(self, since: int = 0) -> dict[str, Any]: ...


@runtime_checkable
class Loader(Protocol):
    """A role that loads pages (the client): POST /load."""

    def load(self, body: dict[str, Any], engine: str) -> dict[str, Any]: ...


class Refused(Exception):
    """An answer with a 4xx status, before any role code ran."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


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


def json_object(data: bytes) -> dict[str, Any]:
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


def make_handler(
    role: RoleProcess,
    token: str,
    capture: PacketCapture | None = None,
    pep: PepHost | None = None,
    names: NamesHost | None = None,
) -> type[BaseHTTPRequestHandler]:
    if not auth.TOKEN_RE.fullmatch(token):
        raise InputError("an agent needs a token of at least 128 bits (clarke.agent.auth)")
    lock = threading.Lock()  # one configuration change or page load at a time
    routes = ROUTES | (CAPTURE_ROUTES if capture is not None else set())
    routes |= PEP_ROUTES if pep is not None else set()
    routes |= NAMES_ROUTES if names is not None else set()

    class Handler(BaseHTTPRequestHandler):
        server_version = "clarke-agent"
        timeout = READ_TIMEOUT_S  # every socket read and write (StreamRequestHandler)

        # --- reading the request within REQUEST_TIMEOUT_S --------------------------------
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
            if role.role in LINK_ROLES and urlsplit(self.path).path == "/config":
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

        # --- answering ---------------------------------------------------------------------
        def log_message(self, format: str, *args: Any) -> None:
            log.info("%s %s", self.address_string(), format % args)

        def _reply(self, code: int, body: dict[str, Any]) -> None:
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

        def _authorized(self, method: str, path: str) -> bool:
            """Whether the caller showed the token; Refused unless it may go on."""
            verdict = auth.check(self.headers.get("Authorization"), token)
            if verdict == auth.OK:
                return True
            if verdict == auth.WRONG:
                raise Refused(403, "wrong agent token")
            if (method, path) == ("GET", "/health"):
                return False
            raise Refused(401, "this agent needs `Authorization: Bearer <token>`")

        def _dispatch(self, method: str) -> None:
            url = urlsplit(self.path)
            try:
                try:
                    full = self._authorized(method, url.path)
                    if (method, url.path) not in routes or (
                        url.path == "/load" and not isinstance(role, Loader)
                    ):
                        raise Refused(404, f"no {method} {url.path} on the {role.role} agent")
                    body = json_object(self._body()) if method == "POST" else {}
                except Refused:
                    self._drain()
                    self._read_done()
                    raise
                self._read_done()
                if method == "GET" and url.path.startswith("/pep/"):
                    assert pep is not None
                    answer = pep.state() if url.path == "/pep/state" else pep.stats()
                    self._reply(200, replied(role, url.path, answer))
                elif method == "GET" and url.path == "/names/queries":
                    assert names is not None
                    answer = names.queries(_since(url.query))
                    self._reply(200, replied(role, url.path, answer))
                elif method == "GET":
                    get = {"/health": role.health, "/state": role.state, "/stats": role.stats}
                    answer = replied(role, url.path, get[url.path]())
                    if not full:
                        answer = {k: answer[k] for k in PUBLIC_HEALTH if k in answer}
                    self._reply(200, answer)
                elif url.path.startswith("/capture/"):
                    self._reply(200, replied(role, url.path, self._capture(url.path, body)))
                else:
                    answer = self._change(url.path, url.query, body)
                    self._reply(200, replied(role, url.path, answer))
            except Refused as e:
                self._reply(e.status, {"error": str(e)})
            except RequestCut as e:
                log.warning("%s: %s %s: %s", self.address_string(), method, url.path, e)
                self.close_connection = True
            except ClarkeError as e:
                # The kind of error travels with it: the runner raises the same kind.
                body = {"error": str(e), "exit_code": e.exit_code}
                self._reply(400 if e.exit_code == 2 else 502, body)
            except ValueError as e:  # e.g. pydantic's ValidationError
                self._reply(400, {"error": f"bad request: {e}"})
            except Exception as e:  # a bug: answer, keep serving, keep the traceback
                log.exception("%s %s failed", method, url.path)
                self._reply(500, {"error": f"internal error in the {role.role} agent: {e!r}"})

        def _change(self, path: str, query: str, body: dict[str, Any]) -> dict[str, Any]:
            if not lock.acquire(blocking=False):
                raise Refused(409, f"the {role.role} agent is busy with another change or "
                                   "page load; ask again when it is done")  # fmt: skip
            try:
                if path == "/config":
                    requested(config_of(kind_of_role(role.role)), path, body)
                    return role.configure(body)
                if path == "/pep/config":
                    assert pep is not None
                    config = requested(PepConfig, path, body)
                    assert isinstance(config, PepConfig)
                    return pep.configure(config)
                if path.startswith("/names/"):
                    assert names is not None
                    if path == "/names/stop":
                        return names.stop()
                    start = requested(NamesStart, path, body)
                    assert isinstance(start, NamesStart)
                    return names.start(start)
                if path.startswith("/pep/"):
                    assert pep is not None
                    return pep.reset_stats()
                if path == "/stats/reset":
                    return role.reset_stats()
                assert isinstance(role, Loader)
                return role.load(body, parse_qs(query).get("engine", [Engine.selenium])[0])
            finally:
                lock.release()

        def _capture(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
            assert capture is not None
            if path == "/capture/start":
                start = requested(CaptureStart, path, body)
                assert isinstance(start, CaptureStart)
                return capture.start(start.max_bytes)
            got = capture.stop()
            return {
                "interface": got.interface,
                "pcap_b64": base64.b64encode(got.pcap).decode(),
                "bytes": len(got.pcap),
                "truncated": got.truncated,
                "captured": got.captured,
                "dropped": got.dropped,
            }

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

    return Handler


def _since(query: str) -> int:
    """GET /names/queries' `since`: a count of queries, 0 when not given."""
    given = parse_qs(query, keep_blank_values=True).get("since", ["0"])
    if len(given) != 1 or not given[0].isdecimal() or len(given[0]) > 12:
        raise Refused(400, f"since must be one count of queries (0 or more), not {given}")
    return int(given[0])


def requested(model: type[BaseModel] | None, path: str, body: dict[str, Any]) -> BaseModel | None:
    """A request's body as the contract's model (clarke.contract); InputError (400)
    naming each field that is not as the contract says."""
    if model is None:
        return None
    try:
        return model.model_validate(body)
    except ValidationError as e:
        raise InputError(f"POST {path}: " + "; ".join(problems_of(e))) from None


REPLIES: dict[str, type[BaseModel]] = {
    "/health": Health,
    "/stats": Stats,
    "/stats/reset": Stats,
    "/config": Configured,
    "/capture/start": Stats,
    "/capture/stop": CaptureStopped,
    "/load": LoadResult,
    "/pep/state": Reply,
    "/pep/stats": Stats,
    "/pep/config": Configured,
    "/pep/stats/reset": Stats,
    "/names/start": NamesStarted,
    "/names/stop": Reply,
    "/names/queries": NamesQueries,
}


def replied(role: RoleProcess, path: str, answer: dict[str, Any]) -> dict[str, Any]:
    """`answer`, checked against the contract's reply for `path` before it is sent: an
    implementation that answers outside it is a bug, said as one (500)."""
    model = state_of(kind_of_role(role.role)) if path == "/state" else REPLIES[path]
    try:
        model.model_validate(answer)
    except ValidationError as e:
        log.error("%s %s: %s", role.role, path, e)
        raise Refused(
            500,
            f"the {role.role} agent's {role.implementation} answered {path} outside the "
            "contract: " + "; ".join(problems_of(e)),
        ) from None
    return answer


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
