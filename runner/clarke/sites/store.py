"""Writing an archive from what an importer read: each recorded exchange as a
`Recorded`, the same for every format, so that two recordings of one site in two
formats give one archive. Bodies are stored once by their SHA-256 as the importer reads
them (`BodyStore`: streamed to disk and hashed in chunks, never held whole, within the
archive's limits); origins are gathered from the exchanges (the address each had, the
protocols it spoke or advertised)."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import ValidationError

from clarke.errors import InputError, ValidationFailed
from clarke.schema import problems_of
from clarke.sites import archive, headers
from clarke.sites.archive import (
    BODIES,
    FIRST_FINAL_STATUS,
    LAST_STATUS,
    Exchange,
    Origin,
    SiteArchive,
    Source,
    authority,
    normalise,
    split_url,
)
from clarke.sites.archive_files import Limits
from clarke.vocab import HttpTag, HttpVersion

_ALT_SVC_H3 = re.compile(r'(^|[\s,])h3="')
# How each format spells the protocol a response came over -> the archive's tags.
_PROTOCOLS: dict[str, HttpTag] = {
    "http/1.0": HttpVersion.h1.tag,
    HttpVersion.h1.next_hop_protocol: HttpVersion.h1.tag,
    "http/2": HttpVersion.h2.tag,
    "http/2.0": HttpVersion.h2.tag,
    HttpVersion.h2.next_hop_protocol: HttpVersion.h2.tag,
    "http/3": HttpVersion.h3.tag,
    "http/3.0": HttpVersion.h3.tag,
    HttpVersion.h3.next_hop_protocol: HttpVersion.h3.tag,
}


def protocol_tag(spelt: str | None) -> HttpTag | None:
    """h1, h2 or h3 from "HTTP/2.0", "h2", "http/1.1" ...; None when it says nothing."""
    return _PROTOCOLS.get((spelt or "").strip().lower())


@dataclass(frozen=True)
class StoredBody:
    """A body in the archive's bodies/: its SHA-256 and its size."""

    sha256: str
    size: int


class BodyStore:
    """The bodies/ of an archive being written: each body streamed into a scratch file,
    hashed as it goes, and named by its SHA-256 at the end (stored once however often
    it recurs). A body over the per-body limit, or one that takes the archive's distinct
    bodies over theirs, stops the import (exit 2 naming the entry and the option that
    raises the limit)."""

    def __init__(self, directory: Path, limits: Limits) -> None:
        self.directory = directory
        self.limits = limits
        self.total = 0
        self.stored: dict[str, int] = {}
        directory.mkdir()
        self._scratch = directory / ".partial"

    def put(self, chunks: Iterable[bytes], where: str) -> StoredBody | None:
        """The body of `chunks` stored (None: it is empty)."""
        digest = hashlib.sha256()
        size = 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self._scratch, flags, 0o644)
        try:
            for chunk in chunks:
                size += len(chunk)
                breach = self.limits.body_breach(size)
                if breach:
                    raise ValidationFailed(where, [f"its body decodes to {breach}"])
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        if size == 0:
            self._scratch.unlink()
            return None
        name = digest.hexdigest()
        if name in self.stored:
            self._scratch.unlink()
        else:
            breach = self.limits.site_breach(self.total + size)
            if breach:
                self._scratch.unlink()
                raise ValidationFailed(where, [breach])
            self._scratch.rename(self.directory / name)
            self.stored[name] = size
            self.total += size
        return StoredBody(name, size)

    def put_bytes(self, data: bytes, where: str) -> StoredBody | None:
        return self.put([data], where)

    def keep_only(self, names: set[str]) -> None:
        """Remove the bodies no exchange kept (those of the exchanges left out)."""
        for name in set(self.stored) - names:
            (self.directory / name).unlink()
            self.total -= self.stored.pop(name)


@dataclass(frozen=True)
class Recorded:
    """One exchange as an importer read it. `started`: when the request started (a
    sortable number, e.g. Unix seconds), to order exchanges alike whatever the file's
    order; `body`: the body as the page uses it (no content coding), in the store."""

    started: float
    method: str
    url: str
    status: int
    headers: list[tuple[str, str]]
    body: StoredBody | None
    ttfb_ms: float | None = None
    address: str | None = None
    protocol: HttpTag | None = None  # (protocol_tag)
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
    protocols: set[HttpTag] = field(default_factory=set)


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
            protocols=sorted(o.protocols or {HttpVersion.h2.tag}),
            certificate_names=[o.host],
        )
        for o in seen.values()
    ]


