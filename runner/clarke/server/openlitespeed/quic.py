"""What OpenLiteSpeed's HTTP/3 connections did, measured (docs/openlitespeed.md, "HTTP/3:
congestion control and wire bytes, measured"):

- the congestion control, from lsquic's own debug log in OpenLiteSpeed's error log:
  lsquic logs every line of a connection with that connection's id and the module that
  wrote it (`[QUIC:<cid>] cubic: ...`, `bbr: ...`, `adaptive-cc: ...`). A connection
  whose congestion controller is Cubic has `cubic` lines and no `bbr` lines, one with
  BBR the reverse; lsquic's adaptive controller (quicCongestionCtrl 3 or 0) writes
  `adaptive-cc` lines, initialises both and logs which one it selected. The connection
  id is tied to the client's address and UDP port by the line lsquic writes when a
  connection arrives (`mini-conn: connection to <server> from <client>`), and by the
  connection ids a connection later announces;
- the bytes on the wire, from nftables counters in the server's network namespace: a
  dynamic set keyed by the client's address and UDP port, updated by every UDP packet
  leaving (and arriving at) the server's port, counts packets and bytes (IP and UDP
  headers included) per client socket, i.e. per QUIC connection.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from clarke import sh
from clarke.errors import ClarkeError
from clarke.json_value import JsonObject
from clarke.server.tcp_cc import netns_argv
from clarke.vocab import CongestionControl

UDP_IP_HEADER: Final = {4: 28, 6: 48}  # IPv4 20 + UDP 8; IPv6 40 + 8

# --- lsquic's log --------------------------------------------------------------------------

# "... [DEBUG] [QUIC:7A1F...] cubic: initialized" or with a stream: "[QUIC:7A1F...-4]".
_LSQUIC_LINE = re.compile(
    r"\[(?P<level>[A-Z]+)\] \[QUIC:(?P<cid>[0-9A-Fa-f]+)(?:-(?P<stream>\d+))?\] "
    r"(?P<module>[a-z][a-z0-9-]*): (?P<msg>.*)$"
)
_ARRIVAL = re.compile(r"connection to (?P<local>\S+) from (?P<peer>\S+)$")
_SELECTED = re.compile(r"select (?P<algo>Cubic|BBRv1) congestion controller")
# lsquic's server answers a first Initial without the client's transport parameters (a
# ClientHello longer than one datagram: Firefox's with its ML-KEM key share) with a
# Retry, which costs the handshake one round trip (docs/fidelity.md).
_RETRY = re.compile(r"Peer not validated and do not have transport parameters .*: retry$")
# A connection announcing its other ids ("generated and sent SCID <cid>", "new SCID ...").
_OTHER_CID = re.compile(r"\b(?:SCID|CID|DCID)[: ]+(?P<cid>[0-9A-Fa-f]{8,40})\b")
# lsquic's congestion-control modules, as its log names them (our names for two of them).
CUBIC, BBR = CongestionControl.cubic.value, CongestionControl.bbr.value
CC_MODULES: Final = (CUBIC, BBR, "adaptive-cc")


@dataclass
class QuicConnLog:
    """What lsquic's log says of one connection."""

    cids: set[str] = field(default_factory=set)
    peer: str | None = None  # "address:port" of the client
    local: str | None = None
    modules: Counter[str] = field(default_factory=Counter)  # lines per cc module
    selected: str | None = None  # what the adaptive controller selected, if it did
    retries: int = 0  # Retry packets the server answered this client's Initials with

    @property
    def cc(self) -> str | None:
        """The congestion controller this connection ran, from its log lines:
        'cubic', 'bbr', or 'adaptive' (lsquic's adaptive controller, whichever it
        selected); None if no congestion controller wrote a line."""
        if self.modules["adaptive-cc"] or self.selected:
            return "adaptive"
        if self.modules[CUBIC] and not self.modules[BBR]:
            return CUBIC
        if self.modules[BBR] and not self.modules[CUBIC]:
            return BBR
        return None

    def view(self) -> JsonObject:
        return {
            "cc": self.cc,
            "cc_lines": {m: self.modules[m] for m in CC_MODULES if self.modules[m]},
            "adaptive_selected": self.selected,
            "retries": self.retries,
            "cids": sorted(self.cids),
        }


def _normal_peer(text: str) -> str:
    """'198.18.0.2:5000' as is; '[::ffff:198.18.0.2]:5000' -> '198.18.0.2:5000'."""
    m = re.fullmatch(r"\[?(?:::ffff:)?(?P<addr>[0-9.]+)\]?:(?P<port>\d+)", text)
    return f"{m.group('addr')}:{m.group('port')}" if m else text


def parse_lsquic_log(lines: list[str]) -> list[QuicConnLog]:
    """Connections in lsquic's log lines (the error log from an offset on)."""
    by_cid: dict[str, QuicConnLog] = {}
    for line in lines:
        m = _LSQUIC_LINE.search(line)
        if not m:
            continue
        cid, module, msg = m.group("cid").upper(), m.group("module"), m.group("msg")
        conn = by_cid.get(cid)
        if conn is None:
            conn = by_cid[cid] = QuicConnLog(cids={cid})
        if module in CC_MODULES:
            conn.modules[module] += 1
        arrival = _ARRIVAL.search(msg)
        if arrival and conn.peer is None:
            conn.peer, conn.local = _normal_peer(arrival.group("peer")), arrival.group("local")
        if module == "mini-conn" and _RETRY.search(msg):
            conn.retries += 1
        selected = _SELECTED.search(msg)
        if selected:
            conn.selected = CUBIC if selected.group("algo") == "Cubic" else BBR
        for other in _OTHER_CID.finditer(msg):
            other_cid = other.group("cid").upper()
            if other_cid != cid and other_cid not in by_cid:
                by_cid[other_cid] = conn
                conn.cids.add(other_cid)
    # one object per connection (several ids may point at it)
    unique: dict[int, QuicConnLog] = {id(c): c for c in by_cid.values()}
    return list(unique.values())


