"""The role agents' bearer token: made once per testbed, kept in a file only its owner
can read, checked on every request but `GET /health`.

    netns     <state dir>/<id>/agent-token, made by `clarke testbed up` (0600, root)
    compose   /run/clarke-secrets/agent-token, made by the stack's secrets service

Agents read it at start-up (`clarke serve --token-file`), the runner's AgentClient sends
it as `Authorization: Bearer <token>`. The token never appears on a command line, in
the state file or in a log."""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import secrets
import stat
from pathlib import Path

from clarke.errors import EnvironmentProblem

TOKEN_FILE = "agent-token"  # in a netns testbed's run dir
COMPOSE_TOKEN_FILE = Path(
    os.environ.get("CLARKE_AGENT_TOKEN_FILE") or "/run/clarke-secrets/agent-token"
)
TOKEN_BYTES = 32  # 256 bits of secrets.token_urlsafe: 43 characters
MIN_TOKEN_CHARS = 22  # 128 bits in base64, 88 in hex: shorter is refused
MAX_TOKEN_CHARS = 512
# Visible ASCII only: it travels in an HTTP header.
TOKEN_RE = re.compile(rf"^[\x21-\x7e]{{{MIN_TOKEN_CHARS},{MAX_TOKEN_CHARS}}}$")

OK, MISSING, WRONG = 200, 401, 403


def create_token_file(path: Path) -> str:
    """A new random token in a new file, created 0600 (O_EXCL: never an existing file,
    never through a symlink; the mode is set at creation, never changed after). The
    token is written to a file of its own beside `path` and then linked to `path`, so
    that `path` appears whole: several testbeds starting at once on one state directory
    (one per node of a cluster) read it as soon as it exists. FileExistsError when
    `path` exists."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(token + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)  # never replaces: FileExistsError, also for a planted symlink
    finally:
        tmp.unlink(missing_ok=True)
    return token


def ensure_token_file(path: Path) -> Path:
    """The token file at `path`, made if there is none yet; checked either way."""
    with contextlib.suppress(FileExistsError):
        create_token_file(path)
    read_token(path)
    return path


def read_token(path: Path) -> str:
    """The token in `path`. Refused (exit 3, naming the file) when it is missing, not a
    regular file, not the running user's (or root's): another user could have planted
    it, open to other users or writable by its group, or not a token of at least 128
    bits."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise EnvironmentProblem(f"agent token file {path}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise EnvironmentProblem(f"agent token file {path}: not a regular file")
        if st.st_uid not in (0, os.geteuid()):
            raise EnvironmentProblem(
                f"agent token file {path}: it belongs to uid {st.st_uid}, not to root or "
                f"uid {os.geteuid()} (who runs clarke): another user could have planted it; "
                "remove it (`clarke testbed up` makes a new one)"
            )
        if st.st_mode & 0o027:
            raise EnvironmentProblem(
                f"agent token file {path}: other users may access it or its group write it "
                f"(mode {stat.S_IMODE(st.st_mode):04o}); it must be 0600 (or 0640/0400): "
                f"chmod 600 {path}"
            )
        raw = f.read(MAX_TOKEN_CHARS + 2)
    token = raw.decode("ascii", errors="replace").strip()
    if not TOKEN_RE.fullmatch(token):
        raise EnvironmentProblem(
            f"agent token file {path}: not a token (one line of {MIN_TOKEN_CHARS} to "
            f"{MAX_TOKEN_CHARS} visible ASCII characters)"
        )
    return token


def bearer(token: str) -> dict[str, str]:
    """The header the runner sends."""
    return {"Authorization": f"Bearer {token}"}


def check(authorization: str | None, token: str) -> int:
    """OK, MISSING (no `Bearer` credentials: 401) or WRONG (other credentials: 403);
    the comparison takes the same time wherever the presented token differs."""
    scheme, _, presented = (authorization or "").strip().partition(" ")
    presented = presented.strip()
    if scheme.lower() != "bearer" or not presented:
        return MISSING
    given = presented.encode("latin-1", errors="replace")
    if hmac.compare_digest(given, token.encode("ascii")):
        return OK
    return WRONG


def derive_key(token: str, label: str) -> str:
    """A key for one purpose, derived from the testbed's token (HMAC-SHA256, hex): the
    stations' PEPs prove it to each other (pep_slot.py) without the token itself
    leaving the agent, and without any secret in a request."""
    return hmac.new(token.encode("ascii"), label.encode("ascii"), "sha256").hexdigest()


def write_secret(path: Path, secret: str) -> None:
    """`secret` in `path`, 0600 from the start: written to a new file beside it (never
    through a symlink), then renamed over `path`."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secret + "\n")
    os.replace(tmp, path)
