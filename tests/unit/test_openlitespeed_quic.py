"""HTTP/3 measurements for OpenLiteSpeed: lsquic's log lines read into connections and
their congestion controller, the nftables counters, and both joined into the role's
connection records. The log lines have the shape OpenLiteSpeed 1.9.1 (lsquic 4.8.2)
wrote in a run here (tests/integration/test_openlitespeed_real.py runs the real one)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from clarke.server.openlitespeed import OlsSettings, stats, tcp
from clarke.server.openlitespeed.quic import (
    QuicWireCounter,
    merge_by_peer,
    parse_lsquic_log,
    read_new_lines,
)

T = "2026-11-23 22:09:28.5"


def _lines(cid: str, peer: str, modules: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    out = [
        f"{T}11445 [DEBUG] [QUIC:{cid}] mini-conn: connection to 198.18.250.1:443 from {peer}",
        f"{T}11500 [DEBUG] [QUIC:{cid}] handshake: ... ",
        f"{T}45520 [DEBUG] [QUIC:{cid}-0] stream: read 45 bytes",
    ]
    for m in modules:
        out += [
            f"{T}45564 [INFO] [QUIC:{cid}] {m}: initialized",
            f"{T}48433 [DEBUG] [QUIC:{cid}] {m}: lsquic_{m}_was_quiet({m}, 4915028349)",
        ]
    return out + list(extra)


def test_the_congestion_controller_of_each_connection() -> None:
    lines = [
        "2026-11-23 22:09:14.906784 [NOTICE] [25128] chroot is disabled.",
        *_lines("EC7DDDD0F57831CF", "198.18.250.2:45444", ["cubic"]),
        *_lines("6C501308792525AA", "198.18.250.2:41607", ["bbr"]),
        *_lines(
            "0A0B0C0D0E0F1011",
            "198.18.250.2:50000",
            ["cubic", "bbr", "adaptive-cc"],
            [
                f"{T}16436 [INFO] [QUIC:0A0B0C0D0E0F1011] sendctl: srtt is 21245 usec, which is "
                "greater than the threshold of 1500 usec: select BBRv1 congestion controller"
            ],
        ),
        *_lines("1111111111111111", "198.18.250.2:50001", []),  # no cc line (yet)
    ]
    by_peer, unknown = merge_by_peer(parse_lsquic_log(lines))
    assert unknown == []
    got = {peer: (c.cc, c.selected) for peer, c in by_peer.items()}
    assert got == {
        "198.18.250.2:45444": ("cubic", None),
        "198.18.250.2:41607": ("bbr", None),
        "198.18.250.2:50000": ("adaptive", "bbr"),
        "198.18.250.2:50001": (None, None),
    }
    assert by_peer["198.18.250.2:45444"].view()["cc_lines"] == {"cubic": 2}


def test_a_retry_is_counted_for_its_client() -> None:
    """Lines of OpenLiteSpeed 1.9.1 here (docs/fidelity.md): Firefox's first Initial
    lacked the start of its ClientHello, lsquic sent a Retry, the client came back."""
    cid, peer = "1984F7", "198.18.0.2:48758"
    arrival = f"{T}43542 [DEBUG] [QUIC:{cid}] mini-conn: connection to 198.18.2.2:443 from {peer}"
    lines = [
        arrival,
        f"{T}43649 [DEBUG] [QUIC:{cid}] mini-conn: Peer not validated and do not have "
        "transport parameters on the first tick: retry",
        f"{T}43785 [DEBUG] [QUIC:] event: TX stateless retry packet, size 86",
        f"{T}75624 [DEBUG] [QUIC:{cid}] mini-conn: peer address validated (odcid)",
        arrival,
        f"{T}75634 [DEBUG] [QUIC:{cid}] bbr: initialized",
    ]
    by_peer, _ = merge_by_peer(parse_lsquic_log(lines))
    assert by_peer[peer].view()["retries"] == 1 and by_peer[peer].cc == "bbr"
    (plain,) = parse_lsquic_log(_lines("AB", "198.18.0.2:1", ["cubic"]))
    assert plain.view()["retries"] == 0


def test_a_connection_with_both_controllers_and_no_adaptive_line_is_not_guessed() -> None:
    (conn,) = parse_lsquic_log(_lines("AB", "198.18.0.2:1", ["cubic", "bbr"]))
    assert conn.cc is None


def test_read_new_lines_from_an_offset_and_after_truncation(tmp_path: Path) -> None:
    log = tmp_path / "error.log"
    log.write_text("a\nb\npartial")
    lines, end, restarted = read_new_lines(log, 0)
    assert (lines, end, restarted) == (["a", "b"], 4, False)
    log.write_text("c\n")  # emptied and written again: shorter than the offset
    assert read_new_lines(log, end) == (["c"], 2, True)
    assert read_new_lines(tmp_path / "none", 7) == ([], 7, False)


def _log(peer_port: int, version: str = "HTTP/1.1", path: str = "/a.jpg") -> stats.LogLine:
    line = stats.parse_log_line(
        f'["clarke"] 1795471768550 198.18.250.2 {peer_port} "GET {path} {version}" '
        f"200 125000 0 81407"
    )
    assert line is not None
    return line


def test_access_log_lines_with_the_virtual_host_prefix() -> None:
    line = _log(45444)
    assert (line.addr, line.port, line.protocol, line.body_bytes) == (
        "198.18.250.2",
        45444,
        "h1",
        125000,
    )
    assert stats.parse_log_line('1 198.18.0.2 5 "GET / HTTP/2" 200 1 1 1') is not None


def test_http3_records_take_the_measured_cc_and_wire_bytes() -> None:
    """OpenLiteSpeed 1.9.1 logs HTTP/3 requests as HTTP/1.1: the QUIC peer set makes
    them h3; cc from lsquic's log, wire bytes from the counters."""
    logs, _ = merge_by_peer(parse_lsquic_log(_lines("EC", "198.18.250.2:45444", ["bbr"])))
    wire = {"198.18.250.2:45444": {"sent_packets": 100, "sent_bytes": 130000}}
    lines = [_log(45444), _log(45444, path="/b.jpg"), _log(50000, version="HTTP/2")]
    records, notes = stats.connection_records(
        [], lines, OlsSettings("cubic", "cubic"), "198.18.250.1:443", logs, wire
    )
    quic = [r for r in records if r["protocol"] == "h3"]
    assert len(quic) == 1 and quic[0]["requests"] == 2
    q = quic[0]
    assert (q["cc"], q["cc_source"]) == ("bbr", "lsquic log")  # measured, not the cubic asked
    assert q["ip_bytes_estimate"] == 130000 and q["wire_packets_sent"] == 100
    assert q["wire_bytes_sent"] == 130000 - 28 * 100  # UDP payload: IPv4 20 + UDP 8
    assert any("logged as HTTP/1.1" in n for n in notes)
    (h2,) = [r for r in records if r["protocol"] == "h2"]
    assert h2["cc_source"] == "configured"  # TCP without a sample stays configured
    # no log evidence: the configured algorithm, and a note says so
    records, notes = stats.connection_records(
        [], [_log(1, version="HTTP/3")], OlsSettings("cubic", "bbr"), "x:443", {}, {}
    )
    assert (records[0]["cc"], records[0]["cc_source"]) == ("bbr", "configured")
    assert "wire_bytes_sent" not in records[0]
    assert any("configured" in n for n in notes)


