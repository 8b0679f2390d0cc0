"""What OpenLiteSpeed's server connections did during one page load, from outside
OpenLiteSpeed: the access log (per request: protocol, bytes, client address and port),
joined with what tcp.py sampled of its TCP connections (`ss -tin`: the congestion control
the kernel reports, bytes sent and retransmitted) and what quic.py measured of its HTTP/3
ones, into connection records shaped like origin's (origin/README.md)."""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from clarke.server.openlitespeed.quic import UDP_IP_HEADER, QuicConnLog, read_new_lines
from clarke.server.openlitespeed.settings import OlsSettings
from clarke.server.openlitespeed.tcp import TcpConn, split_address
from clarke.vocab import HttpVersion

log = logging.getLogger(__name__)

# Per-packet headers for ip_bytes_estimate, as origin counts them: IPv4 20 + TCP 32
# (timestamps), IPv6 40 + 32.
TCP_IP_HEADER: Final = {4: 52, 6: 72}


# --- the access log --------------------------------------------------------------------------

# A virtual host's lines in the server's access log start with its name in brackets
# (OpenLiteSpeed 1.9.1: `["clarke"] 1795471759810 ...`).
_LOG_LINE = re.compile(
    r'^(?:\["[^"]*"\] )?(?P<ms>\d+) (?P<addr>\S+) (?P<port>\d+|-) "(?P<method>\S+) (?P<path>\S+) '
    r'(?P<version>HTTP/[0-9.]+)" (?P<status>\d{3}) (?P<body>\d+|-) (?P<out>\d+|-) '
    r"(?P<us>\d+|-)$"
)
H1, H2, H3 = (v.tag for v in HttpVersion)
PROTOCOL_OF_VERSION: Final = {"HTTP/1.0": H1, "HTTP/1.1": H1, "HTTP/2": H2, "HTTP/3": H3}


@dataclass(frozen=True)
class LogLine:
    """One request from the access log (LOG_FORMAT)."""

    unix_ms: int
    addr: str
    port: int | None
    method: str
    path: str
    protocol: str  # h1, h2, h3
    status: int
    body_bytes: int
    bytes_out: int | None
    micros: int | None


def _int_or_none(text: str) -> int | None:
    return None if text == "-" else int(text)


def parse_log_line(line: str) -> LogLine | None:
    """A line written in LOG_FORMAT, or None if it is not one."""
    m = _LOG_LINE.match(line.rstrip("\r\n"))
    if not m or m.group("version") not in PROTOCOL_OF_VERSION:
        return None
    addr = m.group("addr")
    if addr.startswith("::ffff:") and "." in addr:
        addr = addr[len("::ffff:") :]
    return LogLine(
        unix_ms=int(m.group("ms")),
        addr=addr,
        port=_int_or_none(m.group("port")),
        method=m.group("method"),
        path=m.group("path"),
        protocol=PROTOCOL_OF_VERSION[m.group("version")],
        status=int(m.group("status")),
        body_bytes=_int_or_none(m.group("body")) or 0,
        bytes_out=_int_or_none(m.group("out")),
        micros=_int_or_none(m.group("us")),
    )


@dataclass
class LogRead:
    lines: list[LogLine] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    end: int = 0  # offset after the last complete line
    restarted: bool = False  # the file was shorter than the offset: read from its start


def read_log(path: Path, offset: int) -> LogRead:
    """Complete lines of the access log from `offset` on."""
    raw_lines, end, restarted = read_new_lines(path, offset)
    out = LogRead(end=end, restarted=restarted)
    for raw in raw_lines:
        if not raw.strip():
            continue
        parsed = parse_log_line(raw)
        if parsed is None:
            out.unparsed.append(raw)
        else:
            out.lines.append(parsed)
    return out


# --- joining them: connection records ---------------------------------------------------------


def _ip_version(addr: str) -> int:
    try:
        return ipaddress.ip_address(addr).version
    except ValueError:
        return 4


