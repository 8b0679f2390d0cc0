"""Captures, tried as a hostile local user would (issue 37, finding 1): a user who can
write the capture directory plants symbolic links in it while a load runs, hoping root
writes the key log and the pcap through them onto files of root's.

- Without a testbed: whatever is planted in DIR (a link where keys.log, link.pcap or
  qlog/ go; DIR itself swapped for a link) makes the write fail or stay inside DIR; no
  file outside changes. What is written is 0600, in directories of 0700.
- With a real testbed and Firefox (`clarke load --capture DIR`, DIR belonging to
  `nobody`, who plants links to root's files as soon as the testbed is coming up): no
  file outside DIR changes. A capture into a directory of root's: keys.log and link.pcap
  are 0600, and so were they where the browser and tcpdump first wrote them (the
  browser's temporary directory, the terminal's run directory), while the load ran."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clarke.browser.capture import KEYLOG, CapturedFiles
from clarke.contract import CaptureStopped
from clarke.errors import ClarkeError
from clarke.results.details import CaptureKept
from clarke.run.session.captures import PCAP, CaptureMode, CapturePolicy, write
from conftest import need
from testbeds import down_each_testbed_in

NOBODY = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]
PAGE = "triangular-100k"


def _files(link: bytes = b"pcap", **browser: bytes) -> tuple[CaptureStopped, CapturedFiles]:
    files = {KEYLOG: b"CLIENT_RANDOM secret", **browser}
    pcap = base64.b64encode(link).decode()
    return (
        CaptureStopped(interface="lan", pcap_b64=pcap, bytes=len(link), truncated=False),
        CapturedFiles(files={k: base64.b64encode(v).decode() for k, v in files.items()}),
    )


def _victims(root: Path) -> dict[Path, str]:
    """Files of root's outside DIR, and what is in them."""
    victims = root / "victims"
    victims.mkdir(mode=0o700)
    out = {}
    for name in ("shadow-like", "config-like"):
        p = victims / name
        p.write_text(f"{name}: untouched\n")
        out[p] = p.read_text()
    return out


def _unchanged(victims: dict[Path, str]) -> None:
    for path, text in victims.items():
        assert path.read_text() == text, path
    assert sorted(p.name for p in next(iter(victims)).parent.iterdir()) == sorted(
        p.name for p in victims
    )


def _write(policy: CapturePolicy, label: str = "load") -> CaptureKept | ClarkeError:
    link, browser = _files(**{"qlog/a.sqlog": b"qlog"})
    try:
        return write(policy, label, False, link, browser, [])
    except ClarkeError as e:
        return e


@pytest.mark.parametrize("planted", [KEYLOG, PCAP])
def test_a_link_planted_in_dir_is_not_followed(tmp_path: Path, planted: str) -> None:
    victims = _victims(tmp_path)
    target = next(iter(victims))
    capture_dir = tmp_path / "dir"
    capture_dir.mkdir()
    policy = CapturePolicy(CaptureMode.all, capture_dir, flat=True)  # checked empty here
    (capture_dir / planted).symlink_to(target)  # planted after the check
    got = _write(policy)
    _unchanged(victims)
    assert isinstance(got, ClarkeError) and planted in str(got), got
    assert (capture_dir / planted).is_symlink()


def test_a_linked_qlog_directory_and_a_swapped_dir_are_not_followed(tmp_path: Path) -> None:
    victims = _victims(tmp_path)
    capture_dir = tmp_path / "dir"
    capture_dir.mkdir()
    policy = CapturePolicy(CaptureMode.all, capture_dir, flat=True)
    (capture_dir / "qlog").symlink_to(next(iter(victims)).parent)
    got = _write(policy)
    assert isinstance(got, ClarkeError) and "qlog" in str(got), got
    _unchanged(victims)
    # DIR itself moved away and replaced by a link to root's directory.
    other = tmp_path / "dir2"
    other.mkdir()
    policy = CapturePolicy(CaptureMode.all, other, flat=True)
    other.rename(tmp_path / "dir2-moved")
    other.symlink_to(next(iter(victims)).parent)
    got = _write(policy)
    assert isinstance(got, ClarkeError), got
    _unchanged(victims)


