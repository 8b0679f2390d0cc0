"""Importing a WARC file (WARC 1.0 or 1.1, gzipped or not) into a site archive, with
warcio.

Each `response` record with an HTTP message is one exchange:

    WARC-Target-URI          the URL
    WARC-IP-Address          the address the origin had (optional)
    WARC-Date                when it was captured; the request record's, where there
                             is one, orders the exchanges (WARC 1.1 dates carry
                             microseconds)
    the HTTP message         status line (its protocol: HTTP/1.1, HTTP/2.0...), headers,
                             body: chunked framing and the content coding (gzip,
                             deflate, br) taken off
    Clarke-Server-TTFB-Ms    the server's time to first byte, where the recorder knew it
                             (`clarke site record` writes it; other tools do not)

The method comes from the `request` record paired with it (WARC-Concurrent-To, either
way round), GET without one. `revisit`, `metadata`, `resource` and `warcinfo` records are
left out (a revisit's body lives in another record); a truncated response
(WARC-Truncated, or a file that ends inside the record), a body that does not decode in
the coding it is labelled with, or one in a coding Clarke does not decode makes the
import fail naming the record.

A WARC is untrusted input: warcio parses the records, but every body is read in pieces,
its chunked framing and content coding taken off by Clarke as a stream (decoding.py) and
stored as it goes (store.BodyStore), so that a bomb stops at the archive's limits with a
bounded amount of memory. The file's own gzip layer is bounded too: at most twice the
archive's limit of bytes (records Clarke leaves out pass through it as well), and no
line of WARC or HTTP headers longer than MAX_LINE."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from warcio.archiveiterator import BUFF_SIZE, ArchiveIterator
from warcio.bufferedreaders import DecompressingBufferedReader
from warcio.exceptions import ArchiveLoadFailed
from warcio.limitreader import LimitReader

from clarke.errors import InputError, ValidationFailed
from clarke.sites import decoding, headers
from clarke.sites.archive import TOOL_CHARS, Source
from clarke.sites.archive_files import MIB, Limits
from clarke.sites.store import (
    BodyStore,
    Imported,
    ImportOptions,
    Recorded,
    Recording,
    StoredBody,
    protocol_tag,
    recorded_at,
    unix_time,
    write_archive,
)

TTFB_FIELD = "Clarke-Server-TTFB-Ms"
MAX_LINE = 64 * 1024  # a WARC or HTTP header line, a chunk-size line
WARCINFO_BYTES = 1 << 20  # what is read of a warcinfo record
PIECE = 1 << 16


@dataclass(frozen=True)
class WarcOptions:
    name: str | None  # None: from the page's host
    start_url: str | None = None
    limits: Limits = field(default_factory=Limits.from_env)


class _Bounded(Exception):
    """The file passed one of the bounds below (the message says which)."""


class _BoundedReader(DecompressingBufferedReader):
    """warcio's reader of the file (its own gzip layer taken off), with lines of at most
    MAX_LINE bytes and at most `limit` bytes in all once decompressed. warcio reads
    every header line through `readline` and every block through `_decompress`: these
    two are where a bomb in the file's own layer would spend memory or time."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        super().__init__(stream, block_size=BUFF_SIZE)
        self.limit = limit
        self.seen = 0

    def _decompress(self, data: bytes) -> bytes:
        out: bytes = super()._decompress(data)
        self.seen += len(out)
        if self.seen > self.limit:
            raise _Bounded(f"holds more than {self.limit // MIB} MiB once decompressed")
        return out

    def readline(self, length: int | None = None) -> bytes:
        cap = MAX_LINE + 1 if length is None else min(length, MAX_LINE + 1)
        line: bytes = super().readline(cap)
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            raise _Bounded(f"has a header line longer than {MAX_LINE} bytes")
        return line


