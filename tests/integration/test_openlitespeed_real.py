"""The real OpenLiteSpeed in the server role: started with Clarke's generated
configuration in a network namespace of its own, answering HTTP/1.1 and HTTP/2 (curl)
and HTTP/3 (aioquic) from a client namespace, with the congestion control measured
(TCP: the kernel's per-connection info; QUIC: lsquic's log) and the wire bytes counted.

Runs where OpenLiteSpeed is installed (/usr/local/lsws or $OLS_SERVER_ROOT) and skips
elsewhere, in CI too: OpenLiteSpeed is not a part CI can install by itself. To get one:
`ci/openlitespeed-from-source SRC_DIR /usr/local/lsws` (docs/openlitespeed.md)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clarke.pages.build import build
from clarke.pages.models import Registry, Units
from clarke.server.openlitespeed import (
    HTTPD_CONFIG,
    OlsPlace,
    OlsSettings,
    OlsSite,
    OpenLiteSpeedRole,
    find_install,
    install_problem,
    make_server_root,
)
from clarke.tls import DEFAULT_HOST, issue_testbed_pki

pytestmark = [pytest.mark.root, pytest.mark.slow]

TESTS = Path(__file__).resolve().parents[1]
PAGE = "uniform-1m"  # eight objects of 125 kB
BIG = "single-2m"  # one 2 MB object: a connection that lives long enough to sample
SERVER_IP, CLIENT_IP = "198.18.251.1", "198.18.251.2"
PORT = 443
# curl's rate limit keeps a TCP connection open for ~1 s, so `ss` (every 100 ms) sees it


def _missing() -> str | None:
    if find_install() is None:
        return install_problem()
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "ss", "curl", "nft", "openssl"):
        if shutil.which(tool) is None:
            return (
                f"{tool} is not installed (apt-get install {'nftables' if tool == 'nft' else tool})"
            )
    return None


def _run(
    argv: list[str], check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode:
        raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr}")
    return proc


@dataclass
class Bed:
    role: OpenLiteSpeedRole
    server: str
    client: str
    ca: Path
    page: dict
    big: dict

    def curl(self, http: str, path: str) -> dict[str, str]:
        """GET over HTTP/1.1 or HTTP/2 from the client namespace: protocol, status, size."""
        flag = {"1.1": "--http1.1", "2": "--http2"}[http]
        argv = ["ip", "netns", "exec", self.client, "curl", "-sS", flag, "--cacert",
                str(self.ca), "--resolve", f"{DEFAULT_HOST}:{PORT}:{SERVER_IP}", "-o",
                "/dev/null", "-w", "%{http_version} %{response_code} %{size_download}"]  # fmt: skip
        out = _run([*argv, f"https://{DEFAULT_HOST}{path}"]).stdout.split()
        return {"http_version": out[0], "status": out[1], "bytes": out[2]}

    @contextlib.contextmanager
    def held_http1(self, path: str) -> Iterator[int]:
        """GET over HTTP/1.1 (openssl s_client) on a connection that stays open until
        the block ends: the server samples an open connection when asked for its stats,
        so its counters are final (curl closes at once, and a connection closed within
        one sampling interval of its last byte has no complete counters, by design).
        Yields the body's size."""
        argv = ["ip", "netns", "exec", self.client, "openssl", "s_client", "-quiet", "-no_ign_eof",
                "-connect", f"{SERVER_IP}:{PORT}", "-servername", DEFAULT_HOST,
                "-alpn", "http/1.1", "-CAfile", str(self.ca), "-verify_return_error"]  # fmt: skip
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        assert proc.stdin and proc.stdout
        try:
            proc.stdin.write(f"GET {path} HTTP/1.1\r\nHost: {DEFAULT_HOST}\r\n\r\n".encode())
            proc.stdin.flush()
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = proc.stdout.read1(65536)
                assert chunk, f"the connection closed before the headers: {head!r}"
                head += chunk
            head, _, body = head.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head
            m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            assert m, head
            length = int(m.group(1))
            while len(body) < length:
                chunk = proc.stdout.read1(65536)
                assert chunk, f"the connection closed after {len(body)} of {length} bytes"
                body += chunk
            yield len(body)
        finally:
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()

    def h3(self, paths: list[str]) -> dict:
        """GETs over one HTTP/3 connection (aioquic) from the client namespace."""
        argv = ["ip", "netns", "exec", self.client, sys.executable, str(TESTS / "h3client.py"),
                SERVER_IP, str(PORT), DEFAULT_HOST, str(self.ca), *paths]  # fmt: skip
        return json.loads(_run(argv).stdout)


