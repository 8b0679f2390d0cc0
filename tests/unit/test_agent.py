"""The agent's HTTP contract, served for real on loopback: the token, the limits on what
a request may carry and how long it may take, and the lock that never waits."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from clarke import profiles
from clarke.agent import auth, server
from clarke.agent.client import AgentClient
from clarke.agent.server import make_handler
from clarke.browser.client import BrowserClient
from clarke.browser.load import LoadRequest
from clarke.contract import LinkConfig, PepConfig
from clarke.errors import ClarkeError, EnvironmentProblem, InputError
from clarke.place import Place
from clarke.place.plan import plan
from clarke.server.origin import OriginServer
from conftest import free_port
from testbeds import agent_serving

TOKEN = "t" * 43
GOOD_LOAD = {"url": "https://www.clarke.test/uniform-100k/", "http": "2"}


def _place(tmp_path: Path, role: str) -> Place:
    return Place("netns", role, plan(41), tmp_path / role, tmp_path / "pages", tmp_path / "pki")


def _serve(role: Any) -> contextlib.AbstractContextManager[str]:
    return agent_serving(role, TOKEN)


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """A "browser" that leaves a marker when anything starts it as one (not for
    --version): any load that got as far as starting a browser would write it."""
    script = tmp_path / "fake-firefox"
    mark = tmp_path / "ran"
    script.write_text(
        f'#!/bin/sh\ncase "$*" in *--version*) echo "Mozilla Firefox 1.0"; exit 0;; esac\n'
        f'echo "$@" >> {mark}\nexit 1\n'
    )
    script.chmod(0o755)
    return script


@pytest.fixture
def client_agent(marker: Path, tmp_path: Path) -> Iterator[str]:
    with _serve(BrowserClient(_place(tmp_path, "client"), str(marker))) as url:
        yield url


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _raw(url: str, data: bytes, timeout: float = 10) -> bytes:
    """Send raw bytes to the agent; everything it answers until it closes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_health_stats_and_unknown_paths(client_agent: str) -> None:
    c = AgentClient("client", client_agent, TOKEN)
    h = c.health()
    assert h.role == "client" and h.ready is True and h.said("firefox_version") == "1.0"
    assert c.stats() == {"loads": 0}
    assert c.state().body() == {}
    assert c.configure(None).body() == {"applied": False, "state": {}}
    r = httpx.get(f"{client_agent}/nope", trust_env=False, headers=auth.bearer(TOKEN))
    assert r.status_code == 404 and "no GET /nope on the client agent" in r.json()["error"]
    with pytest.raises(ClarkeError, match="unknown engine 'lynx'"):
        c.load(LoadRequest.model_validate(GOOD_LOAD), "lynx", 10)


