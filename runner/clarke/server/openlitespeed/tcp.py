"""What OpenLiteSpeed's TCP connections did, measured from outside OpenLiteSpeed
(docs/openlitespeed.md): `ss -tin` for the server port, sampled while a page load runs
(every 100 ms by default), gives the congestion control the kernel reports, bytes sent
and retransmitted, segments, cwnd and RTT per connection; the last sample of each
connection is kept until the next reset (TcpSampler). stats.py joins them with the
access log."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
import time
from dataclasses import dataclass
from typing import Final

from clarke import sh
from clarke.errors import ClarkeError
from clarke.server.tcp_cc import netns_argv

# --- ss -tin ------------------------------------------------------------------------------

_ADDR_PORT = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.%\w]+)\]|(?P<v4>[0-9.]+|\*)):(?P<port>\d+|\*)$")
# Bare words ss prints before the congestion control's name.
_SS_FLAGS: Final = frozenset({"ts", "sack", "ecn", "ecnseen", "fastopen"})
# Words followed by their value as the next token.
_SS_PAIRS: Final = frozenset({"send", "pacing_rate", "delivery_rate"})
_SS_INTS: Final = (
    "bytes_sent",
    "bytes_retrans",
    "bytes_acked",
    "bytes_received",
    "segs_out",
    "segs_in",
    "data_segs_out",
    "data_segs_in",
    "cwnd",
    "ssthresh",
    "mss",
    "delivered",
    "lost",
    "unacked",
)


@dataclass(frozen=True)
class TcpSample:
    """One socket in `ss -tin` output: its addresses and what the kernel says of it."""

    local: str
    peer: str
    state: str | None
    cc: str | None
    counters: dict[str, int]  # bytes_sent, bytes_retrans, segs_out, cwnd, mss, ...
    rtt_ms: float | None = None
    total_retrans: int = 0

    @property
    def has_info(self) -> bool:
        return self.cc is not None or bool(self.counters)


def split_address(text: str) -> tuple[str, int | None]:
    """'198.18.0.1:443' or '[::1]:443' -> (address, port)."""
    m = _ADDR_PORT.fullmatch(text)
    if not m:
        raise ValueError(f"not an address:port: {text!r}")
    addr = m.group("v6") or m.group("v4")
    port = m.group("port")
    if addr and addr.startswith("::ffff:") and "." in addr:
        addr = addr[len("::ffff:") :]  # an IPv4 client on a dual-stack socket
    return addr, (None if port == "*" else int(port))


def _socket_line(line: str) -> tuple[str | None, str, str] | None:
    """(state, local, peer) from a socket line ('[State] Recv-Q Send-Q Local Peer')."""
    tokens = line.split()
    addrs = [t for t in tokens if _ADDR_PORT.fullmatch(t)]
    if len(addrs) < 2:
        return None
    state = tokens[0] if tokens and not tokens[0].isdigit() else None
    return state, addrs[-2], addrs[-1]


def _info(tokens: list[str]) -> tuple[str | None, dict[str, int], float | None, int]:
    cc: str | None = None
    counters: dict[str, int] = {}
    rtt: float | None = None
    total_retrans = 0
    seen_key_value = False
    skip = False
    for i, tok in enumerate(tokens):
        if skip:
            skip = False
            continue
        if tok in _SS_PAIRS:
            skip = i + 1 < len(tokens)
            continue
        key, sep, value = tok.partition(":")
        if sep:
            seen_key_value = True
            if key in _SS_INTS and value.isdigit():
                counters[key] = int(value)
            elif key == "rtt":
                with contextlib.suppress(ValueError):
                    rtt = float(value.split("/")[0])
            elif key == "retrans":
                with contextlib.suppress(ValueError):
                    total_retrans = int(value.split("/")[-1])
            continue
        bare_word = re.fullmatch(r"[a-z][a-z0-9_]*", tok) is not None
        if cc is None and not seen_key_value and tok not in _SS_FLAGS and bare_word:
            cc = tok  # the name comes after the flags, before the first key:value
    return cc, counters, rtt, total_retrans


def parse_ss(text: str) -> list[TcpSample]:
    """Sockets from `ss -tin` (with or without -H, with or without a State column):
    each socket line is followed by indented info lines."""
    out: list[TcpSample] = []
    current: tuple[str | None, str, str] | None = None
    info: list[str] = []

    def flush() -> None:
        if current is not None:
            cc, counters, rtt, retrans = _info(info)
            out.append(TcpSample(current[1], current[2], current[0], cc, counters, rtt, retrans))

    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0].isspace():
            info.extend(line.split())
            continue
        if line.startswith(("State", "Recv-Q", "Netid")):
            continue  # a header line (ss without -H)
        flush()
        current, info = _socket_line(line), []
    flush()
    return out


def parse_listening(text: str) -> list[str]:
    """Local addresses of `ss -ltn` / `ss -lun` lines."""
    found = []
    for line in text.splitlines():
        parsed = _socket_line(line) if line.strip() and not line[0].isspace() else None
        if parsed:
            found.append(parsed[1])
    return found


# --- sampling ss ---------------------------------------------------------------------------


@dataclass
class TcpConn:
    """A TCP connection to the server port: its last sample and when it was seen."""

    sample: TcpSample
    first_ms: int
    last_ms: int
    open: bool = True


class TcpSampler:
    """Samples `ss -tin` for the server port every `interval` s in a thread and keeps
    the last sample of every connection until clear()."""

    def __init__(self, port: int, netns: str | None = None, interval: float = 0.1) -> None:
        self.port, self.netns, self.interval = port, netns, interval
        self._conns: dict[str, TcpConn] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    def argv(self) -> list[str]:
        return netns_argv(
            ["ss", "-Htin", "state", "connected", "sport", "=", f":{self.port}"], self.netns
        )

    def sample_now(self) -> None:
        taken_ms = int(time.time() * 1000)  # what ss shows is as of its start
        try:
            text = sh.run(self.argv(), timeout=5).stdout
        except ClarkeError as e:
            self.last_error = str(e)
            return
        self.add(parse_ss(text), taken_ms)

    def add(self, samples: list[TcpSample], now_ms: int) -> None:
        """The connections as `ss` showed them at `now_ms`. A sample taken before a
        connection's last one changes nothing of it: a slow `ss` of the sampling thread
        may end after a later one (stats()'s last), and its counters are older."""
        with self._lock:
            seen = set()
            for s in samples:
                if not s.has_info:
                    continue  # TIME-WAIT and the like: nothing new
                seen.add(s.peer)
                conn = self._conns.get(s.peer)
                if conn is None:
                    self._conns[s.peer] = TcpConn(s, now_ms, now_ms)
                elif now_ms >= conn.last_ms:
                    conn.sample, conn.last_ms, conn.open = s, now_ms, True
            for peer, conn in self._conns.items():
                if peer not in seen and now_ms >= conn.last_ms:
                    conn.open = False

    def snapshot(self) -> list[TcpConn]:
        with self._lock:
            return [dataclasses.replace(c) for c in self._conns.values()]

    def clear(self) -> int:
        with self._lock:
            n = len(self._conns)
            self._conns = {}
            self.last_error = None
            return n

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="ss-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample_now()
            self._stop.wait(self.interval)