@pytest.fixture(scope="module")
def bed() -> Iterator[Bed]:
    why = _missing()
    if why:
        pytest.skip(why)
    # Not under pytest's tmp_path: its parents are private to root, and the workers
    # (nobody) read the pages and the certificate.
    tmp = Path(tempfile.mkdtemp(prefix="clarke-ols-", dir="/var/tmp"))
    tmp.chmod(0o755)
    registry = Registry.default()
    manifest = json.loads(
        build(
            [registry.page_by_name(PAGE), registry.page_by_name(BIG)], tmp / "pages", Units.si
        ).read_text()
    )
    pki = issue_testbed_pki(tmp / "pki")
    for path in (tmp / "pages", tmp / "pki"):
        for p in (path, *path.rglob("*")):
            p.chmod(0o755 if p.is_dir() else 0o644)
    root = make_server_root(find_install(), tmp / "root")  # type: ignore[arg-type]
    tag = f"clkolsr{os.getpid() % 100000}"
    server, client = f"{tag}-s", f"{tag}-c"
    site = OlsSite(
        pages_dir=tmp / "pages",
        cert_file=pki.cert,
        key_file=pki.key,
        listen_address=SERVER_IP,
        port=PORT,
        access_log=root / "logs" / "access.log",
        error_log=root / "logs" / "error.log",
        state_dir=root / "tmp" / "state",
    )
    where = OlsPlace(server_root=root, netns=server)
    role = OpenLiteSpeedRole(site, OlsSettings("cubic", "cubic"), where)
    try:
        for ns in (server, client):
            _run(["ip", "netns", "add", ns])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        _run(["ip", "-n", server, "link", "add", "olsr0", "type", "veth", "peer", "name",
              "olsr1", "netns", client])  # fmt: skip
        _run(["ip", "-n", server, "addr", "add", f"{SERVER_IP}/30", "dev", "olsr0"])
        _run(["ip", "-n", client, "addr", "add", f"{CLIENT_IP}/30", "dev", "olsr1"])
        _run(["ip", "-n", server, "link", "set", "olsr0", "up"])
        _run(["ip", "-n", client, "link", "set", "olsr1", "up"])
        role.start()
        pages = {p["name"]: p for p in manifest["pages"]}
        yield Bed(role, server, client, pki.ca_cert, pages[PAGE], pages[BIG])
    finally:
        role.stop()
        for ns in (server, client):
            _run(["ip", "netns", "del", ns], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def _objects(page: dict) -> list[tuple[str, int]]:
    return [(f"/{o['path']}", int(o["bytes"])) for o in page["objects"]]


def test_h1_h2_h3_answered_with_the_right_protocol(bed: Bed) -> None:
    health = bed.role.health()["openlitespeed"]
    assert health["listening_tcp"] and health["listening_udp"], health
    assert re.fullmatch(r"\d+\.\d+(\.\d+)*", health["version"] or ""), health
    bed.role.reset_stats()
    path, size = _objects(bed.page)[0]
    for http, version in (("1.1", "1.1"), ("2", "2")):
        got = bed.curl(http, path)
        assert got == {"http_version": version, "status": "200", "bytes": str(size)}, got
    h3 = bed.h3([p for p, _ in _objects(bed.page)])
    assert h3["alpn"] == "h3", h3
    for resp, (p, n) in zip(h3["responses"], _objects(bed.page), strict=True):
        assert (resp["path"], resp["status"], resp["body_bytes"]) == (p, 200, n), resp
        assert "no-store" in resp["headers"].get("cache-control", ""), resp["headers"]
        assert "content-encoding" not in resp["headers"], resp["headers"]
    stats = bed.role.stats()
    by_protocol: dict[str, list[dict]] = {}
    for rec in stats["connections"]:
        by_protocol.setdefault(rec["protocol"], []).append(rec)
    assert sorted(by_protocol) == ["h1", "h2", "h3"], stats
    quic = by_protocol["h3"]
    assert len(quic) == 1 and quic[0]["requests"] == 8, quic
    assert quic[0]["peer"] == f"{CLIENT_IP}:{h3['local_port']}", (quic, h3)
    assert quic[0]["app_bytes_sent"] == sum(n for _, n in _objects(bed.page))
    # Every key the role writes is one this build's configuration parser knows (a key
    # it does not know is dropped with this line, and its default applies).
    errors = bed.role.site.error_log.read_text(errors="replace")
    assert "Not support [" not in errors, [ln for ln in errors.splitlines() if "Not support" in ln]


def _measure(bed: Bed, tcp: str, quic: str) -> tuple[dict, dict]:
    """One HTTP/1.1 connection, open while the stats are read, and one HTTP/3
    connection; their records."""
    bed.role.reset_stats()
    path, size = _objects(bed.big)[0]
    with bed.held_http1(path) as got:
        assert got == size
        h3 = bed.h3([path])
        assert h3["alpn"] == "h3" and h3["responses"][0]["body_bytes"] == size, h3
        stats = bed.role.stats()
    tcp_recs = [r for r in stats["connections"] if r["protocol"] == "h1"]
    quic_recs = [r for r in stats["connections"] if r["protocol"] == "h3"]
    assert len(tcp_recs) == 1 and len(quic_recs) == 1, stats
    return tcp_recs[0], quic_recs[0]


@pytest.mark.parametrize("algo", ["cubic", "bbr"])
def test_measured_cc_matches_the_requested_one(bed: Bed, algo: str) -> None:
    if algo not in Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text():
        pytest.skip(f"this kernel has no {algo} for TCP (modprobe tcp_{algo})")
    bed.role.configure({"tcp_cc": algo, "quic_cc": algo})
    tcp, quic = _measure(bed, algo, algo)
    assert (tcp["cc"], tcp["cc_source"]) == (algo, "kernel"), tcp
    assert (quic["cc"], quic["cc_source"]) == (algo, "lsquic log"), quic
    size = int(bed.big["objects"][0]["bytes"])
    for rec in (tcp, quic):
        # wire bytes: TLS records or QUIC packets (retransmissions included): more than
        # the body, and within reason
        assert size < rec["wire_bytes_sent"] < size * 3, rec
        assert rec["ip_bytes_estimate"] > rec["wire_bytes_sent"] and rec["wire_packets_sent"] > 0
    lines = quic["transport"]["quic"]["cc_lines"]
    assert set(lines) == {algo}, quic["transport"]


def test_a_wrong_quic_cc_is_detected(bed: Bed) -> None:
    """quicCongestionCtrl 3 (lsquic's adaptive controller) written by hand where Clarke
    asked for BBR: the measurement says adaptive, not bbr."""
    bed.role.configure({"quic_cc": "bbr"})
    conf = bed.role.server_root / HTTPD_CONFIG
    text = conf.read_text()
    assert re.search(r"^\s*quicCongestionCtrl\s+2$", text, re.MULTILINE), text
    conf.write_text(re.sub(r"(quicCongestionCtrl\s+)2", r"\g<1>3", text))
    old = bed.role.pid()
    try:
        bed.role._ctl("restart")
        bed.role._wait_listening("restart with quicCongestionCtrl 3", old_pid=old)
        _, quic = _measure(bed, "cubic", "bbr")
        assert quic["cc"] == "adaptive" and quic["cc_source"] == "lsquic log", quic
        assert bed.role.settings.quic_cc == "bbr"  # what was asked for: not what ran
    finally:
        bed.role.configure({"quic_cc": "cubic"})  # rewrites the configuration, restarts
