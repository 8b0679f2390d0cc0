"""origin, Clarke's web server, given requests from a fuzzer (issue 21): HTTP/1.1 over TLS
as a browser would reach it, and its control endpoint. Every answer is a 4xx (or a
file of its page root for a well-formed GET), nothing outside the root is ever served,
and origin keeps serving. On loopback: origin's parsing does not depend on the link."""

from __future__ import annotations

import datetime as dt
import json
import re
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clarke.server.origin import origin_binary
from clarke.tls import DEFAULT_HOST, issue_testbed_pki
from conftest import free_port, need

pytestmark = [pytest.mark.slow]

SECRET = b"clarke-fuzz-secret-outside-the-root"
INDEX = b"<!doctype html><title>fuzz</title><p>hello</p>\n"
FUZZ = settings(
    max_examples=50,
    deadline=dt.timedelta(seconds=10),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@dataclass
class Origin:
    port: int
    control: str
    ca: Path
    proc: subprocess.Popen[bytes]
    http: httpx.Client  # for the control endpoint


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Origin]:
    binary = origin_binary()
    need(binary is not None, "origin is not built (ci/build.sh)")
    assert binary is not None
    base = tmp_path_factory.mktemp("origin-fuzz")
    root = base / "root"
    (root / "dir").mkdir(parents=True)
    (root / "index.html").write_bytes(INDEX)
    (root / "dir" / "a.txt").write_bytes(b"a\n")
    (base / "secret.txt").write_bytes(SECRET)  # next to the root: never to be served
    (root / "link.txt").symlink_to(base / "secret.txt")  # nor through a link in the root
    (root / "up").symlink_to(base)
    pki = issue_testbed_pki(base / "pki", [DEFAULT_HOST])
    port, control = free_port(), f"127.0.0.1:{free_port()}"
    log = (base / "origin.log").open("wb")
    proc = subprocess.Popen(
        [str(binary), "--root", str(root), "--listen", f"127.0.0.1:{port}",
         "--cert", str(pki.cert), "--key", str(pki.key), "--control", control,
         "--cache-mb", "0"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (base / "origin.log").read_text()
            try:
                httpx.get(f"http://{control}/health", trust_env=False, timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "origin did not start"
                time.sleep(0.1)
        with httpx.Client(trust_env=False, timeout=10) as http:
            yield Origin(port, control, pki.ca_cert, proc, http)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def exchange(o: Origin, data: bytes, first: float = 3, idle: float = 0.3) -> bytes:
    """`data` over TLS (ALPN http/1.1), and what origin answers: until it closes the
    connection, or, once it answered, stays silent for `idle` seconds (a kept-alive
    connection), or answers nothing for `first` seconds (it waits for more of the
    request: this side closes rather than wait for origin's header-read timeout). A
    half-close would not do: hyper drops the connection, answer and all, when it reads
    the end first."""
    ctx = ssl.create_default_context(cafile=str(o.ca))
    ctx.set_alpn_protocols(["http/1.1"])
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname=DEFAULT_HOST)
    with socket.create_connection(("127.0.0.1", o.port), timeout=10) as raw:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                raw.sendall(outgoing.read())
                chunk = raw.recv(65536)
                assert chunk, "origin closed during the handshake"
                incoming.write(chunk)
        raw.sendall(outgoing.read())
        if data:
            tls.write(data)
            raw.sendall(outgoing.read())
        answer = b""
        raw.settimeout(first)
        while True:
            try:
                chunk = raw.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            incoming.write(chunk)
            try:
                while out := tls.read(65536):
                    answer += out
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break
            if answer:
                raw.settimeout(idle)
    return answer


def statuses(answer: bytes) -> list[int]:
    """The status of every response in `answer` (pipelined requests get several)."""
    out = []
    for line in answer.split(b"\r\n"):
        if line.startswith(b"HTTP/1.") and len(line) >= 12 and line[9:12].isdigit():
            out.append(int(line[9:12]))
    return out


def check(answer: bytes) -> None:
    assert SECRET not in answer, answer[:300]
    if answer:
        codes = statuses(answer)
        assert codes, answer[:300]
        assert all(c < 500 for c in codes), answer[:300]


token = st.text(
    st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_"), max_size=12
)
segment = st.sampled_from(
    ["..", ".", "", "%2e%2e", "%2E%2E", ".%2e", "%2f", "%5c", "%00", "%", "%zz", "%c0%af",
     "index.html", "dir", "a.txt", "secret.txt", "..%2fsecret.txt", "\\..\\secret.txt"]
) | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=10)  # fmt: skip
target = (
    st.lists(segment, max_size=6).map(lambda s: "/" + "/".join(s))
    | st.sampled_from(["*", "http://www.clarke.test/../secret.txt", "//secret.txt", "", "/?a=b"])
    | st.text(max_size=30)
)
method = st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "CONNECT",
                          "PATCH", "get", "G\x00T"]) | token  # fmt: skip