def merge_by_peer(conns: list[QuicConnLog]) -> tuple[dict[str, QuicConnLog], list[QuicConnLog]]:
    """Connections keyed by the client's address:port where the log names it (the
    mini connection's line), with the congestion-control lines of the full connection
    that carries the same client (lsquic logs them under another id) merged in, and the
    connections no client could be found for."""
    by_peer: dict[str, QuicConnLog] = {}
    unknown: list[QuicConnLog] = []
    for conn in conns:
        if conn.peer is None:
            unknown.append(conn)
            continue
        have = by_peer.setdefault(conn.peer, QuicConnLog(peer=conn.peer, local=conn.local))
        have.cids |= conn.cids
        have.modules.update(conn.modules)
        have.selected = have.selected or conn.selected
        have.retries += conn.retries
    return by_peer, unknown


def read_new_lines(path: Path, offset: int) -> tuple[list[str], int, bool]:
    """Complete lines of `path` from `offset` (or from the start, if the file is now
    shorter: it was truncated), the offset after them, and whether it restarted."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            restarted = size < offset
            start = 0 if restarted else offset
            f.seek(start)
            data = f.read()
    except FileNotFoundError:
        return [], offset, False
    cut = data.rfind(b"\n") + 1
    text = data[:cut].decode("utf-8", errors="replace")
    return text.splitlines(), start + cut, restarted


# --- wire bytes: nftables counters per client socket -------------------------------------------


class QuicWireCounter:
    """Per-client-socket UDP counters on the server's port, in nftables (table
    `inet clarke_quic_<port>` in the server's network namespace): `out4`/`out6` count
    what the server sent to each client address and port, `in4`/`in6` what it got."""

    def __init__(self, port: int, netns: str | None = None) -> None:
        self.port, self.netns = port, netns
        self.table = f"clarke_quic_{port}"
        self.last_error: str | None = None

    def _nft(self, *args: str, input: str | None = None) -> str:
        return sh.run(netns_argv(["nft", *args], self.netns), input=input, timeout=10).stdout

    def ruleset(self) -> str:
        sets = []
        for name, addr in (("out4", "ipv4_addr"), ("in4", "ipv4_addr"), ("out6", "ipv6_addr"),
                           ("in6", "ipv6_addr")):  # fmt: skip
            sets.append(
                f"  set {name} {{\n    type {addr} . inet_service\n    flags dynamic\n"
                "    counter\n    size 65536\n  }\n"
            )
        p = self.port
        return (
            f"table inet {self.table} {{\n{''.join(sets)}"
            "  chain out {\n    type filter hook output priority 0; policy accept;\n"
            f"    meta nfproto ipv4 udp sport {p} update @out4 {{ ip daddr . udp dport }}\n"
            f"    meta nfproto ipv6 udp sport {p} update @out6 {{ ip6 daddr . udp dport }}\n"
            "  }\n"
            "  chain in {\n    type filter hook input priority 0; policy accept;\n"
            f"    meta nfproto ipv4 udp dport {p} update @in4 {{ ip saddr . udp sport }}\n"
            f"    meta nfproto ipv6 udp dport {p} update @in6 {{ ip6 saddr . udp sport }}\n"
            "  }\n}\n"
        )

    def install(self) -> None:
        """(Re)create the table; raises EnvironmentProblem without nft."""
        sh.run(netns_argv(["nft", "-f", "-"], self.netns), input=self._replace(), timeout=10)

    def _replace(self) -> str:
        return f"table inet {self.table}\ndelete table inet {self.table}\n{self.ruleset()}"

    def remove(self) -> None:
        sh.run(netns_argv(["nft", "delete", "table", "inet", self.table], self.netns),
               check=False, timeout=10)  # fmt: skip

    def reset(self) -> None:
        try:
            for name in ("out4", "in4", "out6", "in6"):
                self._nft("flush", "set", "inet", self.table, name)
            self.last_error = None
        except ClarkeError as e:
            self.last_error = str(e)

    def read(self) -> dict[str, dict[str, int]]:
        """{'address:port': {'sent_packets', 'sent_bytes', 'received_packets',
        'received_bytes'}} since the last reset; bytes include IP and UDP headers."""
        out: dict[str, dict[str, int]] = defaultdict(dict)
        try:
            text = self._nft("-j", "list", "table", "inet", self.table)
        except ClarkeError as e:
            self.last_error = str(e)
            return {}
        for item in json.loads(text).get("nftables", []):
            s = item.get("set")
            if not s or s.get("name") not in ("out4", "in4", "out6", "in6"):
                continue
            kind = "sent" if s["name"].startswith("out") else "received"
            for elem in s.get("elem", []):
                entry = elem.get("elem", {})
                addr, port = entry.get("val", {}).get("concat", [None, None])
                counter = entry.get("counter", {})
                host = f"[{addr}]" if ":" in str(addr) else str(addr)
                key = f"{host}:{port}"
                out[key][f"{kind}_packets"] = int(counter.get("packets", 0))
                out[key][f"{kind}_bytes"] = int(counter.get("bytes", 0))
        return dict(out)
