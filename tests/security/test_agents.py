"""The management surface of a real netns testbed, tried as a hostile local user would
(issue 21, findings 1 and 6): one testbed, its five role agents, for every test here.

- As `nobody`, no request without the token succeeds against any agent (401, 403 with
  a wrong one), the token file cannot be read, origin's control endpoint and satlink's
  control sockets cannot be reached; finding 1's reproduction changes nothing.
- With the token, a `firefox`, `ca_cert` or `file://` field is refused (4xx, naming the
  field) and nothing runs: a "browser" that would leave a marker never starts.
- A half-sent request (finding 6) blocks nothing, and is closed within the timeout.
- Bodies from a fuzzer get 4xx answers, and the agents keep serving."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from clarke import profiles
from clarke.agent import auth, server
from clarke.agent.client import AgentClient
from clarke.agent.server import make_handler
from clarke.browser.client import BrowserClient
from clarke.browser.load import NOT_IN_A_REQUEST, BrowserSetup, LoadRequest
from clarke.contract import LinkConfig, ServerConfig
from clarke.errors import ClarkeError, InputError
from clarke.place import Place
from clarke.place.plan import AGENT_PORT, HTTPS_PORT, ORIGIN_CONTROL, NetnsPlan
from clarke.profiles import LinkProfile
from clarke.results.record import Status
from clarke.roles import link_config
from clarke.run.session.session import Session
from clarke.run.session.settings import PageLoad, SessionSettings
from clarke.testbed.build import NO_DNS_SERVER
from clarke.testbed.substrate import NetnsSubstrate
from clarke.tls import DEFAULT_HOST as HOST
from clarke.vocab import LINK_ROLES, LINK_START_ORDER, ROLES, CongestionControl
from conftest import need
from testbeds import lan_session, state_dir

pytestmark = [pytest.mark.root, pytest.mark.browser, pytest.mark.slow]
PAGE = "triangular-100k"
NOBODY = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]


@dataclass
class Bed:
    session: Session
    plan: NetnsPlan
    token: str
    token_file: Path
    run_dir: Path
    scratch: Path  # a directory `nobody` owns, as an attacker's would be
    http: httpx.Client  # raw requests, with or without the token

    def agent(self, role: str) -> AgentClient:
        return AgentClient(role, self.plan.agent_url(role), self.token)

    def address(self, role: str) -> tuple[str, int]:
        return self.plan.mgmt.address(role), AGENT_PORT


@pytest.fixture(scope="module")
def bed() -> Iterator[Bed]:
    need(os.geteuid() == 0, "root (network namespaces)")
    need(shutil.which("setpriv") is not None, "setpriv (util-linux), to act as nobody")
    # A private state dir that `nobody` may enter: only the files' own modes keep it out.
    state = Path(tempfile.mkdtemp(prefix="clarke-security-"))
    state.chmod(0o755)
    scratch = Path(tempfile.mkdtemp(prefix="clarke-nobody-"))
    scratch.chmod(0o755)
    os.chown(scratch, 65534, 65534)
    try:
        with state_dir(state):
            # Made after CLARKE_STATE_DIR is set: the substrate takes its state from it.
            substrate = NetnsSubstrate()
            with lan_session(substrate, [PAGE], "bbr") as session:
                assert isinstance(session.plan, NetnsPlan)
                run_dir = substrate.run_dir
                token_file = run_dir / auth.TOKEN_FILE
                token = auth.read_token(token_file)
                with httpx.Client(trust_env=False, timeout=30) as http:
                    yield Bed(session, session.plan, token, token_file, run_dir, scratch, http)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def evil_script(bed: Bed, name: str, version: bool = False) -> tuple[Path, Path]:
    """Finding 1's program: written by `nobody` into its own directory; it leaves a
    marker when anything runs it (`version`: but for `--version`, as a browser)."""
    script, marker = bed.scratch / name, bed.scratch / f"{name}.ran"
    text = "#!/bin/sh\n"
    if version:
        text += 'case "$*" in *--version*) echo "Mozilla Firefox 1.0"; exit 0;; esac\n'
    text += f"id >> {marker}\nexit 1\n"
    subprocess.run(
        [*NOBODY, "sh", "-c", f"cat > {script} && chmod 755 {script}"],
        input=text, text=True, check=True, cwd="/",
    )  # fmt: skip
    assert script.stat().st_uid == 65534
    return script, marker


# What `nobody` tries, with the standard library only (the system's python3).
AS_NOBODY = r"""
import http.client, json, socket, sys
cfg = json.loads(sys.argv[1])
out = {"requests": [], "health": {}}
def ask(host, port, method, path, body, headers):
    c = http.client.HTTPConnection(host, port, timeout=10)
    try:
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    except OSError as e:
        return None, f"{type(e).__name__}: {e}"
    finally:
        c.close()
