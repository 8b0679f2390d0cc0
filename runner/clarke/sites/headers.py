"""What an archive keeps of a recorded response's headers.

A replay sends the recorded headers again, but a header that described one connection
(RFC 9110 section 7.6.1, and the ones HTTP/2 and HTTP/3 forbid), the message's framing
or its content coding does not belong to the response: the replaying server frames and
encodes the body itself, on whatever protocol the run asks for. Alt-Svc is the replaying
server's own. HTTP/2 and /3 pseudo-headers (`:status`) are not headers."""

from __future__ import annotations

from collections.abc import Iterable

# Dropped: they belong to the connection, the framing or the encoding of one recording.
NOT_KEPT = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "te",
        "trailer",
        "http2-settings",
        "content-length",
        "content-encoding",
        "alt-svc",
    }
)
IDENTITY = "identity"


def kept(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The headers an archive keeps, names in lowercase, in their recorded order."""
    out = []
    for name, value in headers:
        low = name.strip().lower()
        if not low or low.startswith(":") or low in NOT_KEPT:
            continue
        out.append((low, value.strip()))
    return out


def content_encoding(headers: Iterable[tuple[str, str]]) -> str | None:
    """The one content coding the body was sent in (gzip, br, ...), or None for none,
    identity, or several stacked codings (rare: the archive then keeps plain bytes and
    the replay sends them uncoded)."""
    found = [v.strip().lower() for k, v in headers if k.strip().lower() == "content-encoding"]
    codings = [c.strip() for v in found for c in v.split(",") if c.strip()]
    codings = [c for c in codings if c != IDENTITY]
    return codings[0] if len(codings) == 1 else None


def value(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    """The first value of header `name` (any case), or None."""
    return next((v for k, v in headers if k.strip().lower() == name), None)