def test_every_request_but_health_needs_the_token(client_agent: str) -> None:
    wrong = {"Authorization": "Bearer " + "x" * 43}
    for method, path in [
        ("GET", "/stats"),
        ("GET", "/state"),
        ("POST", "/config"),
        ("POST", "/stats/reset"),
        ("POST", "/load"),
        ("GET", "/nope"),
        ("PUT", "/config"),
        ("DELETE", "/stats"),
    ]:
        for headers, status in [
            ({}, 401),
            ({"Authorization": "Basic dXNlcjpwYXNz"}, 401),
            (wrong, 403),
            ({"Authorization": "Bearer " + TOKEN[:-1]}, 403),
        ]:
            r = httpx.request(
                method, client_agent + path, json=GOOD_LOAD, headers=headers, trust_env=False
            )
            assert r.status_code == status, (method, path, headers, r.text)
            if status == 401:
                assert r.headers["WWW-Authenticate"].startswith("Bearer")
    # /health answers anyone, with only what says the agent is there.
    public = httpx.get(f"{client_agent}/health", trust_env=False).json()
    assert set(public) == {"role", "implementation", "clarke", "ready"}
    assert httpx.get(f"{client_agent}/health", headers=wrong, trust_env=False).status_code == 403
    assert AgentClient("client", client_agent, TOKEN).stats() == {"loads": 0}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"firefox": "/tmp/x"}, "firefox"),
        ({"ca_cert": "/etc/shadow"}, "ca_cert"),
        ({"host": "x", "port": 443}, "host"),
        ({"url": "file:///etc/shadow"}, "url"),
        ({"url": "http://www.clarke.test/"}, "url"),
        ({"url": "https://elsewhere.example/"}, "url"),
        ({"url": "https://www.clarke.test:8443/"}, "url"),
        ({"url": "https://user@www.clarke.test/"}, "url"),
        ({"url": "https://www.clarke.test\\@x/"}, "url"),
        ({"url": "https://www.clarke.test/ a"}, "url"),
        ({"url": ["https://www.clarke.test/"]}, "url"),
        ({"http": "4"}, "http"),
        ({"http": 2}, "http"),
        ({"connections": "6"}, "connections"),
        ({"connections": 0}, "connections"),
        ({"window": [1, 2, 3]}, "window"),
        ({"timeout_s": -1}, "timeout_s"),
        ({"prefs": {"network.proxy.autoconfig_url": "file:///etc/shadow"}}, "prefs"),
        ({"prefs": {"network.http.foo": "a string"}}, "prefs"),
        ({"prefs": {"network.http.max-connections": 2**40}}, "prefs"),
        ({"expected_objects": [{"path": 1, "bytes": "x"}]}, "expected_objects"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_load_request_carries_values_only(
    client_agent: str, marker: Path, change: dict[str, Any], field: str
) -> None:
    body = {**GOOD_LOAD, **change}
    r = httpx.post(
        f"{client_agent}/load?engine=selenium",
        json=body,
        headers=auth.bearer(TOKEN),
        trust_env=False,
    )
    assert r.status_code == 400, r.text
    assert field in r.json()["error"], r.json()
    assert not (marker.parent / "ran").exists()
    assert AgentClient("client", client_agent, TOKEN).stats() == {"loads": 0}


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"[1, 2]", 400, "JSON object, not list"),
        (b'"text"', 400, "JSON object, not str"),
        (b"{", 400, "not JSON"),
        (b"\xff\xfe{}", 400, "not JSON"),
        (b'{"a": NaN}', 400, "NaN is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "nested deeper"),
        (json.dumps({"profile": _nested(server.MAX_JSON_DEPTH)}).encode(), 400, "nested deeper"),
    ],
)
def test_bad_bodies_are_400(client_agent: str, body: bytes, status: int, says: str) -> None:
    for path in ("/config", "/load", "/stats/reset"):
        r = httpx.post(
            client_agent + path, content=body, headers=auth.bearer(TOKEN), trust_env=False
        )
        assert r.status_code == status and says in r.json()["error"], (path, r.text[:200])


def test_body_limits(client_agent: str) -> None:
    head = f"POST /config HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
    big = _raw(client_agent, f"{head}Content-Length: {2 << 20}\r\n\r\n".encode())
    assert big.startswith(b"HTTP/1.0 413"), big[:100]
    chunked = _raw(client_agent, f"{head}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n".encode())
    assert chunked.startswith(b"HTTP/1.0 411"), chunked[:100]
    bad = _raw(client_agent, f"{head}Content-Length: -1\r\n\r\n".encode())
    assert bad.startswith(b"HTTP/1.0 400"), bad[:100]


@pytest.fixture
def short_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "READ_TIMEOUT_S", 1.0)
    monkeypatch.setattr(server, "REQUEST_TIMEOUT_S", 2.0)


def _link_config(name: str) -> LinkConfig:
    return LinkConfig(name=name, profile=profiles.read("lan"))


class Slow:
    """A role whose configuration change takes as long as the test wants."""

    role, implementation = "terminal", "test"

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

    def health(self) -> dict[str, Any]:
        return {"role": self.role, "implementation": self.implementation}

    def state(self) -> dict[str, Any]:
        return {}

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        self.entered.set()
        self.release.wait(30)
        return {"applied": True, "state": {"profile": body["name"]}}

    def stats(self) -> dict[str, Any]:
        return {}

    def reset_stats(self) -> dict[str, Any]:
        return {"reset": True}


