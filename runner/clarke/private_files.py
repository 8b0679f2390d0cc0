"""Directories and files that hold what other local users must neither read nor plant:
the testbeds' state (agent tokens, control sockets) and a load's capture (TLS secrets).

The guards, used wherever Clarke (as root) keeps such things:

- `check_private_dir`: a directory Clarke adopts must belong to the user running Clarke
  (or root) and be writable by nobody else; so must every directory above it, unless it
  is sticky (/tmp): otherwise another user could have planted it, or could swap it for
  another between a check and a use.
- `PrivateDir`: files written into a directory another user may write (a capture's
  DIR): each through a descriptor of the directory opened once, created new (O_EXCL),
  never through a symbolic link (O_NOFOLLOW), with its mode set at creation (0600;
  directories 0700). What another user plants there makes the write fail; it never
  redirects it.
- `replace_file`: a file Clarke writes again and again (the batch scripts of `clarke
  submit`, which may hold a password), replaced whole by a new file that has its final
  mode before its first byte is written."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from clarke.errors import ClarkeError, EnvironmentProblem

FILE_MODE = 0o600
DIR_MODE = 0o700
# Others may pass through, but neither list nor write: for a directory whose secrets are
# files of their own (0600) and below which a server's unprivileged workers must reach
# the pages (OpenLiteSpeed runs as nobody).
PASSABLE_DIR_MODE = 0o711
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _trusted_owners() -> set[int]:
    return {0, os.geteuid()}


def _owner_problem(st: os.stat_result, sticky_ok: bool) -> str | None:
    """Why a directory with this status is not the running user's own, or None;
    `sticky_ok`: others may write it if it is sticky (they cannot rename what is ours)."""
    if st.st_uid not in _trusted_owners():
        return f"it belongs to uid {st.st_uid}, not to {_who()}"
    if st.st_mode & 0o022 and not (sticky_ok and st.st_mode & stat.S_ISVTX):
        return f"group or other users may write it (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _who() -> str:
    return "root" if os.geteuid() == 0 else f"root or uid {os.geteuid()} (who runs clarke)"


def check_private_dir(path: Path, what: str) -> None:
    """Refuse (exit 3, naming the path and the fix) a directory `what` that is not the
    running user's own and closed to others' writes, or that sits below a directory
    another user could swap. A directory that does not exist yet passes (it is made
    new, closed to others); so do the missing parts of its path."""
    path = Path(os.path.abspath(path))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise EnvironmentProblem(
                f"{what} {path}: a symbolic link; give the directory itself (or remove the "
                "link, and clarke makes the directory)"
            )
        if not stat.S_ISDIR(st.st_mode):
            raise EnvironmentProblem(f"{what} {path}: not a directory")
        problem = _owner_problem(st, sticky_ok=False)
        if problem:
            raise EnvironmentProblem(
                f"{what} {path}: {problem}, so another user could have planted what is in "
                f"it; remove it (clarke makes it anew, closed to others), or use another directory"
            )
    for parent in path.parents:
        try:
            pst = os.stat(parent)  # a link above is the user's own choice of path
        except FileNotFoundError:
            continue
        problem = _owner_problem(pst, sticky_ok=True)
        if problem:
            raise EnvironmentProblem(
                f"{what} {path}: the directory above it, {parent}: {problem} (and it is not "
                "sticky), so another user could swap what lies below it; choose a "
                "directory under one only root may change"
            )


def make_private_dir(path: Path, what: str, mode: int = DIR_MODE) -> Path:
    """`path` made (`mode`, 0700 unless said, parents as needed) or adopted after
    check_private_dir."""
    check_private_dir(path, what)
    path.mkdir(mode=mode, parents=True, exist_ok=True)
    check_private_dir(path, what)  # made by us, or by someone else just before us
    return path


def check_private_file(path: Path, st: os.stat_result, what: str) -> None:
    """Refuse (exit 3) a secret file not owned by the running user (or root), or one
    other users may access, or group members write."""
    if not stat.S_ISREG(st.st_mode):
        raise EnvironmentProblem(f"{what} {path}: not a regular file")
    if st.st_uid not in _trusted_owners():
        raise EnvironmentProblem(
            f"{what} {path}: it belongs to uid {st.st_uid}, not to {_who()}: another user "
            "could have planted it; remove it (clarke makes a new one) or give another"
        )
    if st.st_mode & 0o027:
        raise EnvironmentProblem(
            f"{what} {path}: other users may access it or group members write it (mode "
            f"{stat.S_IMODE(st.st_mode):04o}); chmod 600 {path}"
        )


class Refused(ClarkeError):
    """A file could not be written where it was asked without following what another
    user planted there."""


class PrivateDir:
    """A directory opened once (`open`), whose files are then written through its
    descriptor: new files only, 0600, never through a symbolic link; subdirectories
    made 0700 and entered without following links. `identity` pins the directory: a
    later `open` of the same path refuses another directory put in its place."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path

    @staticmethod
    def identity(path: Path) -> tuple[int, int]:
        st = os.stat(path)
        return st.st_dev, st.st_ino

    @classmethod
    @contextlib.contextmanager
    def open(cls, path: Path, identity: tuple[int, int] | None = None) -> Iterator[PrivateDir]:
        """`path` opened as a directory: the one `identity` names (a link the user gave
        leads to it; anything else put there since is refused), or, without one, the
        directory itself, never a link."""
        flags = _DIR & ~os.O_NOFOLLOW if identity is not None else _DIR
        try:
            fd = os.open(path, flags)
        except OSError as e:
            why = "now a symbolic link" if e.errno == errno.ELOOP else e.strerror
            raise Refused(f"{path}: {why}; nothing was written") from None
        try:
            st = os.fstat(fd)
            if identity is not None and (st.st_dev, st.st_ino) != identity:
                raise Refused(
                    f"{path}: another directory was put in its place since the load started; "
                    "nothing was written"
                )
            yield cls(fd, path)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def subdir(self, name: str) -> Iterator[PrivateDir]:
        """`name` (one component) made 0700 if missing, entered without following a link."""
        _one_component(name)
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, DIR_MODE, dir_fd=self.fd)
        try:
            fd = os.open(name, _DIR, dir_fd=self.fd)
        except OSError as e:
            why = "a symbolic link" if e.errno == errno.ELOOP else e.strerror
            raise Refused(f"{self.path / name}: {why}; nothing was written under it") from None
        try:
            yield PrivateDir(fd, self.path / name)
        finally:
            os.close(fd)

    def write_new(self, name: str, data: bytes) -> None:
        """`name` (one component) created 0600 with `data`; Refused when anything is
        there already (a file, a link, a directory)."""
        _one_component(name)
        try:
            fd = os.open(name, _NEW_FILE, FILE_MODE, dir_fd=self.fd)
        except OSError as e:
            if e.errno in (errno.EEXIST, errno.ELOOP):
                raise Refused(
                    f"{self.path / name}: something is there already (put there since the "
                    "load started?); nothing was written through it"
                ) from None
            raise Refused(f"{self.path / name}: {e.strerror}") from None
        with os.fdopen(fd, "wb") as f:
            f.write(data)


def replace_file(path: Path, data: bytes, mode: int = FILE_MODE) -> None:
    """`path` replaced, whole, by a new file holding `data`, whose mode is `mode` from
    before its first byte: a temporary file beside it is created new (mkstemp: 0600,
    O_EXCL, never through a link), set to `mode` (whatever the umask), written, then
    renamed over `path`. No one reads `data` through a mode that was not yet right, nor
    through a descriptor kept open on the file it replaces; a link at `path` is replaced,
    never followed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _one_component(name: str) -> None:
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a single file name: {name!r}")
