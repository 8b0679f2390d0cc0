"""Importing a HAR file (HTTP Archive 1.2) with response content into a site archive.

Firefox ("Save All As HAR"), Chromium's DevTools ("Export HAR (with content)"),
Browsertime (`--firefox.includeResponseBodies all`, `--chrome.includeResponseBodies
all`) and mitmproxy (`--set hardump=FILE`) write HARs whose entries carry:

    startedDateTime          when the request started (exchanges are ordered by it)
    request.method, .url
    response.status, .httpVersion, .headers
    response.content.text    the body, decoded (no content coding); `encoding: base64`
                             for bytes, else text in the response's charset
    timings.wait             the server's time to first byte (ms; -1: unknown)
    serverIPAddress          the address the origin had (optional)

Entries the browser answered from its cache (`_fromCache`), entries without a response
(status 0) and entries that are not https are left out and listed. An entry whose body
has bytes but no `text` makes the import fail naming it (the HAR was saved without
content), unless `skip_incomplete` leaves it out too."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clarke.errors import InputError, ValidationFailed
from clarke.schema import problems_of
from clarke.sites.archive import TOOL_CHARS, Source
from clarke.sites.archive_files import MIB, Limits
from clarke.sites.store import (
    BodyStore,
    Imported,
    ImportOptions,
    Recorded,
    Recording,
    protocol_tag,
    recorded_at,
    unix_time,
    write_archive,
)


class _Lenient(BaseModel):
    # Browsers add fields of their own (`_transferSize`, `_initiator`...): ignored.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class HarHeader(_Lenient):
    name: str
    value: str


class HarContent(_Lenient):
    size: int | None = None
    mimeType: str = ""
    text: str | None = None
    encoding: str | None = None


class HarRequest(_Lenient):
    method: str
    url: str


class HarResponse(_Lenient):
    status: int
    httpVersion: str = ""
    headers: list[HarHeader] = Field(default_factory=list)
    content: HarContent = HarContent()


class HarTimings(_Lenient):
    wait: float | None = None


class HarEntry(_Lenient):
    startedDateTime: str
    request: HarRequest
    response: HarResponse
    timings: HarTimings | None = None
    serverIPAddress: str | None = None
    from_cache: str | None = Field(default=None, alias="_fromCache")


class HarCreator(_Lenient):
    name: str = ""
    version: str = ""


class HarLog(_Lenient):
    version: str = ""
    creator: HarCreator = HarCreator()
    entries: list[HarEntry]


class HarFile(_Lenient):
    log: HarLog


@dataclass(frozen=True)
class HarOptions:
    """How to import: the archive's name, the page's URL (default: the first HTML
    response), and whether entries saved without their body are left out."""

    name: str | None  # None: from the page's host
    start_url: str | None = None
    skip_incomplete: bool = False
    limits: Limits = field(default_factory=Limits.from_env)

    def har_bytes(self) -> int:
        """The largest HAR read: every body may be in it as base64 (4 bytes for 3) and
        JSON-escaped, beside an index's worth of entries."""
        return self.limits.site_bytes * 2 + self.limits.index_bytes


def _charset(content_type: str) -> str | None:
    """The charset a Content-Type names, or None."""
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            return value.strip('"').lower()
    return None


def _unnamed_charset(writer: str, content_type: str) -> str:
    """The charset a HAR's writer decoded a body in when the response named none:
    mitmproxy takes Latin-1 (UTF-8 for JSON), browsers UTF-8."""
    if writer.lower().startswith("mitmproxy") and "json" not in content_type:
        return "latin-1"
    return "utf-8"


