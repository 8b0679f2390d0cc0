"""origin for real, across two network namespaces joined by a veth pair (root).

The server namespace runs origin with the testbed's PKI (clarke.tls); the client
namespace fetches a 2 MB object with curl over HTTP/1.1 and HTTP/2 and with h3get over
HTTP/3, and every copy must be byte-identical. `ss -ti` in the server's namespace must
show the requested TCP congestion control, before and after a POST /config, and the
control endpoint (bound to the server namespace's loopback, never the measured path)
must report per-connection protocol, congestion control and wire bytes. Namespaces and
processes are removed in teardown whatever happens.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clarke.tls import DEFAULT_HOST, issue_testbed_pki
from conftest import need
from processes import ended

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
ORIGIN_DIR = REPO / "origin"
RELEASE = ORIGIN_DIR / "target" / "release"
SERVER_IP = "198.19.250.1"
CLIENT_IP = "198.19.250.2"
CONTROL = "127.0.0.1:9780"
BIG = 2_000_000


def _run(
    argv: list[str], check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    print("$", " ".join(argv))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def _ns(ns: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run(["ip", "netns", "exec", ns, *argv], check=check)


def _our_namespaces() -> list[str]:
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith("clarket-")]


@pytest.fixture(scope="session")
def binaries() -> tuple[Path, Path]:
    """origin and h3get from origin/target/release, built if missing."""
    origin, h3get = RELEASE / "origin", RELEASE / "h3get"
    if not (origin.exists() and h3get.exists()):
        need(shutil.which("cargo") is not None, "cargo is needed to build origin")
        _run(
            [
                "cargo",
                "build",
                "--release",
                "--locked",
                "--manifest-path",
                str(ORIGIN_DIR / "Cargo.toml"),
            ],
            timeout=1800,
        )
    return origin, h3get


def _h3get(bed: Bed, path: str) -> subprocess.CompletedProcess[str]:
    """h3get of `path` from the client's namespace, trusting the testbed's CA."""
    return _ns(bed.client_ns, str(bed.h3get), "--cacert", str(bed.pki_ca),
               "--connect", f"{SERVER_IP}:443", f"https://{DEFAULT_HOST}{path}")  # fmt: skip


@dataclass
class Bed:
    server_ns: str
    client_ns: str
    origin: subprocess.Popen[str]
    h3get: Path
    pki_ca: Path
    big_sha: str
    tmp: Path

    def control(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        argv = ["curl", "-sS", "-X", method, "-w", "\n%{http_code}", f"http://{CONTROL}{path}"]
        if body is not None:
            argv += ["-H", "content-type: application/json", "--data", json.dumps(body)]
        out = _ns(self.server_ns, *argv).stdout
        text, _, code = out.rpartition("\n")
        return int(code), json.loads(text)

    def curl(self, version: str, path: str, dest: Path) -> tuple[str, int]:
        out = _ns(
            self.client_ns,
            "curl",
            "-sS",
            "--fail",
            version,
            "--cacert",
            str(self.pki_ca),
            "--resolve",
            f"{DEFAULT_HOST}:443:{SERVER_IP}",
            "-o",
            str(dest),
            "-w",
            "%{http_version} %{size_download}",
            f"https://{DEFAULT_HOST}{path}",
        ).stdout.split()
        return out[0], int(out[1])

    def ss(self) -> str:
        return _ns(self.server_ns, "ss", "-tin", "state", "established", "( sport = :443 )").stdout


@pytest.fixture
def bed(tmp_path: Path, binaries: tuple[Path, Path]) -> Iterator[Bed]:
    need(os.geteuid() == 0, "needs root (network namespaces)")
    for tool in ("ip", "ss", "curl"):
        need(shutil.which(tool) is not None, f"{tool} is not installed (Debian: iproute2, curl)")
    tag = f"{os.getpid():x}"
    server_ns, client_ns = f"clarket-{tag}-srv", f"clarket-{tag}-cli"
    origin_proc: subprocess.Popen[str] | None = None
    try:
        for ns in (server_ns, client_ns):
            _run(["ip", "netns", "add", ns])
            _ns(ns, "ip", "link", "set", "lo", "up")
        _run(
            [
                "ip",
                "link",
                "add",
                "o0",
                "netns",
                server_ns,
                "type",
                "veth",
                "peer",
                "name",
                "o1",
                "netns",
                client_ns,
            ]
        )
        _ns(server_ns, "ip", "addr", "add", f"{SERVER_IP}/24", "dev", "o0")
        _ns(client_ns, "ip", "addr", "add", f"{CLIENT_IP}/24", "dev", "o1")
        _ns(server_ns, "ip", "link", "set", "o0", "up")
        _ns(client_ns, "ip", "link", "set", "o1", "up")
        available = _ns(
            server_ns, "cat", "/proc/sys/net/ipv4/tcp_available_congestion_control"
        ).stdout.split()
        need(
            {"bbr", "reno"} <= set(available),
            f"the kernel lacks bbr or reno (available: {available})",
        )

        pki = issue_testbed_pki(tmp_path / "pki", label="origin test")
        root = tmp_path / "root"
        (root / "img").mkdir(parents=True)
        big = os.urandom(BIG)
        (root / "img" / "big.jpg").write_bytes(big)
        (root / "index.html").write_text("<!doctype html><p>clarke</p>\n")
        argv = [
            "ip",
            "netns",
            "exec",
            server_ns,
            str(binaries[0]),
            "--root",
            str(root),
            "--listen",
            f"{SERVER_IP}:443",
            "--plain-listen",
            f"{SERVER_IP}:80",
            "--cert",
            str(pki.cert),
            "--key",
            str(pki.key),
            "--control",
            CONTROL,
            "--tcp-cc",
            "bbr",
            "--quic-cc",
            "bbr",
            "--log",
            str(tmp_path / "origin.log"),
        ]
        print("$", " ".join(argv))
        stderr = tmp_path / "origin.stderr"
        with stderr.open("w") as err_file:
            origin_proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err_file, text=True)
        assert origin_proc.stdout is not None
        line = origin_proc.stdout.readline()
        assert "listening" in line, f"origin did not start: {line} {stderr.read_text()}"
        yield Bed(
            server_ns,
            client_ns,
            origin_proc,
            binaries[1],
            pki.ca_cert,
            hashlib.sha256(big).hexdigest(),
            tmp_path,
        )
    finally:
        if origin_proc is not None:
            ended(origin_proc)
            if origin_proc.stdout is not None:
                origin_proc.stdout.close()
        for ns in (server_ns, client_ns):
            _run(["ip", "netns", "del", ns], check=False)
    assert not [n for n in _our_namespaces() if n.startswith(f"clarket-{tag}-")]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _hold_tcp(bed: Bed) -> subprocess.Popen[str]:
    """A client-side TCP connection to port 443 held open for ss to see."""
    code = (
        "import socket,sys,time;"
        f"s=socket.create_connection(('{SERVER_IP}',443));"
        "print('up',flush=True);sys.stdin.read()"
    )
    p = subprocess.Popen(
        ["ip", "netns", "exec", bed.client_ns, "python3", "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "up"
    return p


def _ss_cc(bed: Bed) -> str:
    """Wait until origin has set the congestion control, then return ss's line."""
    for _ in range(50):
        out = bed.ss()
        if "bbr" in out or "reno" in out:
            return out
        time.sleep(0.05)
    return bed.ss()


