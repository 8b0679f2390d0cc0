"""What the browser adds to a load's capture: the TLS key log (NSS writes it where
SSLKEYLOGFILE says, for TCP and QUIC alike, so Wireshark decrypts the link's pcap) and,
for HTTP/3, Firefox's qlog files (the pref network.http.http3.enable_qlog; Firefox
writes them under its temporary directory, which TMPDIR sets for this load only).

The files travel back in the load's answer, base64, within the request's byte budget:
the key log first, then the qlog files by name; a file that does not fit is left out
whole and named, never cut."""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field

from clarke.timing import Phases

KEYLOG = "keys.log"
QLOG_DIR = "qlog"
QLOG_SUFFIXES = (".sqlog", ".qlog")


class CapturedFiles(BaseModel):
    """Relative file name -> content (base64); what did not fit the budget."""

    files: dict[str, str] = Field(default_factory=dict)
    left_out: list[str] = Field(default_factory=list)

    def decoded(self) -> dict[str, bytes]:
        return {name: base64.b64decode(data) for name, data in self.files.items()}


class BrowserCapture:
    """A directory for one load's key log and temporary files; `remove()` when done.

    The directory is 0700 (mkdtemp) and the key log is made here, empty and 0600, before
    the browser starts: NSS and BoringSSL append to the file SSLKEYLOGFILE names, so
    the secrets are never in a file another user may read, not even for a moment."""

    def __init__(self, parent: Path | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="clarke-capture-", dir=parent))
        self.tmp = self.dir / "tmp"
        self.tmp.mkdir(mode=0o700)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        os.close(os.open(self.dir / KEYLOG, flags, 0o600))

    def env(self) -> dict[str, str]:
        """The browser's environment: this process's, plus the key log and TMPDIR."""
        return {**os.environ, "SSLKEYLOGFILE": str(self.dir / KEYLOG), "TMPDIR": str(self.tmp)}

    def collect(self, max_bytes: int) -> CapturedFiles:
        found: list[tuple[str, Path]] = []
        keylog = self.dir / KEYLOG
        if keylog.is_file() and keylog.stat().st_size:
            found.append((KEYLOG, keylog))
        qlogs = sorted(p for p in self.tmp.rglob("*") if p.suffix in QLOG_SUFFIXES and p.is_file())
        found += [(f"{QLOG_DIR}/{p.name}", p) for p in qlogs]
        out = CapturedFiles()
        budget = max_bytes
        for name, path in found:
            size = path.stat().st_size
            if size > budget:
                out.left_out.append(f"{name} ({size} bytes)")
                continue
            budget -= size
            out.files[name] = base64.b64encode(path.read_bytes()).decode()
        return out

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


Result = TypeVar("Result", bound=BaseModel)


def with_captured(
    result: Result, capture: BrowserCapture | None, max_bytes: int, phases: Phases
) -> Result:
    """`result` with the files `capture` collected (at most `max_bytes`), timed as the
    load's capture phase; `result` as it is without a capture."""
    if capture is None:
        return result
    with phases.phase("capture"):
        files = capture.collect(max_bytes)
    return result.model_copy(update={"captured": files})