def _requests(lines: list[LogLine]) -> dict[str, Any]:
    protocols = Counter(line.protocol for line in lines)
    out: dict[str, Any] = {
        "requests": len(lines),
        "app_bytes_sent": sum(line.body_bytes for line in lines),
        "statuses": dict(sorted(Counter(str(line.status) for line in lines).items())),
    }
    if protocols:
        out["protocol"] = protocols.most_common(1)[0][0]
        if len(protocols) > 1:
            out["protocols"] = sorted(protocols)
    if lines:
        out["first_request_unix_ms"] = min(line.unix_ms for line in lines)
    # In the order they were logged: the join with the browser's resource timings
    # (clarke.results.connections) goes by path.
    out["request_paths"] = [line.path for line in sorted(lines, key=lambda ln: ln.unix_ms)]
    return out


def _tcp_record(conn: TcpConn, lines: list[LogLine], joined_by: str) -> dict[str, Any]:
    s = conn.sample
    peer_addr, _ = split_address(s.peer)
    rec: dict[str, Any] = {
        "id": f"tcp {s.peer}",
        "protocol": None,
        "tls": True,
        "peer": s.peer,
        "local": s.local,
        "cc": s.cc,
        "cc_source": "kernel",
        "requests": 0,
        "app_bytes_sent": 0,
        "start_unix_ms": conn.first_ms,
        "end_unix_ms": None if conn.open else conn.last_ms,
        "open": conn.open,
        "sampled": True,
        "joined_by": joined_by,
    }
    rec.update(_requests(lines))
    c = s.counters
    if "bytes_sent" in c or "bytes_acked" in c:  # kernels from 4.19 report bytes_sent
        wire = c.get("bytes_sent", 0)
        segs = c.get("segs_out", 0)
        rec["wire_bytes_sent"] = wire
        rec["wire_packets_sent"] = segs
        rec["ip_bytes_estimate"] = wire + TCP_IP_HEADER[_ip_version(peer_addr)] * segs
        rec["retrans_bytes"] = c.get("bytes_retrans", 0)
        rec["lost_packets"] = s.total_retrans
    if "cwnd" in c and "mss" in c:
        rec["cwnd_bytes"] = c["cwnd"] * c["mss"]
    if s.rtt_ms is not None:
        rec["rtt_us"] = round(s.rtt_ms * 1000)
    rec["transport"] = {"tcp": {**c, "total_retrans": s.total_retrans, "rtt_ms": s.rtt_ms}}
    if not conn.open and rec.get("wire_bytes_sent", 0) < rec["app_bytes_sent"]:
        # Closed between two samples, and its last sample predates most of its data:
        # those counters are not its wire bytes. (Observed on loopback, where a 100 kB
        # response is sent and the connection closed within one 100 ms interval.)
        for key in ("wire_bytes_sent", "wire_packets_sent", "ip_bytes_estimate"):
            rec.pop(key, None)
        rec["wire_incomplete"] = True
    return rec


def _log_only_record(
    key: str, lines: list[LogLine], cc: str, local: str, joined_by: str
) -> dict[str, Any]:
    protocol = Counter(line.protocol for line in lines).most_common(1)[0][0]
    rec: dict[str, Any] = {
        "id": f"{'quic' if protocol == H3 else 'tcp'} {key}",
        "tls": True,
        "peer": key,
        "local": local,
        "cc": cc,
        "cc_source": "configured",
        "start_unix_ms": min(line.unix_ms for line in lines),
        "end_unix_ms": None,
        "open": None,
        "sampled": False,
        "joined_by": joined_by,
    }
    rec.update(_requests(lines))
    return rec


def _peer_key(addr: str, port: int | None) -> str:
    host = f"[{addr}]" if ":" in addr else addr
    return f"{host}:{port if port is not None else '*'}"


def _quic_measured(
    rec: dict[str, Any], log: QuicConnLog | None, wire: dict[str, int] | None
) -> None:
    """An HTTP/3 record with what lsquic's log and the nftables counters measured."""
    if log is not None and log.cc is not None:
        rec["cc"], rec["cc_source"] = log.cc, "lsquic log"
    rec["transport"] = {"quic": {**(log.view() if log else {}), **(wire or {})}}
    if wire and "sent_bytes" in wire:
        packets, ip_bytes = wire.get("sent_packets", 0), wire["sent_bytes"]
        version = _ip_version(split_address(rec["peer"])[0])
        rec["wire_bytes_sent"] = ip_bytes - UDP_IP_HEADER[version] * packets
        rec["wire_packets_sent"] = packets
        rec["ip_bytes_estimate"] = ip_bytes