def body_of(entry: HarEntry, where: str, writer: str = "") -> bytes:
    """The entry's body bytes from content.text: base64, or text its writer decoded in
    the charset the response named, else in the writer's own default (`writer`: the HAR's
    creator). `content.size` settles it where it can: the first of those charsets, then
    UTF-8 and Latin-1, that gives that many bytes. It cannot always: mitmproxy gives the
    size of the body as sent, content coding and all; then the first charset is taken."""
    content = entry.response.content
    if content.text is None:
        return b""
    if (content.encoding or "").lower() == "base64":
        try:
            return base64.b64decode(content.text, validate=False)
        except (binascii.Error, ValueError) as e:
            raise InputError(f"{where}: response.content.text is not valid base64: {e}") from None
    ctype = next((h.value for h in entry.response.headers if h.name.lower() == "content-type"), "")
    ctype = ctype or content.mimeType
    first = _charset(ctype) or _unnamed_charset(writer, ctype)
    encoded: list[bytes] = []
    for charset in dict.fromkeys([first, "utf-8", "latin-1"]):
        try:
            data = content.text.encode(charset)
        except (LookupError, UnicodeEncodeError):
            continue
        if content.size and len(data) == content.size:
            return data
        encoded.append(data)
    if not encoded:
        raise InputError(f"{where}: response.content.text is in no charset tried ({first})")
    return encoded[0]


def _started(entry: HarEntry, where: str) -> float:
    started = unix_time(entry.startedDateTime)
    if started is None:
        raise InputError(
            f"{where}: startedDateTime {entry.startedDateTime[:60]!r} is not an ISO 8601 time "
            "that a Unix time can hold"
        )
    return started


def _address(raw: str | None) -> str | None:
    """serverIPAddress as an address: Chromium writes IPv6 in brackets."""
    return raw.strip().strip("[]") or None if raw else None


def read_har(path: Path, max_bytes: int = HarOptions(None).har_bytes()) -> HarFile:
    """The HAR file at `path` (at most `max_bytes`), parsed."""
    try:
        with path.open("rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise ValidationFailed(str(path), [f"cannot read: {e.strerror or e}"]) from None
    if len(raw) > max_bytes:
        raise ValidationFailed(
            str(path),
            [f"larger than the {max_bytes // MIB} MiB a HAR of an archive's limits can be"],
        )
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise ValidationFailed(str(path), [f"not valid JSON: {e}"]) from None
    except RecursionError:
        raise ValidationFailed(str(path), ["not a HAR: nested too deeply"]) from None
    try:
        return HarFile.model_validate(data)
    except ValidationError as e:
        raise ValidationFailed(str(path), problems_of(e)) from None


def records(
    har: HarFile, skip_incomplete: bool, file: str, store: BodyStore
) -> tuple[list[Recorded], list[str]]:
    """The entries to import (their bodies put in `store`), and the ones left out with
    the reason (each named by `file` and its place in it)."""
    out: list[Recorded] = []
    skipped: list[str] = []
    for i, entry in enumerate(har.log.entries):
        where = f"{file}: log.entries[{i}]"
        what = f"{where}: {entry.request.method} {entry.request.url[:120]}"
        if entry.from_cache:
            skipped.append(f"{what}: answered from the browser's {entry.from_cache} cache")
            continue
        if entry.response.status == 0:
            skipped.append(f"{what}: no response")
            continue
        content = entry.response.content
        if content.text is None and (content.size or 0) > 0:
            if skip_incomplete:
                skipped.append(f"{what}: saved without its body")
                continue
            raise InputError(
                f"{what}: the response has {content.size} bytes but the HAR holds none of "
                "them (save the HAR with content: docs/sites.md)"
            )
        wait = entry.timings.wait if entry.timings else None
        out.append(
            Recorded(
                started=_started(entry, where),
                method=entry.request.method,
                url=entry.request.url,
                status=entry.response.status,
                headers=[(h.name, h.value) for h in entry.response.headers],
                body=store.put_bytes(body_of(entry, where, har.log.creator.name), where),
                ttfb_ms=wait if wait is not None and wait >= 0 else None,
                address=_address(entry.serverIPAddress),
                protocol=protocol_tag(entry.response.httpVersion),
                where=where,
            )
        )
    return out, skipped


def import_har(path: Path, out: Path, options: HarOptions) -> Imported:
    """The archive of the HAR file `path`, written to `out`."""
    har = read_har(path, options.har_bytes())

    def read(store: BodyStore) -> Recording:
        recs, skipped = records(har, options.skip_incomplete, str(path), store)
        creator = har.log.creator
        source = Source(
            kind="har",
            tool=f"{creator.name} {creator.version}".strip()[:TOOL_CHARS],
            file=path.name,
            recorded_at=recorded_at(min((r.started for r in recs), default=None)),
        )
        return Recording(recs, skipped, source)

    return write_archive(out, ImportOptions(options.name, options.start_url, options.limits), read)