class _Records(ArchiveIterator):
    """warcio's record iterator over a _BoundedReader (warcio 1.8.1 makes its reader in
    __init__ and reads nothing before the first record)."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        super().__init__(stream, arc2warc=True)
        self.reader = _BoundedReader(self.fh, limit)


@dataclass
class _Request:
    method: str
    date: float


def _concurrent(rec_headers: Any) -> list[str]:
    """Every WARC-Concurrent-To of a record (the field may repeat)."""
    return [v for k, v in rec_headers.headers if k.lower() == "warc-concurrent-to"]


def _ttfb(value: str | None, where: str) -> float | None:
    if value is None:
        return None
    try:
        ms = float(value)
    except ValueError:
        raise InputError(f"{where}: {TTFB_FIELD} {value[:40]!r} is not a number") from None
    return ms if 0 <= ms < float("inf") else None


def _status(http: Any, where: str) -> int:
    raw = http.get_statuscode() or ""
    if not raw.isdigit() or len(raw) != 3:
        line = (http.statusline or "")[:60]
        raise InputError(f"{where}: the status line {line!r} has no three-digit status")
    return int(raw)


def _raw(stream: Any, where: str) -> Iterator[bytes]:
    """The rest of a record's payload, in pieces; InputError where the file ends inside
    the record (cut short)."""
    if not isinstance(stream, LimitReader):
        raise InputError(f"{where}: the record has no Content-Length")
    while stream.limit > 0:
        data = stream.read(PIECE)
        if not data:
            raise InputError(f"{where}: the file ends inside the record (cut short?)")
        yield data


def _dechunked(stream: Any, where: str) -> Iterator[bytes]:
    """A chunked message body's data (RFC 9112 section 7.1), in pieces."""
    while True:
        line = stream.readline()
        if not line:
            raise InputError(f"{where}: the file ends inside the chunked body (cut short?)")
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise InputError(f"{where}: a bad chunk size {size_text[:20]!r}") from None
        if size == 0:
            return
        while size > 0:
            data = stream.read(min(PIECE, size))
            if not data:
                raise InputError(f"{where}: the file ends inside a chunk (cut short?)")
            size -= len(data)
            yield data
        stream.readline()  # the CRLF after the chunk


def _body(record: Any, limits: Limits, store: BodyStore, where: str) -> StoredBody | None:
    http_headers = record.http_headers.headers
    coding = headers.content_encoding(http_headers)
    if coding and not decoding.supported(coding):
        raise InputError(
            f"{where}: the body is in content coding {coding}, which Clarke does not decode "
            f"({', '.join(decoding.CODINGS)})"
        )
    chunked = "chunked" in (headers.value(http_headers, "transfer-encoding") or "").lower()
    raw = _raw(record.raw_stream, where)
    if chunked:
        raw = _dechunked(record.raw_stream, where)
    try:
        return store.put(decoding.decode(raw, coding, limits.body_bytes), where)
    except decoding.TooLarge:
        breach = limits.body_breach(limits.body_bytes + 1)
        raise ValidationFailed(where, [f"its body decodes to {breach}"]) from None
    except decoding.DecodeError as e:
        raise InputError(f"{where}: the body does not decode ({coding}): {e}") from None


def _software(record: Any) -> str:
    info = record.raw_stream.read(WARCINFO_BYTES).decode("utf-8", "replace")
    for line in info.splitlines():
        if line.lower().startswith("software:"):
            return line.split(":", 1)[1].strip()[:TOOL_CHARS]
    return ""


def _parsed(path: Path, records: Iterator[Any]) -> Iterator[Any]:
    """The records warcio parses; ValidationFailed naming the record where warcio's
    own parsing fails on what it did not expect (a response without WARC-Target-URI
    breaks it with an AttributeError, for one)."""
    n = 0
    it = iter(records)
    while True:
        n += 1
        try:
            yield next(it)
        except StopIteration:
            return
        except (AttributeError, TypeError, KeyError, IndexError, UnicodeError) as e:
            raise ValidationFailed(
                str(path), [f"record {n}: warcio cannot parse it ({type(e).__name__}: {e})"]
            ) from None