def connection_records(
    tcp: Iterable[TcpConn],
    lines: Iterable[LogLine],
    settings: OlsSettings,
    local: str,
    quic_logs: dict[str, QuicConnLog] | None = None,
    quic_wire: dict[str, dict[str, int]] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """One record per connection (origin/README.md, "A connection record"), and notes.

    TCP connections seen by `ss` take the h1/h2 log lines of the same client address and
    port; lines without a sampled connection become records of their own, with the
    configured TCP algorithm. HTTP/3 lines are grouped by client address and UDP port:
    their congestion control is the one lsquic's log shows for that client socket
    (`quic_logs`, cc_source "lsquic log"), else the configured one (cc_source
    "configured"); their wire bytes come from the nftables counters (`quic_wire`).
    A log without ports is joined by address."""
    notes: list[str] = []
    by_peer: dict[tuple[str, int | None], list[LogLine]] = {}
    quic: dict[tuple[str, int | None], list[LogLine]] = {}
    conns = list(tcp)
    tcp_peers = {c.sample.peer for c in conns}
    quic_peers = (set(quic_logs or {}) | set(quic_wire or {})) - tcp_peers
    relabelled = 0
    for line in lines:
        if line.protocol == H1 and _peer_key(line.addr, line.port) in quic_peers:
            # OpenLiteSpeed 1.9.1 writes HTTP/3 requests as "HTTP/1.1": a request from a
            # client socket that spoke QUIC to the server port (lsquic's log, the UDP
            # counters) and is no TCP connection came over HTTP/3.
            line = dataclasses.replace(line, protocol=H3)
            relabelled += 1
        target = quic if line.protocol == H3 else by_peer
        target.setdefault((line.addr, line.port), []).append(line)
    if relabelled:
        notes.append(
            f"HTTP/3: {relabelled} request(s) logged as HTTP/1.1 by OpenLiteSpeed came from "
            "client sockets that spoke QUIC (lsquic's log, the UDP counters): counted as h3"
        )

    records: list[dict[str, Any]] = []
    per_addr: Counter[str] = Counter(split_address(c.sample.peer)[0] for c in conns)
    for conn in conns:
        addr, port = split_address(conn.sample.peer)
        mine = by_peer.pop((addr, port), [])
        joined_by = "peer_address_and_port"
        if (addr, None) in by_peer and per_addr[addr] == 1:
            mine += by_peer.pop((addr, None))  # a log without the client's port
            joined_by = "peer_address"
        records.append(_tcp_record(conn, mine, joined_by))
    stale = sum(1 for r in records if r.get("wire_incomplete"))
    if stale:
        notes.append(
            f"TCP: {stale} connection(s) closed before a sample caught their data: no wire "
            "bytes reported for them (wire_incomplete)"
        )
    for (addr, port), mine in by_peer.items():
        records.append(
            _log_only_record(
                _peer_key(addr, port),
                mine,
                settings.tcp_cc,
                local,
                "peer_address" if port is None else "peer_address_and_port",
            )
        )
        notes.append(
            f"{len(mine)} request(s) from {_peer_key(addr, port)} over TCP without a sampled "
            "connection: their congestion control is the configured one, not measured"
        )
    unmeasured = 0
    for (addr, port), mine in quic.items():
        joined_by = "peer_address" if port is None else "peer_address_and_port"
        key = _peer_key(addr, port)
        rec = _log_only_record(key, mine, settings.quic_cc, local, joined_by)
        _quic_measured(rec, (quic_logs or {}).get(key), (quic_wire or {}).get(key))
        unmeasured += rec["cc_source"] == "configured"
        records.append(rec)
    if unmeasured:
        notes.append(
            f"HTTP/3: {unmeasured} connection(s) without lsquic log lines naming their "
            "congestion controller: cc is the configured quicCongestionCtrl (cc_source: "
            "configured)"
        )
    records.sort(key=lambda r: (r.get("start_unix_ms") or 0, r["id"]))
    return records, notes
