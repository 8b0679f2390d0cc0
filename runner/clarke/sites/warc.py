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
(WARC-Truncated) or one in a content coding warcio cannot take off makes the import fail
naming the record."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import BufferedReader, try_brotli_init
from warcio.exceptions import ArchiveLoadFailed

from clarke.errors import InputError, ValidationFailed
from clarke.sites import headers
from clarke.sites.archive import Source
from clarke.sites.store import Imported, Recorded, protocol_tag, write_archive

TTFB_FIELD = "Clarke-Server-TTFB-Ms"
try_brotli_init()  # warcio decodes br once the brotli module is importable


@dataclass(frozen=True)
class WarcOptions:
    name: str | None  # None: from the page's host
    start_url: str | None = None


@dataclass
class _Request:
    method: str
    date: float


def _concurrent(rec_headers: Any) -> list[str]:
    """Every WARC-Concurrent-To of a record (the field may repeat)."""
    return [v for k, v in rec_headers.headers if k.lower() == "warc-concurrent-to"]


def _date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def _ttfb(value: str | None, where: str) -> float | None:
    if value is None:
        return None
    try:
        ms = float(value)
    except ValueError:
        raise InputError(f"{where}: {TTFB_FIELD} {value!r} is not a number") from None
    return ms if ms >= 0 else None


def _body(record: Any, where: str) -> bytes:
    coding = headers.content_encoding(record.http_headers.headers)
    if coding and coding not in BufferedReader.get_supported_decompressors():
        raise InputError(
            f"{where}: the body is in content coding {coding}, which warcio cannot decode"
        )
    try:
        data: bytes = record.content_stream().read()
    except Exception as e:  # zlib.error, brotli.error, ...: the decoders' own exceptions
        raise InputError(
            f"{where}: the body does not decode ({coding or 'chunked'}): {e}"
        ) from None
    return data


def read_warc(path: Path) -> tuple[list[Recorded], list[str], str]:
    """The exchanges of the WARC file at `path`, what was left out, and the software that
    wrote it (its warcinfo record's `software`)."""
    requests: dict[str, _Request] = {}
    responses: list[tuple[Recorded, list[str]]] = []  # with the ids that name its request
    skipped: list[str] = []
    software = ""
    try:
        with path.open("rb") as stream:
            for n, record in enumerate(ArchiveIterator(stream, arc2warc=True), start=1):
                rtype = record.rec_type
                rh = record.rec_headers
                where = f"{path}: record {n} ({rh.get_header('WARC-Record-ID') or '?'})"
                if rtype == "warcinfo":
                    info = record.content_stream().read().decode("utf-8", "replace")
                    for line in info.splitlines():
                        if line.lower().startswith("software:"):
                            software = line.split(":", 1)[1].strip()
                    continue
                if rtype == "request" and record.http_headers is not None:
                    req = _Request(
                        record.http_headers.protocol or "GET",
                        _date(rh.get_header("WARC-Date")) or 0.0,
                    )
                    for key in (rh.get_header("WARC-Record-ID"), *_concurrent(rh)):
                        if key:
                            requests[key] = req
                    continue
                uri = rh.get_header("WARC-Target-URI") or ""
                if rtype != "response" or record.http_headers is None:
                    skipped.append(f"{where}: a {rtype} record{f' for {uri[:120]}' if uri else ''}")
                    continue
                if rh.get_header("WARC-Truncated"):
                    raise InputError(
                        f"{where}: {uri[:120]}: truncated ({rh.get_header('WARC-Truncated')})"
                    )
                http = record.http_headers
                rec = Recorded(
                    started=_date(rh.get_header("WARC-Date")) or 0.0,
                    method="GET",
                    url=uri,
                    status=int(http.get_statuscode() or 0),
                    headers=list(http.headers),
                    body=_body(record, where),
                    ttfb_ms=_ttfb(rh.get_header(TTFB_FIELD), where),
                    address=rh.get_header("WARC-IP-Address") or None,
                    protocol=protocol_tag(http.protocol),
                    where=where,
                )
                keys = [rh.get_header("WARC-Record-ID"), *_concurrent(rh)]
                responses.append((rec, [k for k in keys if k]))
    except ArchiveLoadFailed as e:
        raise ValidationFailed(str(path), [f"not a WARC file warcio can read: {e}"]) from None
    except OSError as e:
        raise ValidationFailed(str(path), [f"cannot read: {e.strerror or e}"]) from None
    out = []
    for rec, keys in responses:
        found = next((requests[k] for k in keys if k in requests), None)
        if found is not None:
            rec = replace(rec, method=found.method, started=found.date or rec.started)
        out.append(rec)
    return out, skipped, software


def import_warc(path: Path, out: Path, options: WarcOptions) -> Imported:
    """The archive of the WARC file `path`, written to `out`."""
    recs, skipped, software = read_warc(path)
    started = min((r.started for r in recs if r.started), default=None)
    source = Source(
        kind="warc",
        tool=software,
        file=path.name,
        recorded_at=dt.datetime.fromtimestamp(started, dt.UTC).isoformat() if started else "",
    )
    imported = write_archive(out, options.name, source, recs, options.start_url)
    imported.skipped[:0] = skipped
    return imported