def test_the_counter_ruleset_counts_per_client_socket() -> None:
    rules = QuicWireCounter(8443).ruleset()
    assert "table inet clarke_quic_8443" in rules
    assert "udp sport 8443 update @out4 { ip daddr . udp dport }" in rules
    assert "udp dport 8443 update @in4 { ip saddr . udp sport }" in rules
    assert rules.count("counter") == 4 and "flags dynamic" in rules


@pytest.mark.root
def test_the_counters_for_real(tmp_path: Path) -> None:
    """In a namespace of its own: UDP datagrams from the port are counted per peer,
    with IP and UDP headers; reset empties the counts."""
    if os.geteuid() != 0 or not shutil.which("nft"):
        pytest.skip("needs root and nft (apt-get install nftables)")
    ns = f"clkq{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        counter = QuicWireCounter(4433, netns=ns)
        counter.install()
        send = (
            "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
            "s.bind(('127.0.0.1', 4433)); "
            "[s.sendto(b'x' * 100, ('127.0.0.1', 5555)) for _ in range(3)]"
        )
        subprocess.run(["ip", "netns", "exec", ns, "python3", "-c", send], check=True)
        got = counter.read()
        assert got["127.0.0.1:5555"]["sent_packets"] == 3
        assert got["127.0.0.1:5555"]["sent_bytes"] == 3 * (100 + 28)
        counter.reset()
        assert counter.read() == {} and counter.last_error is None
        counter.install()  # again: replaces the table
        listed = subprocess.run(
            ["ip", "netns", "exec", ns, "nft", "-j", "list", "tables"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        tables = [t["table"]["name"] for t in json.loads(listed)["nftables"] if "table" in t]
        assert tables == ["clarke_quic_4433"]
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def test_find_install_and_a_server_root_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clarke.errors import EnvironmentProblem
    from clarke.server.openlitespeed import find_install, install_problem, make_server_root

    install = tmp_path / "lsws"
    monkeypatch.setenv("OLS_SERVER_ROOT", str(install))
    assert find_install() is None
    assert str(install) in install_problem() and "ci/openlitespeed-from-source" in install_problem()
    with pytest.raises(EnvironmentProblem, match="not installed"):
        make_server_root(install, tmp_path / "root")
    (install / "bin").mkdir(parents=True)
    (install / "conf").mkdir()
    for name in ("openlitespeed", "lswsctrl"):
        (install / "bin" / name).write_text("#!/bin/sh\n")
    (install / "conf" / "mime.properties").write_text("html = text/html\n")
    (install / "VERSION").write_text("1.9.1\n")
    assert find_install() == install
    root = make_server_root(install, tmp_path / "root")
    assert make_server_root(install, root) == root  # again: links replaced, no error
    bin_ = root / "bin"
    assert (bin_ / "openlitespeed").resolve() == (install / "bin" / "openlitespeed").resolve()
    assert os.readlink(bin_ / "lshttpd") == "openlitespeed"
    assert os.readlink(bin_ / "litespeed") == "lshttpd"  # what lswsctrl runs
    assert (bin_ / "lswsctrl").resolve() == (install / "bin" / "lswsctrl").resolve()
    assert (bin_ / "lsws_env").read_text() == (
        f"PIDFILE={root}/tmp/lshttpd.pid\nGRACEFUL_PIDFILE={root}/tmp/graceful.pid\n"
    )
    assert (root / "VERSION").read_text() == "1.9.1\n"
    assert (root / "conf" / "mime.properties").is_file() and (root / "logs").is_dir()


@pytest.mark.root
def test_the_master_must_be_able_to_reopen_its_workers_logs(tmp_path: Path) -> None:
    """Without CAP_DAC_OVERRIDE (a hardened container) root cannot reopen a log that
    belongs to the workers' user, and OpenLiteSpeed would then quietly log in Apache's
    format: the role refuses, naming the file and the capability. Run in a child
    without that capability (setpriv), as the compose stack's server was."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux)")
    log = tmp_path / "access.log"
    log.write_text("")
    os.chown(log, 65534, 65534)  # nobody, as OpenLiteSpeed leaves it
    tmp_path.chmod(0o755)
    code = (
        "import sys; from pathlib import Path\n"
        "from clarke.server.openlitespeed import check_master_can_reopen\n"
        "from clarke.errors import EnvironmentProblem\n"
        "try:\n    check_master_can_reopen([Path(sys.argv[1]), Path(sys.argv[2])])\n"
        "except EnvironmentProblem as e:\n    print(e); sys.exit(3)\n"
    )
    argv = [sys.executable, "-c", code, str(log), str(tmp_path / "not-yet.log")]
    assert subprocess.run(argv, capture_output=True).returncode == 0  # with the capability
    drop = ["setpriv", "--bounding-set", "-dac_override", "--inh-caps", "-dac_override"]
    out = subprocess.run([*drop, *argv], capture_output=True, text=True)
    assert out.returncode == 3, out.stdout + out.stderr
    assert str(log) in out.stdout and "CAP_DAC_OVERRIDE" in out.stdout


def test_the_image_built_from_source() -> None:
    """images/openlitespeed/Dockerfile.source: the script in a build stage on .ols-src,
    the install and nftables in the server stage, the same command as the package's."""
    from helpers import dockerfile_instructions

    repo = Path(__file__).resolve().parents[2]
    ins = dockerfile_instructions(repo / "images" / "openlitespeed" / "Dockerfile.source")
    froms = [a for kind, a in ins if kind == "FROM"]
    assert froms == ["debian:bookworm-slim AS build", "debian:bookworm-slim"]
    assert ("COPY", "${OLS_SRC} /src") in ins
    assert ("ARG", "OLS_SRC=.ols-src") in ins
    run = " ".join(a for kind, a in ins if kind == "RUN")
    assert "openlitespeed-from-source /src /usr/local/lsws" in run
    assert re.search(r"\snftables\s", run), "HTTP/3 wire bytes need nft"
    assert ("COPY", "--from=build /usr/local/lsws /usr/local/lsws") in ins
    (cmd,) = [json.loads(a) for kind, a in ins if kind == "CMD"]
    assert cmd == ["clarke", "serve", "server", "--implementation", "openlitespeed"]
    assert "/.ols-src/" in (repo / ".gitignore").read_text().splitlines()


def test_a_closed_connection_whose_last_sample_missed_its_data_reports_no_wire_bytes() -> None:
    """Seen in the source-built image on loopback: a 100 kB response sent and the
    connection closed between two `ss` samples; the last sample said 1220 bytes."""
    sample = tcp.TcpSample(
        "127.0.0.1:443", "127.0.0.1:40000", "ESTAB", "cubic",
        {"bytes_sent": 1220, "segs_out": 4, "mss": 1448, "cwnd": 10},
    )  # fmt: skip
    line = stats.parse_log_line('1 127.0.0.1 40000 "GET /o1.jpg HTTP/2" 200 100000 100000 9')
    assert line is not None
    closed = tcp.TcpConn(sample, 1, 1, open=False)
    (rec,), notes = stats.connection_records([closed], [line], OlsSettings(), "127.0.0.1:443")
    assert rec["wire_incomplete"] and "wire_bytes_sent" not in rec
    assert rec["cc"] == "cubic" and any("wire_incomplete" in n for n in notes)
    still_open = tcp.TcpConn(sample, 1, 1, open=True)  # its data may still be queued
    (rec,), _ = stats.connection_records([still_open], [line], OlsSettings(), "127.0.0.1:443")
    assert rec["wire_bytes_sent"] == 1220 and "wire_incomplete" not in rec
