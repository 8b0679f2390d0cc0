"""The site archive: a recorded site as a directory that any program can read.

    DIR/site.json          the origins and the exchanges (format clarke-site, version 1)
    DIR/bodies/<sha256>    each response body once, named by the SHA-256 of its bytes

An origin is a host and port the page's requests went to, with the address it had when
it was recorded, the protocols it offered and the names its certificate covered. An
exchange is one request and its response: method, URL, status, the response's headers,
its body by hash (the body as the page uses it: any content coding taken off, the coding
kept in `content_encoding`) and the server's time to first byte. docs/sites.md gives
every field; `SiteArchive.model_json_schema()` is the same, as JSON Schema.

`read(DIR)` checks everything before anything uses the archive: the JSON against the
model, every exchange's origin, every body's presence, size and hash, each file read as
untrusted input (archive_files.py: no links, regular files only, sizes and limits
checked before a byte is read). A broken archive is `ValidationFailed` (exit 2) naming
the entry. origin checks the same rules before it replays (replay/archive.rs).

Hosts are DNS names a replay can answer: never an IP address literal (nor a name a
browser reads as one, such as `127.1`: WHATWG URL's "ends in a number"), never
`localhost` or a name under it (RFC 6761: a browser answers them with its own loopback).
A response replays as recorded: a final status (200 to 599; an interim 1xx is not a
response), header values without control characters (CR and LF would end the header)."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, StringConstraints, field_validator, model_validator

from clarke.errors import ValidationFailed
from clarke.schema import StrictModel, located_error, parse
from clarke.sites import archive_files
from clarke.sites.archive_files import ArchiveDir, ArchiveFileError, Limits
from clarke.vocab import HttpTag, HttpVersion

FORMAT: Literal["clarke-site"] = "clarke-site"
VERSION: Literal[1] = 1
SITE_JSON = archive_files.SITE_JSON
BODIES = archive_files.BODIES
HTTPS_PORT = 443

# A DNS name of lowercase labels (an archive keeps names as browsers send them).
_LABEL = r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?"
# What a URL in an archive may hold: printable ASCII (a browser percent-encodes the rest).
_URL_CHARS = re.compile(r"[\x21-\x7e]*")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")
LOOPBACK_NAME = "localhost"


def host_problem(host: str) -> str | None:
    """Why a replay cannot serve `host` (an IP address literal, a name a browser takes
    for one, localhost), or None."""
    if host.startswith("[") or ":" in host:
        return "is an IPv6 address literal: a replay serves names, not addresses"
    last = host.rstrip(".").rsplit(".", 1)[-1]
    if _NUMERIC_LABEL.fullmatch(last):
        return "is an IP address literal (or ends in a number, which a browser reads as one)"
    if host == LOOPBACK_NAME or host.endswith(f".{LOOPBACK_NAME}"):
        return "is localhost, which a browser answers with its own loopback"
    return None


def _servable(host: str) -> str:
    problem = host_problem(host)
    if problem:
        raise ValueError(f"the host {host[:80]} {problem}")
    return host


HostName = Annotated[
    str,
    StringConstraints(pattern=rf"^{_LABEL}(\.{_LABEL})*$", max_length=253),
    AfterValidator(_servable),
]
# A certificate name: a host name, or a wildcard for one label (*.example.org).
CertificateName = Annotated[
    str, StringConstraints(pattern=rf"^(\*\.)?{_LABEL}(\.{_LABEL})*$", max_length=253)
]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
SiteName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=64)]
HeaderName = Annotated[
    str, StringConstraints(pattern=r"^[a-z0-9!#$%&'*+.^_`|~-]+$", max_length=256)
]
# Any character but the controls (HTAB aside): CR and LF would end the header.
HeaderValue = Annotated[
    str, StringConstraints(pattern=r"^[^\x00-\x08\x0a-\x1f\x7f]*$", max_length=65536)
]
FIRST_FINAL_STATUS = 200
LAST_STATUS = 599
Protocol = HttpTag
PROTOCOLS: tuple[HttpTag, ...] = tuple(v.tag for v in HttpVersion)
MAX_TTFB_MS = 600_000.0
TOOL_CHARS = 200


def authority(host: str, port: int) -> str:
    """host, or host:port where the port is not 443 (as a browser writes it)."""
    return host if port == HTTPS_PORT else f"{host}:{port}"


def normalise(url: str) -> str:
    """A URL as an archive keeps it: lowercase scheme and host, no default port, no
    fragment; ValueError where it has no host."""
    parts = urlsplit(url.strip())
    host = parts.hostname
    if not host:
        raise ValueError("has no host")
    try:
        port = parts.port
    except ValueError as e:
        raise ValueError(f"has a bad port: {e}") from None
    netloc = (
        host
        if port in (None, HTTPS_PORT) and parts.scheme.lower() == "https"
        else (f"{host}:{port}" if port is not None else host)
    )
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{netloc}{parts.path or '/'}{query}"


def split_url(url: str) -> tuple[str, int, str]:
    """(host, port, path with its query) of an https URL; ValueError saying what is
    wrong with anything else (another scheme, a user name, a fragment, no host)."""
    if not _URL_CHARS.fullmatch(url):
        raise ValueError(
            "has a space, a control character or a non-ASCII one "
            "(a browser sends them percent-encoded)"
        )
    parts = urlsplit(url)
    if parts.scheme != "https":
        raise ValueError(f"must be an https URL, not {parts.scheme or 'a relative one'!r}")
    if "@" in parts.netloc:
        raise ValueError("must not carry a user name or password")
    if parts.fragment:
        raise ValueError("must not carry a fragment (#...): browsers do not send it")
    host = parts.hostname or ""
    if not host:
        raise ValueError("has no host")
    problem = host_problem(host)
    if problem:
        raise ValueError(f"its host {problem}")
    if parts.netloc.split(":")[0] != host:
        raise ValueError("must have a lowercase host (normalise(url) writes it so)")
    port = HTTPS_PORT if parts.port is None else parts.port  # ValueError for a bad port
    if port == 0:
        raise ValueError("has a bad port 0")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return host, port, path


class Source(StrictModel):
    """Where the archive came from: `kind` har, warc, generator or files; the tool that
    wrote the recording, the file imported, and when the site was recorded (ISO 8601)."""

    kind: Literal["har", "warc", "generator", "files"]
    tool: Annotated[str, Field(max_length=TOOL_CHARS)] = ""
    file: Annotated[str, Field(max_length=1000)] = ""
    recorded_at: Annotated[str, Field(max_length=64)] = ""


class Origin(StrictModel):
    host: HostName
    port: Annotated[int, Field(ge=1, le=65535, strict=True)] = HTTPS_PORT
    # The address the origin had when recorded; origins that shared one share a testbed
    # address (placement.py), so connection reuse and coalescing behave as recorded.
    address: str | None = None
    protocols: Annotated[list[Protocol], Field(min_length=1, max_length=3)]
    certificate_names: Annotated[list[CertificateName], Field(min_length=1, max_length=500)]

    @field_validator("address")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        if v is not None:
            ipaddress.ip_address(v)  # ValueError names it
        return v

    @field_validator("protocols")
    @classmethod
    def _protocols(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("a protocol is listed more than once")
        return sorted(v, key=PROTOCOLS.index)

    @model_validator(mode="after")
    def _covered(self) -> Origin:
        if not covers(self.certificate_names, self.host):
            raise located_error(
                ("certificate_names",), f"no certificate name covers the host {self.host}"
            )
        return self

    @property
    def authority(self) -> str:
        return authority(self.host, self.port)


def covers(names: list[str], host: str) -> bool:
    """Whether a certificate with these names is valid for `host` (RFC 6125: a wildcard
    stands for exactly one leftmost label)."""
    for name in names:
        if name == host:
            return True
        if name.startswith("*.") and "." in host and host.split(".", 1)[1] == name[2:]:
            return True
    return False


class Exchange(StrictModel):
    method: Annotated[str, StringConstraints(pattern=r"^[A-Z]{1,16}$")]
    url: Annotated[str, Field(max_length=8192)]
    status: Annotated[int, Field(ge=FIRST_FINAL_STATUS, le=LAST_STATUS, strict=True)]
    # The response's headers as recorded, names in lowercase, without the ones that
    # belong to one connection or one encoding (headers.py).
    headers: Annotated[list[tuple[HeaderName, HeaderValue]], Field(max_length=500)] = Field(
        default_factory=list
    )
    # The content coding the server sent the body in (gzip, br, ...), or None.
    content_encoding: Annotated[str, StringConstraints(pattern=r"^[a-z0-9-]{1,32}$")] | None = None
    body: Sha256 | None = None  # None: an empty body
    size: Annotated[int, Field(ge=0, strict=True)] = 0  # the body's bytes
    server_ttfb_ms: (
        Annotated[float, Field(ge=0, le=MAX_TTFB_MS, allow_inf_nan=False, strict=True)] | None
    ) = None

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        split_url(v)
        return v

    @model_validator(mode="after")
    def _body_and_size(self) -> Exchange:
        if (self.body is None) != (self.size == 0):
            raise located_error(("size",), "size is 0 exactly when there is no body")
        return self

    @property
    def authority(self) -> str:
        host, port, _ = split_url(self.url)
        return authority(host, port)

    @property
    def path(self) -> str:
        return split_url(self.url)[2]

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)

    def label(self, index: int) -> str:
        """How an error names it: exchanges[3] (GET https://...)."""
        return f"exchanges[{index}] ({self.method} {self.url[:200]})"


class SiteArchive(StrictModel):
    format: Literal["clarke-site"] = FORMAT
    version: Literal[1] = VERSION
    name: SiteName
    start_url: Annotated[str, Field(max_length=8192)]
    source: Source
    origins: Annotated[list[Origin], Field(min_length=1, max_length=2000)]
    exchanges: Annotated[list[Exchange], Field(min_length=1, max_length=100_000)]

    @field_validator("version", mode="before")
    @classmethod
    def _version_is_a_whole_number(cls, v: object) -> object:
        if type(v) is not int:  # not True, not 1.0: JSON's 1, as origin reads it
            raise ValueError(f"must be the number {VERSION}, not {str(v)[:20]!r}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> SiteArchive:
        seen: set[str] = set()
        for i, o in enumerate(self.origins):
            if o.authority in seen:
                raise located_error(("origins", i), f"origin {o.authority} is listed twice")
            seen.add(o.authority)
        for i, e in enumerate(self.exchanges):
            if e.authority not in seen:
                raise located_error(
                    ("exchanges", i, "url"),
                    f"{e.method} {e.url[:200]}: its origin {e.authority} is not in origins",
                )
        try:
            split_url(self.start_url)
        except ValueError as e:
            raise located_error(("start_url",), str(e)) from None
        if not any(e.method == "GET" and e.url == self.start_url for e in self.exchanges):
            raise located_error(("start_url",), f"no GET exchange has the URL {self.start_url}")
        return self

    def origin(self, authority_: str) -> Origin:
        return next(o for o in self.origins if o.authority == authority_)

    def hosts(self) -> list[str]:
        return [o.host for o in self.origins]

    def to_json(self) -> bytes:
        """site.json's bytes: the same archive always gives the same bytes."""
        data = self.model_dump(mode="json")
        return (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode()

    def content_digest(self) -> str:
        """SHA-256 of what a replay serves (origins and exchanges, server times left
        out): two imports of one recording have the same one whatever their formats."""
        exchanges = [e.model_dump(mode="json", exclude={"server_ttfb_ms"}) for e in self.exchanges]
        data = {"origins": [o.model_dump(mode="json") for o in self.origins], "x": exchanges}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Site:
    """An archive read from its directory and checked."""

    path: Path
    archive: SiteArchive
    digest: str  # SHA-256 of site.json's bytes
    limits: Limits = field(default_factory=Limits)

    @property
    def name(self) -> str:
        return self.archive.name

    def body_path(self, sha256: str) -> Path:
        return self.path / BODIES / sha256

    def body(self, exchange: Exchange) -> bytes:
        """An exchange's body, read again as untrusted input (it was checked, but the
        directory is not Clarke's)."""
        if not exchange.body:
            return b""
        with archive_files.opened(self.path, self.limits) as d:
            try:
                return d.read_body(exchange.body, exchange.size)
            except ArchiveFileError as e:
                raise ValidationFailed(str(self.path), [str(e)]) from None

    @cached_property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.archive.exchanges)


def _no_repeated_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object, refused where a key is repeated (JSON leaves it to the reader
    which one counts: origin refuses it too, so no two readers ever disagree)."""
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key[:60]!r} is repeated in an object")
        out[key] = value
    return out


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read(path: Path, limits: Limits | None = None) -> Site:
    """The archive in directory `path`, checked: ValidationFailed naming each broken
    entry (schema, unknown origin, a body missing, a link, not a regular file, of
    another size than its exchange says, over a limit, or whose hash is not its name).
    `limits`: Limits.from_env() when not given."""
    limits = limits or Limits.from_env()
    site_json = path / SITE_JSON
    with archive_files.opened(path, limits) as d:
        try:
            raw = d.read_index()
        except ArchiveFileError as e:
            raise ValidationFailed(str(site_json), [str(e)]) from None
        try:
            data = json.loads(raw, object_pairs_hook=_no_repeated_keys)
        except ValueError as e:
            raise ValidationFailed(str(site_json), [f"not valid JSON: {e}"]) from None
        except RecursionError:
            raise ValidationFailed(str(site_json), ["not an archive: nested too deeply"]) from None
        if (
            isinstance(data, dict)
            and data.get("format") == FORMAT
            and data.get("version") != VERSION
        ):
            raise ValidationFailed(
                str(site_json),
                [f"version: this Clarke reads version {VERSION}, not {data.get('version')!r}"],
            )
        archive = parse(SiteArchive, data, str(site_json))
        problems = check_bodies(d, archive)
    if problems:
        raise ValidationFailed(str(path), problems)
    return Site(path, archive, sha256_of(raw), limits)


def check_bodies(d: ArchiveDir, archive: SiteArchive) -> list[str]:
    """Every body an exchange names: within the limits, present, a regular file of its
    size, its content's hash its name. Each body is read once, however many exchanges
    share it; the limits are checked on the declared sizes before any body is read."""
    sizes: dict[str, tuple[int, int]] = {}  # name -> (size, first exchange)
    problems: list[str] = []
    for i, e in enumerate(archive.exchanges):
        if e.body is None:
            continue
        first = sizes.setdefault(e.body, (e.size, i))
        if first[0] != e.size:
            problems.append(
                f"{e.label(i)}: size says {e.size}, "
                f"exchanges[{first[1]}] says {first[0]} for the same body"
            )
    breach = d.limits.site_breach(sum(size for size, _ in sizes.values()))
    if breach:
        return [*problems, breach]
    for name, (size, i) in sizes.items():
        where = archive.exchanges[i].label(i)
        try:
            found = d.hash_body(name, size)
        except ArchiveFileError as e:
            problems.append(f"{where}: {e}")
            continue
        if found != name:
            problems.append(f"{where}: {BODIES}/{name} has the SHA-256 {found}, not its name")
    return problems


def write(path: Path, archive: SiteArchive) -> Path:
    """site.json into `path` (its bodies are already there: store.py writes them)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / SITE_JSON).write_bytes(archive.to_json())
    return path
