"""The server's initial congestion window as a run dimension (campaign/dimensions.py,
INITIAL_WINDOW): its values, and how a load shows it in force (the server's connection
records: TCP's window from TCP_INFO as each connection was accepted, QUIC's as quinn
started it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, StringConstraints

from clarke.vocab import HttpVersion

IW_DEFAULT = "default"
IW_FIELD = "initial_window"  # the server's POST /config field
# A full-size QUIC datagram's payload on a 1500-byte path (IPv4): quinn's own initial
# window, 14720 bytes, is ten of them (RFC 9002, section 7.2).
QUIC_DATAGRAM_BYTES = 1472


def _iw_text(v: Any) -> Any:
    """YAML and the command line give a number of segments, or `default`."""
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


InitialWindowValue = Annotated[
    str,
    BeforeValidator(_iw_text),
    StringConstraints(pattern=rf"^({IW_DEFAULT}|[1-9][0-9]?|100)$"),
]


def in_force(value: str, conn: Mapping[str, object]) -> str | None:
    """A connection started with `value` segments: TCP's window from TCP_INFO as it was
    accepted, QUIC's in bytes as quinn started it."""
    if value == IW_DEFAULT:
        return None
    quic = conn.get("protocol") == HttpVersion.h3.tag
    want = int(value) * (QUIC_DATAGRAM_BYTES if quic else 1)
    got = conn.get("initial_window_bytes" if quic else "initial_cwnd_segments")
    unit = "bytes" if quic else "segments"
    if got == want or (not quic and got == 1 and _fell_back(conn)):
        return None
    said = "no initial window" if got is None else f"an initial window of {got} {unit}"
    return (
        f"initial window: the server's connection {conn.get('id')} started with {said}, not {want}"
    )


def _fell_back(conn: Mapping[str, object]) -> bool:
    """Whether the kernel may have started a TCP connection with one segment because its
    handshake was retransmitted (two SYN-ACKs or more, tcpi_total_retrans as origin
    accepted it): RFC 5681, section 3.1, as Linux applies it, which also needs the
    SYN-ACK's own timer to have expired (TCP_INFO does not say whether it did). The
    route's initcwnd was in force; a server of the world would have done the same, so the
    load is one of the cell's and not a failed setting (which would bias the cell towards
    loads that lost nothing)."""
    retransmits = conn.get("handshake_retransmits")
    return isinstance(retransmits, int) and retransmits > 1
