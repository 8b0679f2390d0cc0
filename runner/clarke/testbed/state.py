"""The state file of a testbed: <state dir>/<id>.json, written before anything is created
and rewritten after every step, so that `clarke testbed down` removes exactly what
exists, also after the runner was killed half-way through `up`.

The state dir is $CLARKE_STATE_DIR, else /run/clarke/testbeds (tmpfs: a reboot removes
namespaces and state together). Each testbed also has a run dir, <state dir>/<id>/, for
role configurations, control sockets, logs and the agents' token.

What is found there is believed (processes to stop, a token to hand the agents), so the
state dir, and every run dir, must belong to root (the user running clarke) and be
writable by nobody else, nor sit below a directory another user could swap: otherwise
every use is refused (exit 3, naming the directory and the fix; private_files.py)."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from clarke.errors import ValidationFailed
from clarke.place.procs import Proc
from clarke.private_files import PASSABLE_DIR_MODE, check_private_dir, make_private_dir
from clarke.schema import problems_of

DEFAULT_DIR = Path("/run/clarke/testbeds")
# Testbed ids name namespaces and links, which are the host's, while state dirs are each
# runner's own: the id is picked, and claimed by its first namespace, under this lock
# (`clarke testbed up`s with different state dirs, a user's and a test worker's, at once).
HOST_ID_LOCK_DIR = Path("/run/clarke")
HOST_ID_LOCK = "testbed-ids.lock"


def state_dir() -> Path:
    return Path(os.environ.get("CLARKE_STATE_DIR") or DEFAULT_DIR)


class TestbedState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int
    profile: str  # the profile the link runs, as its agents last confirmed it
    profile_sha256: str = ""
    link: str  # the implementations filling the roles (clarke.registry)
    server: str
    phase: Literal["creating", "up", "failed", "removing"] = "creating"
    created_at: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat())
    owner_pid: int = Field(default_factory=os.getpid)
    run_dir: str
    namespaces: list[str] = Field(default_factory=list)
    root_links: list[str] = Field(default_factory=list)
    processes: list[Proc] = Field(default_factory=list)
    host_changes: list[str] = Field(default_factory=list)
    error: str = ""

    @model_validator(mode="before")
    @classmethod
    def _older_state_files(cls, data: Any) -> Any:
        """A state file written before roles had implementations named `link` and
        `server` (`backend` named the link; the server was origin): still readable, so
        that `down` removes such a testbed."""
        if isinstance(data, dict) and "backend" in data and "link" not in data:
            rest = {k: v for k, v in data.items() if k != "backend"}
            return rest | {"link": data["backend"], "server": "origin"}
        return data


STATE_DIR = "testbed state dir"


class Store:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or state_dir()

    def _checked(self) -> Path:
        """The state dir, if it is root's alone (or does not exist yet)."""
        check_private_dir(self.root, f"{STATE_DIR} (CLARKE_STATE_DIR)")
        return self.root

    def make_run_dir(self, testbed_id: int) -> Path:
        """The testbed's run dir: made, or adopted if it is root's alone (a run dir `down`
        has not removed yet); 0711 either way (PASSABLE_DIR_MODE: the token in it is 0600,
        and OpenLiteSpeed's workers pass through to the pages below it)."""
        run_dir = make_private_dir(
            self.run_dir(testbed_id),
            f"run dir of testbed {testbed_id} (in the {STATE_DIR})",
            PASSABLE_DIR_MODE,
        )
        run_dir.chmod(PASSABLE_DIR_MODE)
        return run_dir

    @property
    def owner(self) -> str:
        """The tag this store puts on its namespaces and links (see netns.set_owner)."""
        return f"clarke:{self.root.resolve()}"

    def path(self, testbed_id: int) -> Path:
        return self.root / f"{testbed_id}.json"

    def run_dir(self, testbed_id: int) -> Path:
        return self.root / str(testbed_id)

    def save(self, state: TestbedState) -> None:
        make_private_dir(self.root, f"{STATE_DIR} (CLARKE_STATE_DIR)", PASSABLE_DIR_MODE)
        path = self.path(state.id)
        tmp = path.with_suffix(".json.tmp")
        with tmp.open("w", encoding="utf-8") as f:
            f.write(state.model_dump_json(indent=2))
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)

    def read(self, testbed_id: int) -> TestbedState | None:
        self._checked()
        path = self.path(testbed_id)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            return TestbedState.model_validate(json.loads(text))
        except (json.JSONDecodeError, ValidationError) as e:
            problems = problems_of(e) if isinstance(e, ValidationError) else [str(e)]
            raise ValidationFailed(str(path), problems) from None

    def ids(self) -> list[int]:
        if not self._checked().is_dir():
            return []
        return sorted(int(p.stem) for p in self.root.glob("*.json") if p.stem.isdigit())

    def remove(self, testbed_id: int) -> None:
        self.path(testbed_id).unlink(missing_ok=True)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Serialise id allocation between concurrent `clarke testbed up`s, this state
        dir's and every other's (host_id_lock)."""
        make_private_dir(self.root, f"{STATE_DIR} (CLARKE_STATE_DIR)", PASSABLE_DIR_MODE)
        with host_id_lock(), (self.root / ".lock").open("w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def host_id_lock() -> Iterator[None]:
    """The host's lock on picking a testbed id (HOST_ID_LOCK): a file in a directory
    only root may write, opened without following a link."""
    make_private_dir(HOST_ID_LOCK_DIR, "Clarke's host directory", PASSABLE_DIR_MODE)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(HOST_ID_LOCK_DIR / HOST_ID_LOCK, flags, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
