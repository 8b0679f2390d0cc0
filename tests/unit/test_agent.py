"""The agent's HTTP contract, served for real on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from clarke.agent.client import AgentClient
from clarke.agent.server import make_handler
from clarke.browser.client import BrowserClient
from clarke.errors import ClarkeError
from clarke.place import Place
from clarke.place.plan import plan
from clarke.roles import RoleProcess
from clarke.server.origin import OriginServer
from conftest import free_port


def _place(tmp_path: Path, role: str) -> Place:
    return Place("netns", role, plan(41), tmp_path / role, tmp_path / "pages", tmp_path / "pki")


def _serve(role: RoleProcess) -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(role))
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def client_agent(tmp_path: Path) -> Iterator[str]:
    yield from _serve(BrowserClient(_place(tmp_path, "client")))


def test_health_state_stats_and_unknown_paths(client_agent: str) -> None:
    c = AgentClient("client", client_agent)
    h = c.health()
    assert h["role"] == "client" and "ready" in h
    assert c.stats() == {"loads": 0}
    assert c.state() == {}
    assert c.configure({}) == {"applied": False, "state": {}}
    r = httpx.get(f"{client_agent}/nope", trust_env=False)
    assert r.status_code == 404 and "no GET /nope on the client agent" in r.json()["error"]
    with pytest.raises(ClarkeError, match="unknown engine 'lynx'"):
        c.load({"url": "http://127.0.0.1:1/", "http": "1.1", "host": "x", "port": 1}, "lynx", 10)


def test_unreachable_implementation_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from clarke.server import origin

    monkeypatch.setattr(origin, "ORIGIN_CONTROL", f"127.0.0.1:{free_port()}")
    server = OriginServer(_place(tmp_path, "server"), Path("/nonexistent/origin"))
    with pytest.raises(ClarkeError, match="origin's control endpoint"):
        server.stats()
    with pytest.raises(ClarkeError, match="origin's control endpoint"):
        server.configure({"tcp_cc": "bbr"})
