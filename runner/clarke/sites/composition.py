"""What a site is made of, in the Web Almanac's terms: requests and bytes per content
type, origins, and third parties (HTTP Archive counts a page's resources by the type
their Content-Type names, and its bytes as transferred).

Transferred bytes are the bodies as a replay sends them: in the recorded content coding
(gzip at level 6, br at quality 5, as the replaying server codes them: docs/sites.md),
plain otherwise; headers are not counted. A third party is a site (the last two labels of a host: a
simplification of the public suffix list's eTLD+1) other than the page's own."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import brotli

from clarke.json_value import JsonObject
from clarke.sites.archive import Exchange, Site, split_url

TYPES = ("html", "css", "js", "image", "font", "other")
GZIP_LEVEL = 6
BROTLI_QUALITY = 5
BROTLI_WINDOW = 22


def content_type(e: Exchange) -> str:
    """html, css, js, image, font or other, from the Content-Type (then the path)."""
    ctype = (e.header("content-type") or "").split(";")[0].strip().lower()
    path = split_url(e.url)[2].split("?")[0].lower()
    if "html" in ctype:
        return "html"
    if ctype == "text/css" or (not ctype and path.endswith(".css")):
        return "css"
    if (
        "javascript" in ctype
        or "ecmascript" in ctype
        or (not ctype and path.endswith((".js", ".mjs")))
    ):
        return "js"
    if ctype.startswith("image/"):
        return "image"
    if (
        ctype.startswith("font/")
        or "font" in ctype
        or path.endswith((".woff", ".woff2", ".ttf", ".otf"))
    ):
        return "font"
    return "other"


def encoded(data: bytes, coding: str | None) -> bytes:
    """`data` in content coding `coding` as origin's replay sends it (gzip for gzip,
    deflate, x-gzip and zstd; br for br); plain for None."""
    if not coding or not data:
        return data
    if coding == "br":
        return bytes(brotli.compress(data, quality=BROTLI_QUALITY, lgwin=BROTLI_WINDOW))
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


def registrable(host: str) -> str:
    """The last two labels of a host (docs.python.org -> python.org)."""
    return ".".join(host.split(".")[-2:])


@dataclass
class Row:
    requests: int = 0
    bytes: int = 0  # bodies as the page uses them
    transfer_bytes: int = 0  # bodies as a replay sends them


@dataclass
class Composition:
    rows: dict[str, Row] = field(default_factory=lambda: {t: Row() for t in TYPES})
    origins: int = 0
    third_parties: int = 0
    third_party_requests: int = 0

    @property
    def total(self) -> Row:
        return Row(
            sum(r.requests for r in self.rows.values()),
            sum(r.bytes for r in self.rows.values()),
            sum(r.transfer_bytes for r in self.rows.values()),
        )

    def to_dict(self) -> JsonObject:
        return {
            "types": {t: r.__dict__ for t, r in self.rows.items()},
            "total": self.total.__dict__,
            "origins": self.origins,
            "third_parties": self.third_parties,
            "third_party_requests": self.third_party_requests,
        }


def of(site: Site) -> Composition:
    """The composition of an archive's responses (each exchange counted once)."""
    a = site.archive
    first = registrable(split_url(a.start_url)[0])
    out = Composition(origins=len(a.origins))
    third: set[str] = set()
    # A body shared by many exchanges is coded once per coding, not once per exchange.
    sent: dict[tuple[str | None, str | None], int] = {}
    for e in a.exchanges:
        row = out.rows[content_type(e)]
        row.requests += 1
        row.bytes += e.size
        key = (e.body, e.content_encoding)
        if key not in sent:
            sent[key] = len(encoded(site.body(e), e.content_encoding))
        row.transfer_bytes += sent[key]
        party = registrable(split_url(e.url)[0])
        if party != first:
            third.add(party)
            out.third_party_requests += 1
    out.third_parties = len(third)
    return out


def table(c: Composition) -> str:
    lines = [f"{'type':<8}{'requests':>10}{'KB':>10}{'KB sent':>10}"]
    for name, r in [*c.rows.items(), ("total", c.total)]:
        lines.append(
            f"{name:<8}{r.requests:>10}{r.bytes / 1000:>10.1f}{r.transfer_bytes / 1000:>10.1f}"
        )
    lines.append(
        f"origins {c.origins}; third parties {c.third_parties} ({c.third_party_requests} requests)"
    )
    return "\n".join(lines)
