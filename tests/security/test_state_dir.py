"""The testbeds' state directory, tried as a hostile local user would (issue 37, finding
3): `nobody` prepares what `clarke testbed up` (root) will find there: the state
directory itself, a run directory with an agent token of its own choosing for every
testbed id, or a token inside a run directory of root's. Each is refused before
anything is built (exit 3, naming the path and the fix); no namespace is made and no
agent is started with `nobody`'s token."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from clarke.place.plan import MAX_ID
from conftest import need

pytestmark = [pytest.mark.root]
NOBODY_UID = 65534
PLANTED_TOKEN = "nobody-chose-this-token-" + "x" * 30


@pytest.fixture
def state_parent() -> Iterator[Path]:
    """A directory only root writes, which `nobody` may enter, as /run is."""
    need(os.geteuid() == 0, "root (chown to nobody; testbed up)")
    parent = Path(tempfile.mkdtemp(prefix="clarke-sec-state-"))
    parent.chmod(0o755)
    try:
        yield parent
    finally:
        _down_everything_in(parent)
        shutil.rmtree(parent, ignore_errors=True)


def _down_everything_in(parent: Path) -> None:
    """Should a test fail by building a testbed, remove it (by the ids its state files
    name, in its own state dir only)."""
    for state in parent.rglob("*.json"):
        if state.stem.isdigit():
            subprocess.run(
                [sys.executable, "-m", "clarke", "testbed", "down", "--id", state.stem],
                env={**os.environ, "CLARKE_STATE_DIR": str(state.parent)},
                capture_output=True, timeout=300,
            )  # fmt: skip


def _up(state_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clarke", "testbed", "up", "--profile", "lan"],
        env={**os.environ, "CLARKE_STATE_DIR": str(state_dir)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _plant_token(run_dir: Path, owner: int) -> None:
    token = run_dir / "agent-token"
    token.write_text(PLANTED_TOKEN + "\n")
    token.chmod(0o600)
    os.chown(token, owner, owner)


def _refused(proc: subprocess.CompletedProcess[str], path: Path) -> None:
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert str(path) in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_state_dir_of_nobodys_is_refused(state_parent: Path) -> None:
    state = state_parent / "testbeds"
    state.mkdir(mode=0o755)
    os.chown(state, NOBODY_UID, NOBODY_UID)
    proc = _up(state)
    _refused(proc, state)
    assert "belongs to uid 65534" in proc.stderr
    assert sorted(p.name for p in state.iterdir()) == []


def test_a_state_dir_others_may_write_is_refused(state_parent: Path) -> None:
    state = state_parent / "testbeds"
    state.mkdir()
    state.chmod(0o777)
    proc = _up(state)
    _refused(proc, state)
    assert "may write it (mode 0777)" in proc.stderr


def test_a_state_dir_below_a_directory_of_nobodys_is_refused(state_parent: Path) -> None:
    """`nobody` could rename root's state dir away and put its own in its place."""
    theirs = state_parent / "nobodys"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY_UID, NOBODY_UID)
    state = theirs / "testbeds"
    state.mkdir(mode=0o700)
    proc = _up(state)
    _refused(proc, state)
    assert str(theirs) in proc.stderr


def _planted(state_parent: Path, nobodys_run_dirs: bool) -> Path:
    """A state directory whose every testbed id has a run directory holding nobody's
    token (`nobodys_run_dirs`: the directories are nobody's too, else root's)."""
    state = state_parent / "testbeds"
    state.mkdir(mode=0o755)
    for i in range(MAX_ID + 1):
        run_dir = state / str(i)
        run_dir.mkdir(mode=0o700)
        _plant_token(run_dir, NOBODY_UID)
        if nobodys_run_dirs:
            os.chown(run_dir, NOBODY_UID, NOBODY_UID)
    return state


def test_run_dirs_and_tokens_planted_by_nobody_are_refused(state_parent: Path) -> None:
    """A run directory of nobody's with nobody's token, for whichever id `up` picks."""
    state = _planted(state_parent, nobodys_run_dirs=True)
    proc = _up(state)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "belongs to uid 65534" in proc.stderr and "Traceback" not in proc.stderr
    assert str(state) in proc.stderr
    assert not list(state.glob("*.json"))  # nothing recorded: nothing was built


def test_a_token_of_nobodys_in_roots_run_dir_is_refused(state_parent: Path) -> None:
    state = _planted(state_parent, nobodys_run_dirs=False)
    proc = _up(state)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "agent-token" in proc.stderr and "belongs to uid 65534" in proc.stderr
    assert not list(state.glob("*.json"))


def test_an_agent_refuses_a_token_file_of_nobodys(tmp_path: Path) -> None:
    """`clarke serve --token-file` (how every agent reads it) refuses the same file."""
    need(os.geteuid() == 0, "root (chown to nobody)")
    tmp_path.chmod(0o700)
    _plant_token(tmp_path, NOBODY_UID)
    proc = subprocess.run(
        [sys.executable, "-m", "clarke", "serve", "client", "--testbed", str(MAX_ID),
         "--token-file", str(tmp_path / "agent-token"), "--run-dir", str(tmp_path / "run"),
         "--pages-dir", str(tmp_path / "pages"), "--pki-dir", str(tmp_path / "pki")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    _refused(proc, tmp_path / "agent-token")