def test_origin_across_namespaces(bed: Bed) -> None:
    code, health = bed.control("GET", "/health")
    assert code == 200 and health["settings"] == {
        "tcp_cc": "bbr",
        "quic_cc": "bbr",
        "quic_initial_window": None,
        "scheduler": "round-robin",
    }

    # h1 and h2 with curl; the 2 MB object arrives byte-identical.
    for flag, want in (("--http1.1", "1.1"), ("--http2", "2")):
        dest = bed.tmp / f"big-{want}.jpg"
        version, size = bed.curl(flag, "/img/big.jpg", dest)
        assert (version, size) == (want, BIG)
        assert _sha(dest) == bed.big_sha
    plain = _ns(bed.client_ns, "curl", "-sS", "--fail", f"http://{SERVER_IP}/").stdout
    assert "clarke" in plain

    # h3 with h3get.
    out = _h3get(bed, "/img/big.jpg").stdout
    h3 = json.loads(out)
    assert h3["protocol"] == "h3"
    assert (h3["first"]["status"], h3["first"]["bytes"], h3["first"]["sha256"]) == (
        200,
        BIG,
        bed.big_sha,
    )

    # ss in the server's namespace shows the requested TCP algorithm.
    holder = _hold_tcp(bed)
    try:
        assert " bbr " in f" {_ss_cc(bed)} ".replace("\t", " ")
    finally:
        holder.communicate("")

    # Stats: protocol, cc and wire bytes per connection.
    conns: list[dict] = []
    for _ in range(100):
        conns = bed.control("GET", "/stats")[1]["connections"]
        if len([c for c in conns if not c["open"]]) >= 5:
            break
        time.sleep(0.05)
    big_conns = {c["protocol"]: c for c in conns if c["app_bytes_sent"] == BIG}
    assert set(big_conns) == {"h1", "h2", "h3"}, conns
    assert big_conns["h3"]["cc"] == "bbr"
    for proto, c in big_conns.items():
        assert c["cc"] == "bbr", c
        assert c["peer"].startswith(CLIENT_IP), c
        assert BIG < c["wire_bytes_sent"] < BIG * 1.3, (proto, c)
    assert big_conns["h3"]["transport"]["quic"]["cwnd_bytes"] > 0

    # Change the TCP algorithm between runs; unknown ones are refused.
    code, err = bed.control("POST", "/config", {"tcp_cc": "vegas"})
    assert code == 400 and "vegas" in err["error"]
    code, cfg = bed.control("POST", "/config", {"tcp_cc": "reno", "quic_cc": "newreno"})
    assert code == 200 and cfg["settings"]["tcp_cc"] == "reno"
    holder = _hold_tcp(bed)
    try:
        assert " reno " in f" {_ss_cc(bed)} ".replace("\t", " ")
    finally:
        holder.communicate("")
    _h3get(bed, "/index.html")
    time.sleep(0.2)
    conns = bed.control("GET", "/stats")[1]["connections"]
    assert conns[-1]["protocol"] == "h3" and conns[-1]["cc"] == "newreno", conns[-1]

    code, reset = bed.control("POST", "/stats/reset")
    assert code == 200 and reset["removed"] >= 6
    log = (bed.tmp / "origin.log").read_text()
    assert log.startswith("# origin ") and '"event":"conn_closed"' in log
