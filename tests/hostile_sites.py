"""A corpus of hostile site archives and recordings, made anew where it is needed.

An archive travels between people; these are the ones a careless or hostile sender
could hand over. Each archive case is a small valid archive (tests/site_archive.py)
changed in one way; `CASES` says what each is and whether `clarke site check` and
origin's replay must refuse it (`refused`) or take it (`servable`). They are generated,
not kept in tests/data: git keeps neither FIFOs nor sparse files, and links to a host's
files are made for the host the test runs on. `python tests/hostile_sites.py DIR` writes
the corpus into DIR (empty or new) to try it by hand.

The recordings (`gzip_bomb_warc`, ...) are bombs and broken files for the importers:
each is a few MB on disk and decodes to GiBs."""

from __future__ import annotations

import json
import os
import shutil
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import brotli

from site_archive import write_three_origins

BODIES = "bodies"
SITE_JSON = "site.json"
GIB = 1 << 30


def _index(d: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((d / SITE_JSON).read_text())
    return data


def _rewrite(d: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = _index(d)
    change(data)
    (d / SITE_JSON).write_text(json.dumps(data))


def _body(d: Path, index: int = 1) -> tuple[Path, dict[str, Any]]:
    """The body file of exchange `index` (1: the CSS), and the exchange."""
    e = _index(d)["exchanges"][index]
    return d / BODIES / e["body"], e


def _relink(path: Path, target: str) -> None:
    path.unlink()
    path.symlink_to(target)


def _replace_by_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _sparse(path: Path, size: int) -> None:
    with path.open("r+b") as f:
        f.truncate(size)


def _big_declared(d: Path) -> None:
    body, _ = _body(d)

    def declare(data: dict[str, Any]) -> None:
        data["exchanges"][1]["size"] = 10 * GIB

    _rewrite(d, declare)
    _sparse(body, 10 * GIB)


def _bodies_elsewhere(d: Path) -> None:
    elsewhere = d.parent / f".{d.name}-bodies"
    shutil.move(d / BODIES, elsewhere)
    (d / BODIES).symlink_to(elsewhere)


def _body_linked_to_its_copy(d: Path) -> None:
    body, _ = _body(d)
    copy = d.parent / f".{d.name}-{body.name}"
    shutil.copy(body, copy)
    _relink(body, str(copy))


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def _host(host: str) -> Callable[[dict[str, Any]], None]:
    """The image CDN's origin renamed `host`, its exchange and certificate with it."""

    def change(data: dict[str, Any]) -> None:
        data["origins"][2] |= {"host": host, "certificate_names": [host]}
        data["exchanges"][3]["url"] = f"https://{host}/hero.jpg"

    return change


def _header(value: str) -> Callable[[dict[str, Any]], None]:
    return _set(("exchanges", 0, "headers"), [["content-type", "text/html"], ["x-a", value]])


def _raw_index(text: Callable[[str], str]) -> Callable[[Path], None]:
    def change(d: Path) -> None:
        (d / SITE_JSON).write_text(text((d / SITE_JSON).read_text()))

    return change


def _json(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda d: _rewrite(d, change)


def _others_around(d: Path) -> None:
    """Files the archive does not name: a link to a directory, one to a file only root
    reads, a FIFO and notes. Nothing reads them; staging leaves them behind."""
    (d / "tree").symlink_to("/etc")
    (d / "notes").symlink_to("/etc/shadow")
    os.mkfifo(d / "pipe")
    (d / "README").write_text("shared by a colleague\n")
    (d / BODIES / "unnamed").write_text("a body no exchange names\n")


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Path], None]  # changes a valid archive in place
    servable: bool = False
    # A word both readers' messages hold (files), or the field the runner names.
    says: str = ""


def _deep(text: str) -> str:
    return text.rstrip()[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"


CASES: tuple[Case, ...] = (
    Case("valid", lambda d: None, servable=True),
    Case("non-ascii-header-value", _json(_header("café, naïve")), servable=True),
    Case("files-it-does-not-name", _others_around, servable=True),
    # The archive's files.
    Case("body-link-to-dev-zero", lambda d: _relink(_body(d)[0], "/dev/zero"), says="link"),
    Case("body-link-to-its-copy", _body_linked_to_its_copy, says="link"),
    Case("index-link-to-dev-zero", lambda d: _relink(d / SITE_JSON, "/dev/zero"), says="link"),
    Case("bodies-dir-a-link", _bodies_elsewhere, says="link"),
    Case("body-a-fifo", lambda d: _replace_by_fifo(_body(d)[0]), says="FIFO"),
    Case("body-a-directory", lambda d: (_body(d)[0].unlink(), _body(d)[0].mkdir()), says="directory"),
    Case("body-sparse-10gib-declared-small", lambda d: _sparse(_body(d)[0], 10 * GIB), says="size says"),
    Case("body-declared-10gib", _big_declared, says="MiB"),
    Case("index-sparse-65mib", lambda d: _sparse(d / SITE_JSON, 65 << 20), says="64 MiB"),
    Case("body-longer-than-declared", lambda d: _body(d)[0].write_bytes(b"x" * 5000), says="size says"),
    Case("body-missing", lambda d: _body(d)[0].unlink(), says="missing"),
    Case("body-hash-not-its-name", lambda d: _body(d)[0].write_bytes(b"y" * _body(d)[1]["size"]), says="SHA-256"),
    # What site.json says.
    Case("host-ipv4-literal", _json(_host("127.0.0.1")), says="host"),
    Case("host-metadata-address", _json(_host("169.254.169.254")), says="host"),
    Case("host-ends-in-a-number", _json(_host("cdn.127")), says="host"),
    Case("host-hex-number", _json(_host("0x7f000001")), says="host"),
    Case("host-localhost", _json(_host("localhost")), says="host"),
    Case("host-under-localhost", _json(_host("img.localhost")), says="host"),
    Case("header-value-crlf", _json(_header("a\r\nset-cookie: x=1")), says="headers"),
    Case("header-value-nul", _json(_header("a\x00b")), says="headers"),
    Case("header-name-uppercase", _json(_set(("exchanges", 0, "headers"), [["X-A", "1"]])), says="headers"),
    Case("status-interim", _json(_set(("exchanges", 1, "status"), 101)), says="status"),
    Case("status-600", _json(_set(("exchanges", 1, "status"), 600)), says="status"),
    Case("status-a-string", _json(_set(("exchanges", 1, "status"), "200")), says="status"),
    Case("size-a-float", _json(_set(("exchanges", 1, "size"), 1.5)), says="size"),
    Case("version-true", _json(_set(("version",), True)), says="version"),
    Case("unknown-field", _json(_set(("notes",), "x")), says="notes"),
    Case("unknown-field-in-exchange", _json(_set(("exchanges", 0, "path"), "/etc")), says="path"),
    Case("repeated-key", _raw_index(lambda t: t.rstrip()[:-1] + ', "name": "other"}'), says="name"),
    Case("nested-deeply", _raw_index(_deep), says=""),
    Case("not-json", _raw_index(lambda t: t[:100]), says="JSON"),
    Case("url-with-space", _json(_set(("exchanges", 1, "url"), "https://static.site.test/a b")), says="url"),
    Case("url-port-0", _json(_set(("exchanges", 1, "url"), "https://static.site.test:0/s.css")), says="url"),
    Case("url-fragment", _json(_set(("exchanges", 1, "url"), "https://static.site.test/s.css#x")), says="url"),
    Case("url-http", _json(_set(("exchanges", 1, "url"), "http://static.site.test/s.css")), says="url"),
    Case("url-unknown-origin", _json(_set(("exchanges", 1, "url"), "https://evil.test/s.css")), says="origin"),
    Case("start-url-not-an-exchange", _json(_set(("start_url",), "https://www.site.test/x")), says="start_url"),
    Case("certificate-not-covering", _json(_set(("origins", 0, "certificate_names"), ["*.other.test"])), says="certificate_names"),
    Case("origin-twice", _json(lambda data: data["origins"].append(data["origins"][0])), says="twice"),
    Case("protocol-unknown", _json(_set(("origins", 0, "protocols"), ["h4"])), says="protocols"),
    Case("body-without-size", _json(_set(("exchanges", 1, "size"), 0)), says="size"),
    Case("ttfb-too-long", _json(_set(("exchanges", 1, "server_ttfb_ms"), 1e9)), says="server_ttfb_ms"),
    Case("coding-uppercase", _json(_set(("exchanges", 1, "content_encoding"), "GZIP")), says="content_encoding"),
    Case("name-a-path", _json(_set(("name",), "../../etc")), says="name"),
    Case("source-kind-unknown", _json(_set(("source", "kind"), "ftp")), says="kind"),
)  # fmt: skip


def write_case(case: Case, parent: Path) -> Path:
    """The archive of `case` in `parent`/<name>."""
    d = write_three_origins(parent / case.name)
    case.make(d)
    return d


def write_corpus(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return [write_case(c, out) for c in CASES]


# --- Recordings for the importers -------------------------------------------------

ZEROS_BLOCK = 1 << 20


def gzip_of_zeros(size: int) -> bytes:
    """A gzip member of `size` zero bytes (whole MiBs), made in milliseconds: after a
    full flush deflate starts afresh, so one MiB of zeros compresses to the same bytes
    every time and is repeated. The trailer's CRC is not computed: no reader that stops
    at its limit gets that far."""
    co = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = co.compress(bytes(ZEROS_BLOCK)) + co.flush(zlib.Z_FULL_FLUSH)
    block = co.compress(bytes(ZEROS_BLOCK)) + co.flush(zlib.Z_FULL_FLUSH)
    return head + block * (size // ZEROS_BLOCK - 1) + co.flush() + bytes(8)


def brotli_of_zeros(size: int) -> bytes:
    """A brotli stream of `size` zero bytes (about 1.9 MB for 10 GiB; 2 s to make)."""
    c = brotli.Compressor(quality=1, lgwin=24)
    block = bytes(16 * ZEROS_BLOCK)
    out = [c.process(block) for _ in range(size // len(block))]
    return b"".join(out) + c.finish()


def http_response(headers: list[tuple[str, str]], body: bytes, status: str = "200 OK") -> bytes:
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers)
    return f"HTTP/1.1 {status}\r\n{lines}\r\n".encode() + body


def warc_head(uri: str | None, length: int, rtype: str = "response", record_id: int = 1) -> bytes:
    """A WARC 1.1 record's header block, for a payload of `length` bytes."""
    content_type = (
        "application/warc-fields" if rtype == "warcinfo" else "application/http; msgtype=response"
    )
    fields = [
        ("WARC-Type", rtype),
        ("WARC-Record-ID", f"<urn:uuid:00000000-0000-0000-0000-{record_id:012d}>"),
        ("WARC-Date", "2024-05-01T10:00:00Z"),
        *([("WARC-Target-URI", uri)] if uri is not None else []),
        ("Content-Type", content_type),
        ("Content-Length", str(length)),
    ]
    return ("WARC/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields) + "\r\n").encode()


def warc_record(
    uri: str | None, payload: bytes, rtype: str = "response", record_id: int = 1
) -> bytes:
    """One WARC 1.1 record, uncompressed."""
    return warc_head(uri, len(payload), rtype, record_id) + payload + b"\r\n\r\n"


PAGE = "https://www.site.test/"
HTML = b"<!doctype html><title>t</title><p>hello</p>"


def page_warc(
    path: Path, headers: list[tuple[str, str]], body: bytes, status: str = "200 OK"
) -> Path:
    path.write_bytes(warc_record(PAGE, http_response(headers, body, status)))
    return path


def gzip_bomb_warc(path: Path, size: int = 10 * GIB) -> Path:
    """The page's body: `size` zeros, gzip-coded (a 10 GiB one is about 10 MB)."""
    coded = [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]
    return page_warc(path, coded, gzip_of_zeros(size))


def brotli_bomb_warc(path: Path, size: int = 10 * GIB) -> Path:
    coded = [("Content-Type", "text/html"), ("Content-Encoding", "br")]
    return page_warc(path, coded, brotli_of_zeros(size))


def outer_bomb_warc_gz(path: Path, size: int = 10 * GIB, where: str = "body") -> Path:
    """A .warc.gz whose own gzip layer holds a response of `size` zeros: in its body
    (`where="body"`: the record says so in its Content-Length) or in one header line
    without end (`where="header"`)."""
    if where == "body":
        http = http_response([("Content-Type", "text/html")], b"")
        head = warc_head(PAGE, len(http) + size) + http
    else:
        head = (
            b"WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 999999999999\r\n"
            b"WARC-Target-URI: " + PAGE.encode() + b"\r\nX-Long: "
        )
    co = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    start = co.compress(head) + co.flush(zlib.Z_FULL_FLUSH)
    first = co.compress(bytes(ZEROS_BLOCK)) + co.flush(zlib.Z_FULL_FLUSH)
    block = co.compress(bytes(ZEROS_BLOCK)) + co.flush(zlib.Z_FULL_FLUSH)
    path.write_bytes(start + first + block * (size // ZEROS_BLOCK - 1) + co.flush() + bytes(8))
    return path


@dataclass(frozen=True)
class Measured:
    """A command's exit code, output, wall time and peak memory (its own, from wait4)."""

    code: int
    out: str
    err: str
    seconds: float
    peak_mb: float


# The command is started by a small process of its own, not by the test's: a process
# forked from pytest starts with pytest's resident memory as its high-water mark, and
# Linux keeps that mark in ru_maxrss across exec (a CI run measured a 114 MB import at
# 331 MB, pytest's size then). This launcher is small; what wait4 says of its child is
# the command's own peak. It prints: exit status, seconds, peak KiB.
_LAUNCHER = """
import json, os, subprocess, sys, time
argv, timeout = json.loads(sys.argv[1]), float(sys.argv[2])
start = time.monotonic()
proc = subprocess.Popen(argv)
while True:
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    if pid:
        break
    if time.monotonic() - start > timeout:
        proc.kill()
        _, status, usage = os.wait4(proc.pid, 0)
        break
    time.sleep(0.02)
sys.stdout.write("\\n" + json.dumps([os.waitstatus_to_exitcode(status), time.monotonic() - start, usage.ru_maxrss]))
"""


def run_measured(argv: list[str], timeout: float = 120.0, **kwargs: Any) -> Measured:
    import subprocess
    import tempfile

    with tempfile.TemporaryFile() as err:
        launcher = [sys.executable, "-c", _LAUNCHER, json.dumps(argv), str(timeout)]
        done = subprocess.run(
            launcher, stdout=subprocess.PIPE, stderr=err, timeout=timeout + 30, **kwargs
        )
        out, _, last = done.stdout.decode(errors="replace").rpartition("\n")
        code, seconds, peak_kib = json.loads(last)
        err.seek(0)
        return Measured(code, out, err.read().decode(errors="replace"), seconds, peak_kib / 1024)


# `clarke ARGS` for each argument list given (JSON), in one process: its exit code, the
# end of what it wrote to stderr, whether that held a traceback, its wall time.
_EACH = """
import contextlib, io, json, sys, time, traceback
from clarke.cli import main
for args in map(json.loads, sys.argv[1:]):
    err = io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 99
    text = err.getvalue()
    print(json.dumps({"args": args, "code": code, "seconds": time.monotonic() - start,
                      "traceback": "Traceback" in text, "err": text[-2000:]}))
"""


@dataclass(frozen=True)
class CliRun:
    args: list[str]
    code: int
    seconds: float
    traceback: bool
    err: str


def clarke_each(arglists: list[list[str]], timeout: float = 300.0) -> tuple[list[CliRun], Measured]:
    """`clarke` with each argument list, one after the other in one process of its own
    (whose peak memory is then the largest any of them took)."""
    m = run_measured([sys.executable, "-c", _EACH, *map(json.dumps, arglists)], timeout=timeout)
    runs = [CliRun(**json.loads(line)) for line in m.out.splitlines() if line.startswith("{")]
    if m.code != 0 or len(runs) != len(arglists):
        raise AssertionError(f"the driver exited {m.code}: {m.out[-2000:]} {m.err[-2000:]}")
    return runs, m


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/hostile_sites.py DIR", file=sys.stderr)
        return 2
    for d in write_corpus(Path(argv[0])):
        print(d)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