@pytest.mark.timing
def test_half_sent_request_holds_nothing(short_timeouts: None) -> None:
    """Finding 6: headers and one byte of body used to hold the lock for ever."""
    role = Slow()
    role.release.set()
    with _serve(role) as url:
        head = (
            f"POST /config HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Length: 100\r\n\r\n{"
        )
        results: dict[str, Any] = {}

        def half_sent(data: str, key: str) -> None:
            started = time.monotonic()
            results[key] = (_raw(url, data.encode(), timeout=30), time.monotonic() - started)

        threads = [
            threading.Thread(target=half_sent, args=(head, "body")),
            threading.Thread(target=half_sent, args=("", "idle")),
            threading.Thread(target=half_sent, args=("POST /config HTTP/1.1\r\n", "headers")),
        ]
        for t in threads:
            t.start()
        time.sleep(0.3)
        agent = AgentClient("terminal", url, TOKEN, timeout=5)
        started = time.monotonic()
        assert agent.configure(_link_config("geo")).state == {"profile": "geo"}
        assert agent.reset_stats() == {"reset": True}
        assert time.monotonic() - started < server.REQUEST_TIMEOUT_S
        for t in threads:
            t.join(30)
        # Every held connection was closed, with nothing answered, within the deadline.
        for key, (answer, took) in results.items():
            assert answer == b"", (key, answer)
            assert took <= server.REQUEST_TIMEOUT_S + 2, (key, took)


@pytest.mark.timing
def test_trickled_headers_are_cut_at_the_deadline(short_timeouts: None) -> None:
    role = Slow()
    with _serve(role) as url:
        host, port = url.removeprefix("http://").split(":")
        started = time.monotonic()
        with socket.create_connection((host, int(port)), timeout=10) as s:
            closed = None
            for byte in b"POST /config HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                try:
                    s.sendall(bytes([byte]))
                    s.settimeout(0.5 * server.READ_TIMEOUT_S)
                    if s.recv(1) == b"":
                        closed = time.monotonic() - started
                        break
                except TimeoutError:
                    continue
                except OSError:
                    closed = time.monotonic() - started
                    break
        assert closed is not None and closed <= server.REQUEST_TIMEOUT_S + 2, closed


@pytest.mark.timing
def test_a_change_in_progress_makes_the_next_one_409() -> None:
    role = Slow()
    with _serve(role) as url:
        first: dict[str, Any] = {}
        t = threading.Thread(
            target=lambda: first.update(
                AgentClient("terminal", url, TOKEN).configure(_link_config("a")).state
            )
        )
        t.start()
        assert role.entered.wait(10)
        started = time.monotonic()
        for path in ("/config", "/stats/reset"):
            r = httpx.post(url + path, json={}, headers=auth.bearer(TOKEN), trust_env=False)
            assert r.status_code == 409 and "busy" in r.json()["error"], r.text
        assert time.monotonic() - started < 5  # answered, not queued behind the change
        assert httpx.get(url + "/stats", headers=auth.bearer(TOKEN), trust_env=False).is_success
        role.release.set()
        t.join(10)
        assert first == {"profile": "a"}
        assert AgentClient("terminal", url, TOKEN).configure(_link_config("b")).state == {
            "profile": "b"
        }


def test_unreachable_implementation_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clarke.server import origin

    monkeypatch.setattr(origin, "ORIGIN_CONTROL", f"127.0.0.1:{free_port()}")
    server = OriginServer(_place(tmp_path, "server"), Path("/nonexistent/origin"))
    with pytest.raises(ClarkeError, match="origin's control endpoint"):
        server.stats()
    with pytest.raises(ClarkeError, match="origin's control endpoint"):
        server.configure({"tcp_cc": "bbr"})
    # Refused before anything is asked (found by tests/security's fuzzer: a null value
    # under an unknown key compared equal to "not in force" and passed as a no-op).
    with pytest.raises(InputError, match=r"unknown key.*'colour'"):
        server.configure({"colour": None})


def test_agents_listen_on_one_address() -> None:
    for host in ("0.0.0.0", "::", "not-an-address"):
        with pytest.raises(InputError, match="--listen"):
            server.check_listen_address(host)
    server.check_listen_address("198.19.3.2")


