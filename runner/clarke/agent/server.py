"""The agent's HTTP server (standard library: it must run wherever a role runs)."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from clarke.errors import ClarkeError
from clarke.roles import RoleProcess

log = logging.getLogger(__name__)


def make_handler(role: RoleProcess) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()  # one configuration change or page load at a time

    class Handler(BaseHTTPRequestHandler):
        server_version = "clarke-agent"

        def log_message(self, format: str, *args: Any) -> None:
            log.info("%s %s", self.address_string(), format % args)

        def _reply(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n) or b"{}")

        def _dispatch(self, method: str) -> None:
            url = urlsplit(self.path)
            try:
                if method == "GET" and url.path == "/health":
                    self._reply(200, role.health())
                elif method == "GET" and url.path == "/state":
                    self._reply(200, role.state())
                elif method == "GET" and url.path == "/stats":
                    self._reply(200, role.stats())
                elif method == "POST" and url.path == "/stats/reset":
                    with lock:
                        self._reply(200, role.reset_stats())
                elif method == "POST" and url.path == "/config":
                    with lock:
                        self._reply(200, role.configure(self._body()))
                elif method == "POST" and url.path == "/load" and hasattr(role, "load"):
                    engine = parse_qs(url.query).get("engine", ["selenium"])[0]
                    with lock:
                        self._reply(200, role.load(self._body(), engine))
                else:
                    self._reply(404, {"error": f"no {method} {url.path} on the {role.role} agent"})
            except ClarkeError as e:
                # The kind of error travels with it: the runner raises the same kind.
                body = {"error": str(e), "exit_code": e.exit_code}
                self._reply(400 if e.exit_code == 2 else 502, body)
            except (ValueError, json.JSONDecodeError) as e:
                self._reply(400, {"error": f"bad request: {e}"})
            except Exception as e:  # a bug: answer, keep serving, keep the traceback
                log.exception("%s %s failed", method, url.path)
                self._reply(500, {"error": f"internal error in the {role.role} agent: {e!r}"})

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

    return Handler


def serve(role: RoleProcess, host: str, port: int, ready: threading.Event | None = None) -> None:
    httpd = ThreadingHTTPServer((host, port), make_handler(role))
    log.info("%s agent (%s) on %s:%d", role.role, role.implementation, host, port)
    if ready:
        ready.set()
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()
