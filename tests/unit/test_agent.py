"""The agent's HTTP contract, served for real on loopback."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

import httpx
import pytest

from clarke.agent.client import AgentClient
from clarke.agent.roles import ClientRole, HttpControlledRole
from clarke.agent.server import make_handler
from clarke.errors import ClarkeError
from conftest import free_port


@pytest.fixture
def client_agent():  # type: ignore[no-untyped-def]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(ClientRole()))
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_health_stats_and_unknown_paths(client_agent: str) -> None:
    c = AgentClient("client", client_agent)
    h = c.health()
    assert h["role"] == "client" and "ready" in h
    assert c.stats() == {"loads": 0}
    r = httpx.get(f"{client_agent}/nope", trust_env=False)
    assert r.status_code == 404 and "no GET /nope on the client agent" in r.json()["error"]
    with pytest.raises(ClarkeError, match="unknown engine 'lynx'"):
        c.load({"url": "http://127.0.0.1:1/", "http": "1.1", "host": "x", "port": 1}, "lynx", 10)


def test_unreachable_implementation_is_a_clear_error() -> None:
    role = HttpControlledRole("server", "origin", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ClarkeError, match="origin control endpoint"):
        role.stats()