for role, (host, port) in cfg["agents"].items():
    for method, path, body in cfg["requests"][role]:
        for label, headers in cfg["credentials"].items():
            status, text = ask(host, port, method, path, body and body.encode(), headers)
            out["requests"].append([role, method, path, label, status, text[:300]])
    out["health"][role] = ask(host, port, "GET", "/health", None, {})
try:
    open(cfg["token_file"]).read()
    out["token_file"] = "read"
except OSError as e:
    out["token_file"] = type(e).__name__
try:
    socket.create_connection(tuple(cfg["origin_control"]), timeout=5).close()
    out["origin_control"] = "connected"
except OSError as e:
    out["origin_control"] = type(e).__name__
out["satlink"] = {}
for path in cfg["satlink_sockets"]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        out["satlink"][path] = "connected"
    except OSError as e:
        out["satlink"][path] = type(e).__name__
    finally:
        s.close()
print(json.dumps(out))
"""


def test_nobody_gets_nothing_without_the_token(bed: Bed) -> None:
    script, marker = evil_script(bed, "evil")
    # Finding 1, as reported: the client runs whatever `firefox` names; a link agent
    # takes any profile; the server agent any congestion control.
    finding_1 = json.dumps(
        {"url": "https://x/", "http": "2", "host": "x", "port": 443, "firefox": str(script)}
    )
    geo = json.dumps(link_config("geo", profiles.read("geo")))
    common = [("GET", "/stats", ""), ("GET", "/state", ""), ("POST", "/stats/reset", "{}"),
              ("GET", "/nope", ""),
              ("PUT", "/config", "{}"), ("DELETE", "/stats", "")]  # fmt: skip
    # A recorded site's resolvers (client, terminal, gateway): a zone that would send
    # the client's lookups of a real name into the testbed.
    zone = {"names": {"www.example.org": str(bed.plan.gw_lan.prefix.network_address + 64)}}
    names = [("POST", "/names/start", json.dumps({"zone": zone, "cache": True})),
             ("POST", "/names/stop", "{}"), ("GET", "/names/queries?since=0", "")]  # fmt: skip
    requests = {
        "client": [*common, *names, ("POST", "/load?engine=selenium", finding_1),
                   ("POST", "/load?engine=browsertime", finding_1), ("POST", "/config", "{}")],
        "server": [*common, ("POST", "/config", json.dumps({"tcp_cc": "reno"}))],
        **{role: [*common, ("POST", "/config", geo)] for role in LINK_ROLES},
        **{role: [*common, *names, ("POST", "/config", geo)] for role in ("terminal", "gateway")},
    }  # fmt: skip
    credentials = {
        "none": {},
        "basic": {"Authorization": "Basic bm9ib2R5Om5vYm9keQ=="},
        "empty": {"Authorization": "Bearer"},
        "wrong": {"Authorization": "Bearer " + "A" * len(bed.token)},
        "prefix": {"Authorization": "Bearer " + bed.token[:-1]},
    }
    cfg = {
        "agents": {role: bed.address(role) for role in ROLES},
        "requests": requests,
        "credentials": {k: {"Content-Type": "application/json", **v}
                        for k, v in credentials.items()},
        "token_file": str(bed.token_file),
        "origin_control": [bed.plan.mgmt.address("server"), int(ORIGIN_CONTROL.split(":")[1])],
        "satlink_sockets": [str(bed.run_dir / r / "satlink.sock") for r in LINK_ROLES],
    }  # fmt: skip
    proc = subprocess.run(
        [*NOBODY, "--reset-env", "/usr/bin/python3", "-I", "-c", AS_NOBODY, json.dumps(cfg)],
        capture_output=True, text=True, timeout=300, cwd="/",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert len(out["requests"]) == sum(len(r) for r in requests.values()) * len(credentials)
    for role, method, path, label, status, text in out["requests"]:
        want = 403 if label in ("wrong", "prefix") else 401
        assert status == want, (role, method, path, label, status, text)
    for role, (status, text) in out["health"].items():
        assert status == 200, (role, text)
        health = json.loads(text)
        assert set(health) <= set(server.PUBLIC_HEALTH) and health["role"] == role
        assert bed.token not in text
    assert out["token_file"] == "PermissionError"
    assert out["origin_control"] == "ConnectionRefusedError"  # loopback of the server only
    assert set(out["satlink"].values()) == {"PermissionError"}
    # Nothing ran, nothing changed.
    assert not marker.exists()
    lan = profiles.read("lan")
    for role in LINK_ROLES:
        assert bed.agent(role).link_state().profile == "lan", role
        in_effect = bed.agent(role).health().said("satlink")["config"]
        assert in_effect["forward"]["uplink_delay_ms"] == lan.forward.uplink_delay_ms, role
    assert bed.agent("server").server_state().tcp_cc == "bbr"
    assert bed.agent("client").stats() == {"loads": 0}
    for role in ("client", "terminal", "gateway"):
        assert bed.agent(role).names_queries().total == 0, role  # no resolver ever ran
    assert (Path("/etc/netns") / bed.plan.ns("client") / "resolv.conf").read_text() == NO_DNS_SERVER
    # The token file: made 0600 for root, in a run dir others may pass through (OpenLiteSpeed's
    # workers reach the pages below it) but neither list nor write.
    st = bed.token_file.stat()
    assert (st.st_uid, st.st_mode & 0o777, bed.run_dir.stat().st_mode & 0o777) == (0, 0o600, 0o711)


def test_agents_listen_only_on_their_mgmt_address(bed: Bed) -> None:
    for role in ROLES:
        ns = bed.plan.ns(role)
        out = subprocess.run(
            ["ip", "netns", "exec", ns, "ss", "-Hlntu"], capture_output=True, text=True, check=True
        ).stdout
        local = [line.split()[4] for line in out.splitlines()]
        assert f"{bed.address(role)[0]}:{AGENT_PORT}" in local, (role, local)
        wildcard = [a for a in local if a.rsplit(":", 1)[0] in ("0.0.0.0", "*", "[::]")]
        assert not wildcard, (role, local)
        on_agent_port = [a for a in local if a.endswith(f":{AGENT_PORT}")]
        assert on_agent_port == [f"{bed.address(role)[0]}:{AGENT_PORT}"], (role, local)


REFUSED = [
    ("firefox", {"firefox": "{script}"}),
    ("ca_cert", {"ca_cert": "/etc/shadow"}),
    ("url", {"url": "file:///etc/shadow"}),
    ("url", {"url": "http://www.clarke.test/"}),
    ("url", {"url": "https://198.19.0.1/"}),
    ("url", {"url": "https://www.clarke.test:7000/"}),
    ("prefs", {"prefs": {"network.proxy.autoconfig_url": "file:///etc/shadow"}}),
    ("prefs", {"prefs": {"browser.download.dir": "/root"}}),
]


def _refused(http: httpx.Client, url: str, token: str, script: Path) -> list[str]:
    """Every REFUSED body, with both engines: each must be a 4xx naming its field."""
    problems = []
    good = {"url": f"https://www.clarke.test/{PAGE}/", "http": "2"}
    for engine in ("selenium", "browsertime"):
        for field, change in REFUSED:
            body = json.loads(json.dumps({**good, **change}).replace("{script}", str(script)))
            r = http.post(f"{url}/load?engine={engine}", json=body, headers=auth.bearer(token))
            if not (400 <= r.status_code < 500 and field in r.json().get("error", "")):
                problems.append(f"{engine} {change}: {r.status_code} {r.text[:200]}")
    return problems


def test_paths_and_programs_are_refused_and_nothing_runs(bed: Bed, tmp_path: Path) -> None:
    script, marker = evil_script(bed, "evil-with-token")
    assert _refused(bed.http, bed.plan.agent_url("client"), bed.token, script) == []
    assert bed.agent("client").stats() == {"loads": 0}
    # A client agent whose own (start-up) browser is a marker-writing script: a request
    # that got as far as starting any browser would write the marker. It serves on this
    # namespace's loopback with the testbed's CA and token.
    fake, ran = evil_script(bed, "fake-firefox", version=True)
    place = Place("netns", "client", bed.plan, tmp_path, tmp_path, bed.run_dir / "pki")
    httpd = ThreadingHTTPServer(
        ("127.0.0.1", 0), make_handler(BrowserClient(place, str(fake)), bed.token)
    )
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        assert bed.http.get(f"{url}/health").json()["ready"] is True
        assert _refused(bed.http, url, bed.token, script) == []
        assert not marker.exists() and not ran.exists()
        # The check can fail: a valid request does start the agent's browser.
        r = bed.http.post(
            f"{url}/load?engine=selenium",
            json={"url": f"https://{HOST}/{PAGE}/", "http": "2", "timeout_s": 30},
            headers=auth.bearer(bed.token),
            timeout=120,
        )
        assert r.status_code == 200 and r.json()["status"] == "failed", r.text[:300]
        assert ran.exists(), r.json()["reason"]
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert not marker.exists()


def _hold(address: tuple[str, int], data: bytes, results: dict[str, Any], key: str) -> None:
    """Send `data`, then wait for the agent to answer or close; what came back and when."""
    started = time.monotonic()
    with socket.create_connection(address, timeout=60) as s:
        s.sendall(data)
        answer = b""
        try:
            while chunk := s.recv(4096):
                answer += chunk
        except OSError as e:
            answer += f"<{type(e).__name__}>".encode()
    results[key] = (answer, time.monotonic() - started)


@pytest.mark.timing
def test_half_sent_requests_block_nothing(bed: Bed) -> None:
    """Finding 6: a POST /config with its headers and one byte of body held the agent's
    lock for ever; /config, /load and /stats/reset hung."""
    results: dict[str, Any] = {}
    threads = []
    for role in ROLES:
        head = (f"POST /config HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {bed.token}\r\n"
                "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")  # fmt: skip
        for key, data in (
            ("one byte of body", head.encode()),
            ("idle", b""),
            ("half the headers", b"POST /config HTTP/1.1\r\nHost: agent\r\n"),
        ):
            t = threading.Thread(target=_hold, args=(bed.address(role), data, results, (role, key)))
            t.start()
            threads.append(t)
    time.sleep(1)
    took: dict[str, float] = {}

    def timed(what: str, call: Any) -> Any:
        started = time.monotonic()
        out = call()
        took[what] = time.monotonic() - started
        return out

    lan = LinkConfig(name="lan", profile=profiles.read("lan"))
    for role in LINK_START_ORDER:
        timed(f"{role} /config", lambda r=role: bed.agent(r).configure(lan))
    timed(
        "server /config",
        lambda: bed.agent("server").configure(ServerConfig(tcp_cc=CongestionControl.bbr)),
    )
    for role in ROLES:
        timed(f"{role} /stats/reset", lambda r=role: bed.agent(r).reset_stats())
    result, _ = timed("client /load", lambda: bed.session.load_page(PageLoad(PAGE, "2", "bbr", 6)))
    assert result.status is Status.ok, result.reason
    slow = {k: v for k, v in took.items() if k != "client /load" and v > server.REQUEST_TIMEOUT_S}
    assert not slow, slow
    for t in threads:
        t.join(server.REQUEST_TIMEOUT_S + 30)
    assert len(results) == 3 * len(ROLES)
    for key, (answer, after) in results.items():
        # Closed without an answer (nothing was asked in full), within the timeout.
        assert answer == b"", (key, answer[:200])
        assert after <= server.REQUEST_TIMEOUT_S + 3, (key, after)


def test_a_testbed_keeps_the_browser_it_started_with(bed: Bed) -> None:
    other = Session(NetnsSubstrate(bed.plan.id), [PAGE], SessionSettings(firefox="/bin/true"))
    try:
        with pytest.raises(InputError, match="bring up a new testbed for another browser"):
            other.start("lan")
    finally:
        other.close()
    assert bed.agent("client").health().ready is True


# --- fuzzing: every body an agent is sent gets a 4xx (or, if it happens to be a valid
# request, is left out), and the agents keep serving --------------------------------------

FUZZ = settings(
    max_examples=30,
    deadline=dt.timedelta(seconds=10),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
SETUP = BrowserSetup(server_name=HOST, server_port=HTTPS_PORT)
VALID_LOAD = {"url": f"https://{HOST}/{PAGE}/", "http": "2", "connections": 6,
              "window": [1366, 768], "timeout_s": 60, "settle_ms": 250,
              "expected_objects": [{"path": f"{PAGE}/o1.jpg", "bytes": 1000}],
              "lcp_candidates": [f"{PAGE}/o1.jpg"], "prefs": {}}  # fmt: skip
LAN = profiles.read("lan").model_dump(by_alias=True, mode="json")


def _post(bed: Bed, role: str, path: str, body: bytes) -> httpx.Response:
    return bed.http.post(
        bed.plan.agent_url(role) + path,
        content=body,
        headers={**auth.bearer(bed.token), "Content-Type": "application/json"},
    )


def _refused_with(r: httpx.Response, *words: str) -> None:
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    error = r.json()["error"]
    assert all(w in error for w in words), (words, error[:300])


def _is_object(body: bytes) -> bool:
    """Whether the agent reads `body` as a JSON object (no body at all is {})."""
    if not body.strip():
        return True
    try:
        return isinstance(json.loads(body), dict)
    except (ValueError, RecursionError):
        return False


@FUZZ
@given(body=st.binary(max_size=512) | json_values.map(lambda v: json.dumps(v).encode()))
def test_fuzz_bodies_that_are_no_json_object(bed: Bed, body: bytes) -> None:
    assume(not _is_object(body))
    for role, path in [("client", "/load"), ("client", "/config"), ("terminal", "/config"),
                       ("server", "/config"), ("gateway", "/stats/reset")]:  # fmt: skip
        _refused_with(_post(bed, role, path, body))


def _mutated(valid: dict[str, Any], path: list[str | int], value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(valid))
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _leaves(value: Any, path: list[str | int]) -> Iterator[list[str | int]]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _leaves(v, [*path, k])
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from _leaves(v, [*path, i])
    else:
        yield path


LOAD_FIELDS = [*VALID_LOAD, "firefox", "ca_cert", "host", "port", "address", "binary"]


@FUZZ
@given(field=st.sampled_from(LOAD_FIELDS) | st.text(max_size=12), value=json_values)
def test_fuzz_load_requests(bed: Bed, field: str, value: Any) -> None:
    body = {**VALID_LOAD, field: value}
    try:
        LoadRequest.for_agent(body, SETUP)
    except ClarkeError:
        pass
    else:
        assume(False)  # valid: it would load a page
    loads = bed.agent("client").stats()["loads"]
    r = _post(bed, "client", "/load?engine=selenium", json.dumps(body).encode())
    _refused_with(r, field if field in NOT_IN_A_REQUEST or field in VALID_LOAD else "")
    assert bed.agent("client").stats()["loads"] == loads  # no browser started


@FUZZ
@given(path=st.sampled_from(list(_leaves(LAN, []))), value=json_values)
def test_fuzz_link_profiles(bed: Bed, path: list[str | int], value: Any) -> None:
    profile = _mutated(LAN, path, value)
    try:
        LinkProfile.model_validate(profile)
    except ValidationError:
        pass
    else:
        assume(False)  # valid: it would change the link
    r = _post(bed, "gateway", "/config", json.dumps({"name": "fuzz", "profile": profile}).encode())
    _refused_with(r, str(path[0]).rstrip("_"))


@FUZZ
@given(body=st.dictionaries(st.text(max_size=20), json_values, min_size=1, max_size=4))
def test_fuzz_link_and_server_configs(bed: Bed, body: dict[str, Any]) -> None:
    known = {"tcp_cc", "quic_cc", "quic_initial_window"}
    assume(not set(body) <= known)  # origin refuses any other key
    assume(not isinstance(body.get("profile"), dict))  # a link needs a profile object
    for role in ("terminal", "server"):
        _refused_with(_post(bed, role, "/config", json.dumps(body).encode()))


def test_agents_serve_after_the_fuzzing(bed: Bed) -> None:
    for role in ROLES:
        assert bed.agent(role).health().role == role
    lan = LinkConfig.model_validate({"name": "lan", "profile": LAN})
    for role in LINK_START_ORDER:
        assert bed.agent(role).configure(lan).state["profile"] == "lan"
    assert bed.agent("client").health().ready is True
