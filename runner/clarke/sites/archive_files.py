"""An archive's files read as untrusted input, in one place.

A site archive travels between people (a colleague's recording, a campaign someone
shared), and Clarke reads it as root. Every reader of an archive's files (`site check`,
staging for a campaign, the server role's check before a replay) goes through here:

- each file is opened relative to the archive's directory, never through a link
  (`O_NOFOLLOW` on `site.json`, `bodies/` and every body), and must be a regular file:
  a FIFO, a device or a directory is refused without a byte read and without blocking
  (`O_NONBLOCK`);
- a body must have, on disk, the size `site.json` declares for it, checked before it is
  read (a sparse file of 10 GiB declared as 10 bytes is refused at once); it is read and
  hashed in chunks, and one that grows or shrinks while it is read is refused;
- `Limits` bound one body, all of an archive's bodies together, and `site.json`
  (defaults below; `--max-body-mb` and `--max-site-mb`, or CLARKE_SITE_MAX_BODY_MB and
  CLARKE_SITE_MAX_MB for the runner and the agents it starts, raise them). An archive
  over a limit is refused before any body is read.

origin (Rust) applies the same rules to the same files (replay/archive.rs); the runner
passes it the limits in force. Importers write bodies through `store.BodyStore`, under
the same limits."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from clarke.errors import ValidationFailed

SITE_JSON = "site.json"
BODIES = "bodies"
CHUNK = 1 << 16
MIB = 1 << 20
DEFAULT_BODY_MB = 64
DEFAULT_SITE_MB = 512
# site.json: 100,000 exchanges of about 600 bytes each, with room to spare.
INDEX_MB = 64
BODY_ENV = "CLARKE_SITE_MAX_BODY_MB"
SITE_ENV = "CLARKE_SITE_MAX_MB"
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _env_mb(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= 1 << 20:
        raise ValidationFailed(name, [f"{raw[:40]!r}: a whole number of MiB from 1 to 1048576"])
    return int(raw)


@dataclass(frozen=True)
class Limits:
    """What one archive may hold: one body, all its distinct bodies together, and its
    site.json (bytes)."""

    body_bytes: int = DEFAULT_BODY_MB * MIB
    site_bytes: int = DEFAULT_SITE_MB * MIB
    index_bytes: int = INDEX_MB * MIB

    @classmethod
    def from_env(cls, body_mb: int | None = None, site_mb: int | None = None) -> Limits:
        """The limits in force: the options given, else the environment, else the
        defaults."""
        return cls(
            body_bytes=(body_mb or _env_mb(BODY_ENV, DEFAULT_BODY_MB)) * MIB,
            site_bytes=(site_mb or _env_mb(SITE_ENV, DEFAULT_SITE_MB)) * MIB,
        )

    def body_breach(self, size: int) -> str | None:
        """Why a body of `size` bytes is refused, or None."""
        if size <= self.body_bytes:
            return None
        return (
            f"more than the {self.body_bytes // MIB} MiB one body may hold "
            f"(--max-body-mb or {BODY_ENV} raises it)"
        )

    def site_breach(self, size: int) -> str | None:
        """Why an archive whose distinct bodies hold `size` bytes is refused, or None."""
        if size <= self.site_bytes:
            return None
        return (
            f"its bodies hold {size} bytes or more, more than the {self.site_bytes // MIB} MiB "
            f"an archive may hold (--max-site-mb or {SITE_ENV} raises it)"
        )


class ArchiveFileError(Exception):
    """One file of an archive is unusable: a link, not a regular file, of the wrong
    size, over a limit, or unreadable. The message says which and why."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "of an unknown kind"