def test_a_campaigns_captures_directory_planted_as_a_link(tmp_path: Path) -> None:
    """`clarke run --capture`: <results>/captures/ or <results>/captures/<label>/ as a
    link to a directory of root's."""
    victims = _victims(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    policy = CapturePolicy(CaptureMode.all, results)
    (results / "captures").symlink_to(next(iter(victims)).parent)
    assert isinstance(_write(policy, "r1-a1"), ClarkeError)
    _unchanged(victims)
    (results / "captures").unlink()
    (results / "captures").mkdir()
    (results / "captures" / "r1-a2").symlink_to(next(iter(victims)).parent)
    assert isinstance(_write(policy, "r1-a2"), ClarkeError)
    _unchanged(victims)


def test_keys_are_0600_in_directories_of_0700(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    got = _write(CapturePolicy(CaptureMode.all, results), "r1-a1")
    assert isinstance(got, CaptureKept) and got.kept, got
    folder = results / "captures" / "r1-a1"
    for d in (results / "captures", folder, folder / "qlog"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    for f in (folder / KEYLOG, folder / PCAP, folder / "qlog" / "a.sqlog"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    flat = tmp_path / "flat"
    flat.mkdir()
    got = _write(CapturePolicy(CaptureMode.all, flat, flat=True))
    assert isinstance(got, CaptureKept) and got.kept, got
    assert stat.S_IMODE((flat / KEYLOG).stat().st_mode) == 0o600
    assert stat.S_IMODE((flat / "qlog").stat().st_mode) == 0o700


# --- a real load --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def testbed() -> Iterator[tuple[int, dict[str, str]]]:
    """One LAN testbed in a private state dir; (id, the environment to reach it)."""
    need(os.geteuid() == 0, "root (network namespaces)")
    need(shutil.which("setpriv") is not None, "setpriv (util-linux), to act as nobody")
    need(shutil.which("tcpdump") is not None, "tcpdump (captures)")
    state = Path(tempfile.mkdtemp(prefix="clarke-sec-captures-"))
    env = {**os.environ, "CLARKE_STATE_DIR": str(state)}
    up = subprocess.run(
        [sys.executable, "-m", "clarke", "testbed", "up", "--profile", "lan", "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        yield json.loads(up.stdout)["id"], env
    finally:
        down_each_testbed_in(state, env)


def _load(testbed_id: int, env: dict[str, str], capture_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "clarke", "load", "--testbed", str(testbed_id), "--profile",
         "lan", "--http", "2", "--page", PAGE, "--capture", str(capture_dir), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


class Watcher:
    """While a load runs: the modes of every key log and pcap where the browser and
    tcpdump write them first (the browser's temporary capture directory, the terminal's
    run directory), and of the directories they are in, as root sees them."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.seen: dict[str, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _paths(self) -> Iterator[Path]:
        yield from Path(tempfile.gettempdir()).glob(f"clarke-capture-*/{KEYLOG}")
        yield from self.state.glob(f"*/terminal/captures/*/{PCAP}")

    def _run(self) -> None:
        while not self._stop.is_set():
            for p in self._paths():
                with contextlib.suppress(OSError):
                    mode, parent = p.lstat().st_mode, p.parent.lstat().st_mode
                    self.seen[str(p)] = (stat.S_IMODE(mode), stat.S_IMODE(parent))
            time.sleep(0.05)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.mark.root
@pytest.mark.browser
@pytest.mark.slow
def test_a_real_capture_is_private_from_first_write_to_last(
    testbed: tuple[int, dict[str, str]], tmp_path: Path
) -> None:
    testbed_id, env = testbed
    capture_dir = tmp_path / "capture"
    with Watcher(Path(env["CLARKE_STATE_DIR"])) as watcher:
        load = _load(testbed_id, env, capture_dir)
        out, err = load.communicate(timeout=300)
    assert load.returncode == 0, err
    kept = json.loads(out)["capture"]
    assert set(kept["files"]) >= {KEYLOG, PCAP}, kept
    assert stat.S_IMODE(capture_dir.stat().st_mode) == 0o700
    for name in (KEYLOG, PCAP):
        assert stat.S_IMODE((capture_dir / name).stat().st_mode) == 0o600, name
    first_writes = {p: m for p, m in watcher.seen.items() if not p.startswith(str(capture_dir))}
    assert any(p.endswith(KEYLOG) for p in first_writes), watcher.seen  # the browser's
    assert any(p.endswith(PCAP) for p in first_writes), watcher.seen  # tcpdump's
    for path, (mode, parent_mode) in first_writes.items():
        assert mode & 0o077 == 0 and parent_mode & 0o077 == 0, (path, oct(mode), oct(parent_mode))


PLANTER = r"""
import os, sys, time
capture_dir, victims = sys.argv[1], sys.argv[2:]
names = ["keys.log", "link.pcap", "qlog"]
deadline = time.monotonic() + 240
while time.monotonic() < deadline:
    for name, target in zip(names, victims + [os.path.dirname(victims[0])]):
        try:
            os.symlink(target, os.path.join(capture_dir, name))
        except OSError:
            pass
    time.sleep(0.01)
"""


@pytest.mark.root
@pytest.mark.browser
@pytest.mark.slow
def test_links_planted_by_nobody_during_a_real_load_are_not_followed(
    testbed: tuple[int, dict[str, str]],
) -> None:
    # Root's files, in a directory `nobody` may enter but not write (as /etc would be).
    base = Path(tempfile.mkdtemp(prefix="clarke-sec-plant-"))
    try:
        base.chmod(0o755)
        victims = base / "victims"
        victims.mkdir(mode=0o755)
        files = [victims / "a.conf", victims / "b.conf"]
        for f in files:
            f.write_text(f"{f.name}: root's, untouched\n")
        before = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
        # DIR: a new directory of nobody's, empty when clarke checks it.
        capture_dir = base / "capture"
        capture_dir.mkdir(mode=0o755)
        os.chown(capture_dir, 65534, 65534)
        testbed_id, env = testbed
        load = _load(testbed_id, env, capture_dir)
        # Past the emptiness check: once the terminal's tcpdump is running.
        state = Path(env["CLARKE_STATE_DIR"])
        deadline = time.monotonic() + 120
        while not any(state.glob("*/terminal/captures/*/tcpdump.err")):
            assert load.poll() is None and time.monotonic() < deadline, load.communicate()
            time.sleep(0.02)
        planter = subprocess.Popen(
            [*NOBODY, "--reset-env", "/usr/bin/python3", "-I", "-c", PLANTER,
             str(capture_dir), *map(str, files)],
            cwd="/",
        )  # fmt: skip
        try:
            out, err = load.communicate(timeout=300)
        finally:
            planter.kill()
            planter.wait()
        assert "Traceback" not in err, err
        after = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
        assert after == before, (out, err)
        assert sorted(p.name for p in victims.iterdir()) == ["a.conf", "b.conf"]
        # Whatever clarke did write is in DIR itself, 0600.
        for p in capture_dir.rglob("*"):
            if not p.is_symlink() and p.is_file():
                assert p.stat().st_uid == 0 and stat.S_IMODE(p.stat().st_mode) == 0o600, p
        if load.returncode != 0:
            assert "nothing was written through it" in err, err
    finally:
        shutil.rmtree(base, ignore_errors=True)