def _read(path: Path, limits: Limits, store: BodyStore) -> Recording:
    requests: dict[str, _Request] = {}
    responses: list[tuple[Recorded, list[str]]] = []  # with the ids that name its request
    skipped: list[str] = []
    software = ""
    with path.open("rb") as stream:
        for n, record in enumerate(_parsed(path, _Records(stream, 2 * limits.site_bytes)), 1):
            rtype = record.rec_type
            rh = record.rec_headers
            where = f"{path}: record {n} ({(rh.get_header('WARC-Record-ID') or '?')[:80]})"
            if rtype == "warcinfo":
                software = software or _software(record)
                continue
            if rtype == "request" and record.http_headers is not None:
                req = _Request(
                    (record.http_headers.protocol or "GET")[:16],
                    unix_time(rh.get_header("WARC-Date")) or 0.0,
                )
                for key in (rh.get_header("WARC-Record-ID"), *_concurrent(rh)):
                    if key:
                        requests[key] = req
                continue
            uri = rh.get_header("WARC-Target-URI") or ""
            if rtype != "response" or record.http_headers is None:
                skipped.append(f"{where}: a {rtype} record{f' for {uri[:120]}' if uri else ''}")
                continue
            if not uri:
                skipped.append(f"{where}: a response without WARC-Target-URI")
                continue
            if rh.get_header("WARC-Truncated"):
                raise InputError(
                    f"{where}: {uri[:120]}: truncated ({rh.get_header('WARC-Truncated')[:40]})"
                )
            http = record.http_headers
            rec = Recorded(
                started=unix_time(rh.get_header("WARC-Date")) or 0.0,
                method="GET",
                url=uri,
                status=_status(http, where),
                headers=list(http.headers),
                body=_body(record, limits, store, where),
                ttfb_ms=_ttfb(rh.get_header(TTFB_FIELD), where),
                address=rh.get_header("WARC-IP-Address") or None,
                protocol=protocol_tag(http.protocol),
                where=where,
            )
            keys = [rh.get_header("WARC-Record-ID"), *_concurrent(rh)]
            responses.append((rec, [k for k in keys if k]))
    out = []
    for rec, keys in responses:
        found = next((requests[k] for k in keys if k in requests), None)
        if found is not None:
            rec = replace(rec, method=found.method, started=found.date or rec.started)
        out.append(rec)
    source = Source(
        kind="warc",
        tool=software,
        file=path.name,
        recorded_at=recorded_at(min((r.started for r in out if r.started), default=None)),
    )
    return Recording(out, skipped, source)


def read_warc(path: Path, limits: Limits, store: BodyStore) -> Recording:
    """The exchanges of the WARC file at `path` (bodies into `store`), what was left
    out, and where it came from (its warcinfo record's `software`)."""
    try:
        return _read(path, limits, store)
    except _Bounded as e:
        raise ValidationFailed(
            str(path), [f"{e} (--max-site-mb or the archive limits bound it)"]
        ) from None
    except ArchiveLoadFailed as e:
        raise ValidationFailed(str(path), [f"not a WARC file warcio can read: {e}"]) from None
    except (EOFError, ValueError) as e:  # warcio's parsers on a file cut inside headers
        raise ValidationFailed(str(path), [f"not a WARC file warcio can read: {e}"]) from None
    except OSError as e:
        raise ValidationFailed(str(path), [f"cannot read: {e.strerror or e}"]) from None


def import_warc(path: Path, out: Path, options: WarcOptions) -> Imported:
    """The archive of the WARC file `path`, written to `out`."""
    return write_archive(
        out,
        ImportOptions(options.name, options.start_url, options.limits),
        lambda store: read_warc(path, options.limits, store),
    )