def _open(name: str, dir_fd: int, flags: int, what: str, missing: str = "") -> int:
    """`name` in `dir_fd`, never through a link, and a file only where it is a regular
    one: it is looked at first, so that no FIFO or device is ever opened."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise ArchiveFileError(missing or f"{what} is missing") from None
    except OSError as e:
        raise ArchiveFileError(f"{what} cannot be read: {e.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise ArchiveFileError(f"{what} is a symbolic link")
    directory = bool(flags & os.O_DIRECTORY)
    if not (stat.S_ISDIR if directory else stat.S_ISREG)(st.st_mode):
        wanted = "a directory" if directory else "a regular file"
        raise ArchiveFileError(f"{what} is {_kind(st.st_mode)}, not {wanted}")
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link since it was seen
            raise ArchiveFileError(f"{what} is a symbolic link") from None
        raise ArchiveFileError(f"{what} cannot be opened: {e.strerror}") from None


def _regular(fd: int, what: str) -> os.stat_result:
    st = os.fstat(fd)
    if stat.S_ISLNK(st.st_mode):
        raise ArchiveFileError(f"{what} is a symbolic link")
    if not stat.S_ISREG(st.st_mode):
        raise ArchiveFileError(f"{what} is {_kind(st.st_mode)}, not a regular file")
    return st


def _chunks(fd: int, size: int, what: str) -> Iterator[bytes]:
    """Exactly `size` bytes of `fd` in chunks; ArchiveFileError if it has fewer or more
    (it changed while it was read)."""
    left = size
    while left > 0:
        data = os.read(fd, min(CHUNK, left))
        if not data:
            raise ArchiveFileError(f"{what} ended after {size - left} of its {size} bytes")
        left -= len(data)
        yield data
    if os.read(fd, 1):
        raise ArchiveFileError(f"{what} grew past its {size} bytes while it was read")


class ArchiveDir:
    """An archive's directory, open: its files opened by name, never through links."""

    def __init__(self, path: Path, limits: Limits) -> None:
        self.path = path
        self.limits = limits
        try:
            # The directory itself is the user's choice (a command-line argument or the
            # runner's own staging directory); what is inside it is not.
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise ValidationFailed(
                str(path), [f"not a directory (a site archive is DIR/{SITE_JSON}): {e.strerror}"]
            ) from None
        self._bodies_fd: int | None = None

    def close(self) -> None:
        for fd in (self._bodies_fd, self.fd):
            if fd is not None:
                os.close(fd)
        self._bodies_fd = None

    def read_index(self) -> bytes:
        """site.json's bytes (at most the index limit)."""
        fd = _open(SITE_JSON, self.fd, _OPEN_FILE, SITE_JSON, "cannot read: it is missing")
        try:
            st = _regular(fd, SITE_JSON)
            if st.st_size > self.limits.index_bytes:
                raise ArchiveFileError(
                    f"{SITE_JSON} has {st.st_size} bytes, more than the "
                    f"{self.limits.index_bytes // MIB} MiB it may have"
                )
            return b"".join(_chunks(fd, st.st_size, SITE_JSON))
        finally:
            os.close(fd)

    def _bodies(self) -> int:
        if self._bodies_fd is None:
            self._bodies_fd = _open(BODIES, self.fd, _OPEN_DIR, f"{BODIES}/")
        return self._bodies_fd

    @contextlib.contextmanager
    def body(self, name: str, size: int) -> Iterator[Iterator[bytes]]:
        """The body `bodies/<name>` of `size` bytes, as chunks; ArchiveFileError where
        it is missing, a link, not a regular file, another size or over the limit."""
        what = f"{BODIES}/{name}"
        breach = self.limits.body_breach(size)
        if breach:
            raise ArchiveFileError(f"{what}: size says {size} bytes, {breach}")
        fd = _open(
            name, self._bodies(), _OPEN_FILE, what, f"its body {name} is missing from {BODIES}/"
        )
        try:
            st = _regular(fd, what)
            if st.st_size != size:
                raise ArchiveFileError(f"{what} has {st.st_size} bytes, size says {size}")
            yield _chunks(fd, size, what)
        finally:
            os.close(fd)

    def hash_body(self, name: str, size: int) -> str:
        """The SHA-256 of a body's bytes, read in chunks."""
        digest = hashlib.sha256()
        with self.body(name, size) as chunks:
            for chunk in chunks:
                digest.update(chunk)
        return digest.hexdigest()

    def read_body(self, name: str, size: int) -> bytes:
        with self.body(name, size) as chunks:
            return b"".join(chunks)

    def copy_body(self, name: str, size: int, to_dir_fd: int) -> str:
        """Copy a body into the directory `to_dir_fd` (as a new file of the same name,
        0644) from the same descriptor it is hashed through; its SHA-256."""
        digest = hashlib.sha256()
        out = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
            dir_fd=to_dir_fd,
        )  # fmt: skip
        try:
            with self.body(name, size) as chunks:
                for chunk in chunks:
                    digest.update(chunk)
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(out, view) :]
            os.fchmod(out, 0o644)
        finally:
            os.close(out)
        return digest.hexdigest()


@contextlib.contextmanager
def opened(path: Path, limits: Limits | None = None) -> Iterator[ArchiveDir]:
    d = ArchiveDir(path, limits or Limits.from_env())
    try:
        yield d
    finally:
        d.close()
