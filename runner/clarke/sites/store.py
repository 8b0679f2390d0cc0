"""Writing an archive from what an importer read: each recorded exchange as a
`Recorded`, the same for every format, so that two recordings of one site in two
formats give one archive. Bodies are stored once by their SHA-256; origins are gathered
from the exchanges (the address each had, the protocols it spoke or advertised)."""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import ValidationError

from clarke.errors import InputError, ValidationFailed
from clarke.schema import problems_of
from clarke.sites import archive, headers
from clarke.sites.archive import (
    BODIES,
    Exchange,
    Origin,
    SiteArchive,
    Source,
    authority,
    normalise,
    sha256_of,
    split_url,
)
from clarke.vocab import HttpVersion

_ALT_SVC_H3 = re.compile(r'(^|[\s,])h3="')
# How each format spells the protocol a response came over -> the archive's tags.
_PROTOCOLS = {
    "http/1.0": HttpVersion.h1.tag,
    HttpVersion.h1.next_hop_protocol: HttpVersion.h1.tag,
    "http/2": HttpVersion.h2.tag,
    "http/2.0": HttpVersion.h2.tag,
    HttpVersion.h2.next_hop_protocol: HttpVersion.h2.tag,
    "http/3": HttpVersion.h3.tag,
    "http/3.0": HttpVersion.h3.tag,
    HttpVersion.h3.next_hop_protocol: HttpVersion.h3.tag,
}


def protocol_tag(spelt: str | None) -> str | None:
    """h1, h2 or h3 from "HTTP/2.0", "h2", "http/1.1" ...; None when it says nothing."""
    return _PROTOCOLS.get((spelt or "").strip().lower())


@dataclass(frozen=True)
class Recorded:
    """One exchange as an importer read it. `started`: when the request started (a
    sortable number, e.g. Unix seconds), to order exchanges alike whatever the file's
    order; `body`: the body as the page uses it (no content coding)."""

    started: float
    method: str
    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    ttfb_ms: float | None = None
    address: str | None = None
    protocol: str | None = None  # h1, h2, h3 (protocol_tag)
    where: str = ""  # how errors name it in the file: entries[3], record 7


@dataclass
class Imported:
    """The archive an import wrote, and what it left out (with the reason)."""

    path: Path
    archive: SiteArchive
    skipped: list[str] = field(default_factory=list)


@dataclass
class _OriginSeen:
    host: str
    port: int
    address: str | None = None
    protocols: set[str] = field(default_factory=set)


def _origins(kept: list[tuple[Recorded, str, int]]) -> list[Origin]:
    seen: dict[str, _OriginSeen] = {}
    for rec, host, port in kept:
        o = seen.setdefault(authority(host, port), _OriginSeen(host, port))
        o.address = o.address or rec.address
        if rec.protocol:
            o.protocols.add(rec.protocol)
        alt_svc = headers.value(rec.headers, "alt-svc") or ""
        if _ALT_SVC_H3.search(alt_svc):
            o.protocols.add(HttpVersion.h3.tag)
    return [
        Origin(
            host=o.host,
            port=o.port,
            address=o.address,
            protocols=sorted(o.protocols or {HttpVersion.h2.tag}),  # type: ignore[arg-type]  # the tags are the Literal's
            certificate_names=[o.host],
        )
        for o in seen.values()
    ]


def default_name(url: str) -> str:
    """A site name from a URL's host, in the form campaigns take (docs.python.test)."""
    host = url.split("//", 1)[-1].split("/", 1)[0].split(":")[0]
    return re.sub(r"[^a-z0-9_.-]+", "-", host.lower()).strip("-.")[:64] or "site"


def write_archive(
    out: Path, name: str | None, source: Source, records: Iterable[Recorded], start_url: str | None
) -> Imported:
    """The archive of `records` in `out` (made anew; written in a scratch directory
    beside it and moved in place, so a failed import leaves nothing half-written).
    Exchanges that are not https are left out and listed; `start_url`: the page's URL
    (default: the first https GET with an HTML response); `name`: the
    site's name (default: from the page's host)."""
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: exists and is not empty (an import writes a new archive)")
    with new_archive_dir(out) as scratch:
        imported = _write(scratch, name, source, records, start_url)
    imported.path = out
    return imported


@contextlib.contextmanager
def new_archive_dir(out: Path) -> Iterator[Path]:
    """A scratch directory beside `out` to write an archive in: moved to `out` when the
    block ends, removed when it fails, so nothing half-written is ever left at `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        yield scratch
        if out.exists():
            out.rmdir()
        scratch.rename(out)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def _write(
    path: Path, name: str | None, source: Source, records: Iterable[Recorded], start_url: str | None
) -> Imported:
    (path / BODIES).mkdir()
    skipped: list[str] = []
    kept: list[tuple[Recorded, str, int]] = []
    for rec in sorted(records, key=lambda r: r.started):
        try:
            url = normalise(rec.url)
            host, port, _ = split_url(url)
        except ValueError as e:
            skipped.append(f"{rec.where}: {rec.method} {rec.url[:120]}: {e}")
            continue
        kept.append((replace(rec, url=url), host, port))
    exchanges = []
    for rec, _, _ in kept:
        digest = sha256_of(rec.body) if rec.body else None
        if digest is not None and not (path / BODIES / digest).exists():
            (path / BODIES / digest).write_bytes(rec.body)
        try:
            exchanges.append(
                Exchange(
                    method=rec.method.upper(),
                    url=rec.url,
                    status=rec.status,
                    headers=headers.kept(rec.headers),
                    content_encoding=headers.content_encoding(rec.headers),
                    body=digest,
                    size=len(rec.body),
                    server_ttfb_ms=round(rec.ttfb_ms, 3) if rec.ttfb_ms is not None else None,
                )
            )
        except ValidationError as e:
            raise ValidationFailed(rec.where, problems_of(e)) from None
    if not exchanges:
        raise InputError(f"no https exchange to import ({len(skipped)} left out)")
    if start_url is None:
        start_url = next(
            (e.url for e in exchanges if e.method == "GET" and _is_html(e)), exchanges[0].url
        )
    try:
        site = SiteArchive(
            name=name or default_name(start_url),
            start_url=normalise(start_url),
            source=source,
            origins=_origins(kept),
            exchanges=exchanges,
        )
    except ValidationError as e:
        raise ValidationFailed(f"archive {name}", problems_of(e)) from None
    archive.write(path, site)
    return Imported(path, site, skipped)


def _is_html(e: Exchange) -> bool:
    return 200 <= e.status < 300 and "html" in (e.header("content-type") or "")