version = st.sampled_from(
    ["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/0.9", "HTTP/1.1x", "", "HTTP/9"]
)
header = st.tuples(
    st.sampled_from(["Host", "Content-Length", "Transfer-Encoding", "Connection", "Range",
                     "Expect", "Upgrade", "If-None-Match"]) | token,
    st.sampled_from(["chunked", "-1", "0", "99999999999999999999", "close", "100-continue",
                     "bytes=0-1,-1", "h2c", "www.clarke.test"]) | st.text(max_size=20),
)  # fmt: skip


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    line = f"{draw(method)} {draw(target)} {draw(version)}"
    headers = [f"{k}: {v}" for k, v in draw(st.lists(header, max_size=6))]
    head = "\r\n".join([line, *headers]) + "\r\n\r\n"
    body = draw(st.binary(max_size=64))
    return head.encode("utf-8", errors="surrogatepass") + body


@FUZZ
@given(data=requests() | st.binary(max_size=1024).map(lambda b: b + b"\r\n\r\n"))
def test_fuzz_http11_over_tls(origin: Origin, data: bytes) -> None:
    check(exchange(origin, data))


@FUZZ
@given(path=st.lists(segment, min_size=1, max_size=6).map(lambda s: "/" + "/".join(s)))
def test_fuzz_paths_never_leave_the_root(origin: Origin, path: str) -> None:
    request = f"GET {path} HTTP/1.1\r\nHost: www.clarke.test\r\nConnection: close\r\n\r\n"
    answer = exchange(origin, request.encode())
    check(answer)
    assert statuses(answer), answer[:200]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=8,
)
KNOWN = {"tcp_cc", "quic_cc", "quic_initial_window"}


@FUZZ
@given(body=st.binary(max_size=256) | json_values.map(lambda v: json.dumps(v).encode()))
def test_fuzz_control_endpoint(origin: Origin, body: bytes) -> None:
    base = f"http://{origin.control}"
    r = origin.http.post(f"{base}/config", content=body)
    try:
        value = json.loads(body)
    except ValueError:
        value = None
    if isinstance(value, dict) and set(value) <= KNOWN:
        assert r.status_code in (200, 400), r.text  # maybe a valid change
    else:
        assert r.status_code == 400, (body[:100], r.status_code, r.text)
    for method, path in [("PUT", "/config"), ("GET", "/config"), ("POST", "/health")]:
        other = origin.http.request(method, base + path, content=body)
        assert other.status_code == 405, (method, path, other.status_code)


def test_a_refused_request_keeps_its_connection_for_the_next(origin: Origin) -> None:
    """A request the control endpoint refuses before its body arrived (PUT /config:
    405) leaves its connection usable: the body is read, and the next request on the
    connection is answered. Before, origin closed a connection whose body it had not
    read, and a client that had sent its next request on it saw the connection cut (a
    loaded CI run's fuzzing did)."""
    host, port = origin.control.rsplit(":", 1)
    body = b'{"tcp_cc": "bbr"}'
    head = f"PUT /config HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n\r\n"
    health = f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(head.encode())
        time.sleep(0.3)  # origin answers the head alone
        s.sendall(body + health.encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", answer) == [b"405", b"200"], answer[:600]


def test_origin_serves_after_the_fuzzing(origin: Origin) -> None:
    assert origin.proc.poll() is None
    answer = exchange(origin, b"GET /index.html HTTP/1.1\r\nHost: www.clarke.test\r\n\r\n")
    assert statuses(answer) == [200] and answer.endswith(INDEX), answer[:300]
    health = httpx.get(f"http://{origin.control}/health", trust_env=False, timeout=10)
    assert health.status_code == 200 and health.json()["name"] == "origin"


def test_links_out_of_the_root_are_not_followed(origin: Origin) -> None:
    for path in ("/link.txt", "/up/secret.txt"):
        request = f"GET {path} HTTP/1.1\r\nHost: www.clarke.test\r\nConnection: close\r\n\r\n"
        answer = exchange(origin, request.encode())
        assert statuses(answer) == [404] and SECRET not in answer, (path, answer[:300])


def _closed_by_peer(conn: socket.socket, deadline: float) -> bool:
    """Reads until the peer closes (end of stream or reset): True; False if the deadline
    passes first."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        conn.settimeout(left)
        try:
            if conn.recv(65536) == b"":  # anything else (a TLS alert) is read past
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def test_silent_and_half_handshaken_connections_are_closed(origin: Origin) -> None:
    """A connection that sends nothing, and one that sends half a TLS ClientHello, are
    closed by origin within its handshake timeout (20 s), not held for ever."""
    silent = socket.create_connection(("127.0.0.1", origin.port), timeout=10)
    half = socket.create_connection(("127.0.0.1", origin.port), timeout=10)
    deadline = time.monotonic() + 40
    try:
        half.sendall(bytes.fromhex("16030100c8010000c40303"))  # a ClientHello's first bytes
        assert _closed_by_peer(silent, deadline), "a silent connection was held open"
        assert _closed_by_peer(half, deadline), "a half-sent handshake was held open"
    finally:
        silent.close()
        half.close()
    assert origin.proc.poll() is None