def test_testbeds_starting_together_read_one_whole_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Testbeds of several cluster nodes share a state directory and start at once: one
    that finds the token file another is still writing must read a whole token, never an
    empty file (a Slurm shard failed with "not a token" so). Here the first writer is held
    between opening its file and writing it until the second testbed has its token."""
    import threading

    path = tmp_path / "agent-token"
    second_done = threading.Event()
    real_fdopen = os.fdopen
    first = threading.get_ident()

    def held_fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == first:
            second_done.wait(5)
        return real_fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(auth.os, "fdopen", held_fdopen)
    got: dict[str, object] = {}

    def second() -> None:
        try:
            got["second"] = auth.read_token(auth.ensure_token_file(path))
        except Exception as e:
            got["second"] = e
        finally:
            second_done.set()

    thread = threading.Thread(target=second)
    threading.Timer(0.1, thread.start).start()
    got["first"] = auth.read_token(auth.ensure_token_file(path))
    thread.join(10)
    assert got["second"] == got["first"], got
    assert [p.name for p in tmp_path.iterdir()] == ["agent-token"]  # no writer's file left


def test_token_file_is_made_0600_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "agent-token"
    old = os.umask(0)
    try:
        token = auth.create_token_file(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(token) >= 43 and auth.read_token(path) == token
    with pytest.raises(FileExistsError):
        auth.create_token_file(path)
    assert auth.read_token(auth.ensure_token_file(path)) == token  # kept, not replaced
    assert auth.create_token_file(tmp_path / "other") != token
    # Through a symlink, open to others, or too short: refused, naming the file.
    link = tmp_path / "link"
    link.symlink_to(path)
    with pytest.raises(FileExistsError):
        auth.create_token_file(link)
    with pytest.raises(EnvironmentProblem, match="symbolic links"):
        auth.read_token(link)
    open_to_all = tmp_path / "open"
    open_to_all.write_text(token)
    open_to_all.chmod(0o644)
    with pytest.raises(EnvironmentProblem, match="other users may access it"):
        auth.read_token(open_to_all)
    short = tmp_path / "short"
    short.write_text("abc\n")
    short.chmod(0o600)
    with pytest.raises(EnvironmentProblem, match="not a token"):
        auth.read_token(short)
    with pytest.raises(EnvironmentProblem, match="No such file"):
        auth.read_token(tmp_path / "missing")


def test_token_check() -> None:
    assert auth.check(f"Bearer {TOKEN}", TOKEN) == auth.OK
    assert auth.check(f"bearer  {TOKEN} ", TOKEN) == auth.OK
    assert auth.check(None, TOKEN) == auth.MISSING
    assert auth.check("Bearer", TOKEN) == auth.MISSING
    assert auth.check(TOKEN, TOKEN) == auth.MISSING
    assert auth.check("Bearer x", TOKEN) == auth.WRONG
    assert auth.check("Bearer " + TOKEN + "x", TOKEN) == auth.WRONG
    assert auth.check("Bearer \u00ff" * 3, TOKEN) == auth.WRONG
    with pytest.raises(InputError, match="128 bits"):
        make_handler(Slow(), "short")


def test_every_agent_starts_with_the_token_file_and_only_the_client_with_a_browser(
    tmp_path: Path,
) -> None:
    from clarke.testbed.lifecycle import agent_argv

    for role in ("client", "terminal", "server"):
        argv = agent_argv(plan(41), tmp_path, role, "x", firefox="/opt/ff/firefox")
        at = argv.index("--token-file")
        assert argv[at + 1] == str(tmp_path / auth.TOKEN_FILE)
        assert ("--firefox" in argv) is (role == "client")
        if role == "client":
            assert argv[argv.index("--firefox") + 1] == "/opt/ff/firefox"
    assert "--firefox" not in agent_argv(plan(41), tmp_path, "client", "firefox")


class OffContract(Slow):
    """A link role whose state and counters break the contract (clarke.contract)."""

    def state(self) -> dict[str, Any]:
        return {"profile": 7, "running": "maybe"}


def test_requests_and_replies_are_held_to_the_contract_at_both_ends() -> None:
    role = OffContract()
    role.release.set()
    with _serve(role) as url:
        headers = auth.bearer(TOKEN)
        # The agent refuses a request outside the contract before its role sees it.
        for body, named in (
            ({"tcp_cc": "vegas"}, "profile: required field is missing"),
            ({"name": "geo", "profile": {}}, "profile.forward: required field is missing"),
        ):
            r = httpx.post(f"{url}/config", json=body, headers=headers, trust_env=False)
            assert r.status_code == 400 and named in r.json()["error"], r.text
        assert not role.entered.is_set()
        # A reply outside the contract is the agent's bug, said as one, and the runner
        # refuses it too.
        r = httpx.get(f"{url}/state", headers=headers, trust_env=False)
        assert r.status_code == 500 and "outside the contract" in r.json()["error"], r.text
        with pytest.raises(ClarkeError, match="outside the contract"):
            AgentClient("terminal", url, TOKEN).link_state()


def test_the_server_contract_names_its_congestion_controls() -> None:
    from clarke.contract import ServerConfig

    with pytest.raises(ValueError, match="tcp_cc"):
        ServerConfig.model_validate({"tcp_cc": "vegas"})
    with pytest.raises(ValueError, match="allowed: cubic, bbr, newreno"):
        ServerConfig.model_validate({"quic_cc": "reno"})
    assert ServerConfig.model_validate({"tcp_cc": "bbr"}).body() == {"tcp_cc": "bbr"}


class NoPep:
    """A station's PEP slot running none (agent/pep_slot.py's replies)."""

    def state(self) -> dict[str, Any]:
        return {"pep": "none"}

    def __init__(self) -> None:
        self.configured: list[PepConfig] = []

    def configure(self, config: PepConfig) -> dict[str, Any]:
        self.configured.append(config)
        return {"applied": False, "state": self.state()}

    def stats(self) -> dict[str, Any]:
        return {"pep": "none"}

    def reset_stats(self) -> dict[str, Any]:
        return {"pep": "none"}


def test_a_stations_pep_routes_answer_within_the_contract() -> None:
    role = Slow()
    pep = NoPep()
    with agent_serving(role, TOKEN, pep=pep) as url:
        agent = AgentClient("terminal", url, TOKEN)
        assert agent.pep_configure(PepConfig(name="none")).applied is False
        # The configure request is the contract's PepConfig, checked before the slot
        # sees it: a field out of range, of the wrong type or unknown is a 400 naming it.
        for bad, field in [
            ({"name": "splittcp", "pool_size": 1000}, "pool_size"),
            ({"name": "splittcp", "hop_initial_window": {"forward": "458"}}, "hop_initial_window"),
            ({"name": "splittcp", "mode": "turbo"}, "mode"),
            ({"name": "splittcp", "hop_cc": "vegas"}, "hop_cc"),
            ({"name": "splittcp", "window": 3}, "window"),
            ({"name": "../x"}, "name"),
        ]:
            with pytest.raises(InputError, match=f"400 POST /pep/config: {field}"):
                agent._call("POST", "/pep/config", bad)
        assert [c.name for c in pep.configured] == ["none"]
        assert agent.pep_state() == {"pep": "none"} == agent.pep_stats()
        assert agent.pep_reset_stats() == {"pep": "none"}


class DriverGone(Slow):
    """A role whose work meets a connection that went away (a browser's driver)."""

    def stats(self) -> dict[str, Any]:
        raise ConnectionResetError(104, "Connection reset by peer")


def test_a_connection_error_inside_a_role_is_answered_not_dropped() -> None:
    """Only a request that did not arrive whole closes the connection unanswered; the
    runner saw `Server disconnected without sending a response` for a role's own error."""
    with _serve(DriverGone()) as url:
        headers = auth.bearer(TOKEN)
        r = httpx.get(f"{url}/stats", headers=headers, trust_env=False)
        assert r.status_code == 500 and "Connection reset by peer" in r.json()["error"], r.text
        assert httpx.get(f"{url}/health", trust_env=False).is_success  # still serving