def default_name(url: str) -> str:
    """A site name from a URL's host, in the form campaigns take (docs.python.test)."""
    host = url.split("//", 1)[-1].split("/", 1)[0].split(":")[0]
    return re.sub(r"[^a-z0-9_.-]+", "-", host.lower()).strip("-.")[:64] or "site"


@dataclass
class Recording:
    """What an importer read: the exchanges (bodies in the store), what it left out and
    why, and where the recording came from."""

    records: list[Recorded]
    skipped: list[str]
    source: Source


def recorded_at(started: float | None) -> str:
    """An ISO 8601 time in UTC of a start time in Unix seconds ("" where there is none,
    or where it is outside the years a datetime holds)."""
    if not started:
        return ""
    try:
        return dt.datetime.fromtimestamp(started, dt.UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return ""


def unix_time(value: str | None) -> float | None:
    """Unix seconds of an ISO 8601 time; None where it is not one, or not one a Unix
    time can hold (9999-12-31T23:59:59-14:00 is in the year 10000 in UTC)."""
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value).timestamp()
    except (OverflowError, OSError, ValueError):
        return None


@dataclass(frozen=True)
class ImportOptions:
    """What every importer takes: the archive's name (None: from the page's host), the
    page's URL (None: the first HTML response) and the limits bodies are held to."""

    name: str | None
    start_url: str | None = None
    limits: Limits = field(default_factory=Limits.from_env)


def write_archive(
    out: Path, options: ImportOptions, read: Callable[[BodyStore], Recording]
) -> Imported:
    """The archive that `read` (an importer, storing bodies as it reads them) gives, in
    `out` (made anew; written in a scratch directory beside it and moved in place, so a
    failed import leaves nothing half-written). Exchanges that are not https, or whose
    status is not a final one, are left out and listed."""
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: exists and is not empty (an import writes a new archive)")
    with new_archive_dir(out) as scratch:
        store = BodyStore(scratch / BODIES, options.limits)
        recording = read(store)
        imported = _write(scratch, store, recording, options)
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


def _write(path: Path, store: BodyStore, recording: Recording, options: ImportOptions) -> Imported:
    skipped = list(recording.skipped)
    kept: list[tuple[Recorded, str, int]] = []
    for rec in sorted(recording.records, key=lambda r: r.started):
        what = f"{rec.where}: {rec.method} {rec.url[:120]}"
        if not FIRST_FINAL_STATUS <= rec.status <= LAST_STATUS:
            skipped.append(
                f"{what}: status {rec.status} is not a final response "
                f"({FIRST_FINAL_STATUS} to {LAST_STATUS})"
            )
            continue
        try:
            url = normalise(rec.url)
            host, port, _ = split_url(url)
        except ValueError as e:
            skipped.append(f"{what}: {e}")
            continue
        kept.append((replace(rec, url=url), host, port))
    exchanges = []
    for rec, _, _ in kept:
        try:
            exchanges.append(
                Exchange(
                    method=rec.method.upper(),
                    url=rec.url,
                    status=rec.status,
                    headers=headers.kept(rec.headers),
                    content_encoding=headers.content_encoding(rec.headers),
                    body=rec.body.sha256 if rec.body else None,
                    size=rec.body.size if rec.body else 0,
                    server_ttfb_ms=round(rec.ttfb_ms, 3) if rec.ttfb_ms is not None else None,
                )
            )
        except ValidationError as e:
            raise ValidationFailed(rec.where, problems_of(e)) from None
    if not exchanges:
        raise InputError(f"no https exchange to import ({len(skipped)} left out)")
    store.keep_only({e.body for e in exchanges if e.body})
    start_url = options.start_url
    if start_url is None:
        start_url = next(
            (e.url for e in exchanges if e.method == "GET" and _is_html(e)), exchanges[0].url
        )
    name = options.name
    try:
        site = SiteArchive(
            name=name or default_name(start_url),
            start_url=normalise(start_url),
            source=recording.source,
            origins=_origins(kept),
            exchanges=exchanges,
        )
    except ValidationError as e:
        raise ValidationFailed(f"archive {name or start_url[:120]}", problems_of(e)) from None
    except ValueError as e:  # normalise: a start URL without a host
        raise InputError(f"--start-url {start_url[:120]!r}: {e}") from None
    archive.write(path, site)
    return Imported(path, site, skipped)


def _is_html(e: Exchange) -> bool:
    return 200 <= e.status < 300 and "html" in (e.header("content-type") or "")
