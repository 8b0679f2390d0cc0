"""Record a local multi-origin site through mitmproxy and import it twice: the HAR that
mitmproxy exports, and a WARC that warcio writes of the same exchanges. Both must give
the same archive (issue 33's acceptance: "A HAR and a WARC import to the same archive
for the same recorded site").

Everything stays on loopback: one HTTPS server on 127.0.0.1 answers for four host names
(by the Host header, its certificate from a testbed PKI naming them all); mitmdump
listens on 127.0.0.1 and sends every host it is asked for to that server (an addon,
tests/mitm_record_addon.py), so no resolver is asked anything."""

from __future__ import annotations

import base64
import gzip
import json
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from clarke.sites import archive
from clarke.sites.har import HarOptions, import_har
from clarke.sites.warc import WarcOptions, import_warc
from clarke.tls import issue_testbed_pki
from site_files import Flow, write_warc

pytestmark = pytest.mark.slow

ADDON = Path(__file__).parent.parent / "mitm_record_addon.py"
HOSTS = ["www.site.test", "static.site.test", "img.cdn.test", "api.other.test"]
HTML = (
    "<!doctype html><html><head><meta charset=utf-8>"
    "<link rel=stylesheet href='https://static.site.test/s.css'></head>"
    "<body><img src='https://img.cdn.test/a.png'><p>café</p></body></html>"
).encode()
# (host, path) -> (status, headers, body as the page uses it); gzip-coded on request
# where the content type is text.
SITE: dict[tuple[str, str], tuple[int, list[tuple[str, str]], bytes]] = {
    ("www.site.test", "/"): (200, [("Content-Type", "text/html; charset=utf-8")], HTML),
    ("www.site.test", "/old"): (301, [("Location", "https://www.site.test/")], b""),
    ("static.site.test", "/s.css"): (
        200,
        [("Content-Type", "text/css; charset=utf-8")],
        "body{font-family:f} p::after{content:'é'}".encode() * 40,
    ),
    ("static.site.test", "/f.woff2"): (
        200,
        [("Content-Type", "font/woff2")],
        bytes(range(256)) * 8,
    ),
    ("img.cdn.test", "/a.png"): (
        200,
        [("Content-Type", "image/png"), ("Cache-Control", "max-age=60")],
        b"\x89PNG\r\n\x1a\n" + bytes(1000),
    ),
    ("api.other.test", "/data.json?x=1&y=2"): (
        200,
        [("Content-Type", "application/json")],
        b'{"a": 1}',
    ),
}
ORDER = [f"https://{host}{path}" for host, path in SITE]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        host = (self.headers.get("Host") or "").split(":")[0]
        found = SITE.get((host, self.path))
        if found is None:
            self.send_error(404)
            return
        status, headers, body = found
        ctype = dict(headers).get("Content-Type", "")
        coded = ctype.startswith("text/") and "gzip" in self.headers.get("Accept-Encoding", "")
        wire = gzip.compress(body, mtime=0) if coded else body
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if coded:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(wire)))
        self.end_headers()
        self.wfile.write(wire)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def site_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The site on 127.0.0.1 over TLS: (port, the CA that signed its certificate)."""
    pki = issue_testbed_pki(tmp_path / "pki", hosts=HOSTS, label="site recording")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.cert, pki.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1]), pki.ca_cert
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _wait_for(port: int, ca: Path, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"mitmdump exited {proc.returncode}: {log.read_text()[-2000:]}")
        if ca.exists():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                pass
        time.sleep(0.1)
    pytest.fail(f"mitmdump did not listen on 127.0.0.1:{port} within 30 s: {log.read_text()}")


def _record(tmp_path: Path, server_port: int, server_ca: Path) -> tuple[Path, Path]:
    """Fetch the site through mitmdump: (the HAR it exported, its flows as JSON lines)."""
    mitmdump = shutil.which("mitmdump")
    if mitmdump is None:
        pytest.skip("mitmdump is not installed (ci/setup.sh installs mitmproxy 11.0.2)")
    proxy_port = _free_port()
    confdir, har, flows, log = (tmp_path / n for n in ("mitm", "site.har", "flows.jsonl", "log"))
    # fmt: off
    argv = [
        mitmdump, "--listen-host", "127.0.0.1", "--listen-port", str(proxy_port),
        "-s", str(ADDON), "--set", f"confdir={confdir}", "--set", f"hardump={har}",
        "--set", f"loopback_port={server_port}", "--set", f"flows_out={flows}",
        "--set", f"ssl_verify_upstream_trusted_ca={server_ca}",
    ]
    # fmt: on
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for(proxy_port, confdir / "mitmproxy-ca-cert.pem", proc, log)
        proxy = f"http://127.0.0.1:{proxy_port}"
        verify = ssl.create_default_context(cafile=confdir / "mitmproxy-ca-cert.pem")
        with httpx.Client(proxy=proxy, verify=verify, timeout=10) as client:
            for url in ORDER:
                assert client.get(url).status_code in (200, 301)
    finally:
        proc.send_signal(signal.SIGINT)  # mitmdump writes the HAR as it shuts down
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert har.exists(), log.read_text()[-2000:]
    return har, flows


def _as_warc(flows: Path, out: Path) -> Path:
    """The exchanges mitmproxy saw, as warcio writes them (bodies as sent)."""
    recorded = []
    for line in flows.read_text().splitlines():
        f = json.loads(line)
        recorded.append(
            Flow(
                url=f["url"],
                status=f["status"],
                headers=[(k, v) for k, v in f["headers"]],
                body=base64.b64decode(f["body"]),
                started=f["started"],
                ttfb_ms=f["ttfb_ms"],
                address=f["address"],
                version=f["http_version"],
                method=f["method"],
            )
        )
    return write_warc(out, recorded, chunked=False)


def test_a_har_and_a_warc_of_one_recorded_site_import_to_the_same_archive(
    tmp_path: Path, site_server: tuple[int, Path]
) -> None:
    har, flows = _record(tmp_path, *site_server)
    warc = _as_warc(flows, tmp_path / "site.warc.gz")
    from_har = archive.read(import_har(har, tmp_path / "from-har", HarOptions("site")).path)
    from_warc = archive.read(import_warc(warc, tmp_path / "from-warc", WarcOptions("site")).path)
    a, b = from_har.archive, from_warc.archive
    assert [e.url for e in a.exchanges] == ORDER
    assert a.content_digest() == b.content_digest()
    assert a.origins == b.origins
    assert [e.model_copy(update={"server_ttfb_ms": None}) for e in a.exchanges] == [
        e.model_copy(update={"server_ttfb_ms": None}) for e in b.exchanges
    ]
    bodies = sorted(p.name for p in (from_har.path / "bodies").iterdir())
    assert bodies == sorted(p.name for p in (from_warc.path / "bodies").iterdir())
    # What was recorded is what the server sent: bodies as the page uses them, the
    # coding kept aside, every host at the address it had (loopback), over HTTP/1.1.
    for (_, _, body), e in zip(SITE.values(), a.exchanges, strict=True):
        assert from_har.body(e) == body
        assert e.body == (archive.sha256_of(body) if body else None)
    page = a.exchanges[0]
    assert page.content_encoding == "gzip" and "café" in from_har.body(page).decode()
    assert {o.host for o in a.origins} == set(HOSTS)
    assert {(o.address, tuple(o.protocols)) for o in a.origins} == {("127.0.0.1", ("h1",))}
    # mitmproxy's HAR gives the server's wait in whole or fractional ms; the WARC has it
    # from the same timestamps.
    for x, y in zip(a.exchanges, b.exchanges, strict=True):
        assert x.server_ttfb_ms is not None and y.server_ttfb_ms is not None
        assert abs(x.server_ttfb_ms - y.server_ttfb_ms) <= 1.0
