"""Run by tests/security/test_record_proxy.py, inside a network namespace of its own that
has only loopback (`unshare --net`); not a test itself.

    python tests/record_intrusion.py firefox|chromium WORKDIR

It serves a one-page site over TLS on 127.0.0.1:8443 (www.rec.test, its certificate from
a testbed PKI made here) and records it with `clarke site record`'s own code. While the
browser loads the page (from the page's request handler, so while the recording runs), a
process running as `nobody` does what any local user can: it finds mitmdump's port in
/proc/PID/cmdline (this recording's: a descendant of this process), tries to read its
configuration, and sends two requests through the proxy: HTTPS (CONNECT, then GET
/planted) and plain HTTP (GET /plain). It prints one JSON object: what the intruder saw,
the URLs of mitmdump's HAR and of the archive."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from clarke.browser.record import RecordOptions, Resolve, record
from clarke.tls import issue_testbed_pki
from clarke.vocab import Browser

HOST = "www.rec.test"
PORT = 8443
NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
PAGE = b"<!doctype html><html><body><p>recorded</p><img src='/a.png'></body></html>"

# The intruder: the system's Python, standard library only, as `nobody`.
INTRUDER = r"""
import json, os, socket, ssl, sys
host, recorder = sys.argv[1], sys.argv[2]
out = {"port": None, "secret_on_command_line": False, "config": None,
       "connect": None, "planted": None, "plain": None}
def descends(pid):
    # /proc is the host's: other recordings' mitmdumps (other tests, other network
    # namespaces) are there too. This recording's is a descendant of its recorder.
    while pid not in ("0", "1"):
        if pid == recorder:
            return True
        try:
            pid = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]
        except OSError:
            return False
    return False
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\0")
    except OSError:
        continue
    if not any(a.endswith("mitmdump") for a in argv) or "--listen-port" not in argv:
        continue
    if not descends(pid):
        continue
    out["port"] = int(argv[argv.index("--listen-port") + 1])
    out["secret_on_command_line"] = any("proxyauth" in a for a in argv)
    for a in argv:
        if a.startswith("confdir="):
            try:
                out["config"] = open(a[len("confdir="):] + "/config.yaml").read()
            except OSError as e:
                out["config"] = type(e).__name__
def request(path):
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
def status(sock):
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    return int(head.split()[1]) if head else None
if out["port"]:
    with socket.create_connection(("127.0.0.1", out["port"]), timeout=20) as s:
        s.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
        out["connect"] = status(s)
        if out["connect"] == 200:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            with context.wrap_socket(s, server_hostname=host) as t:
                t.sendall(request("/planted"))
                out["planted"] = status(t)
    with socket.create_connection(("127.0.0.1", out["port"]), timeout=20) as s:
        s.sendall(request(f"http://{host}/plain"))
        out["plain"] = status(s)
print(json.dumps(out))
"""


class _Site(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    intruder: dict[str, Any] | None = None
    lock = threading.Lock()

    def do_GET(self) -> None:
        if self.path == "/":
            with _Site.lock:
                if _Site.intruder is None:
                    _Site.intruder = _intrude()
        body, ctype = (PAGE, "text/html") if self.path == "/" else (b"x" * 100, "image/png")
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _intrude() -> dict[str, Any]:
    done = subprocess.run(
        [*NOBODY, "/usr/bin/python3", "-c", INTRUDER, HOST, str(os.getpid())],
        capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> int:
    browser, work = Browser(sys.argv[1]), Path(sys.argv[2])
    pki = issue_testbed_pki(work / "pki", hosts=[HOST], label="record intrusion")
    server = ThreadingHTTPServer(("127.0.0.1", PORT), _Site)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.cert, pki.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    har = work / "site.har"
    result: dict[str, Any] = {"error": None, "har": [], "archive": []}
    try:
        imported = record(
            RecordOptions(
                f"https://{HOST}/",
                work / "archive",
                resolve=(Resolve(HOST, "127.0.0.1", PORT),),
                only_resolved=True,
                upstream_ca=pki.ca_cert,
                settle_ms=500,
                timeout_s=60,
                keep_har=har,
                browser=browser,
            )
        )
        result["archive"] = [e.url for e in imported.archive.exchanges]
    except Exception as e:
        result["error"] = f"{type(e).__name__}: {e}"
    finally:
        server.shutdown()
    if har.is_file():
        entries = json.loads(har.read_text())["log"]["entries"]
        result["har"] = [[e["request"]["url"], e["response"]["status"]] for e in entries]
    result["intruder"] = _Site.intruder
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
