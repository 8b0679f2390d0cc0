"""Starting the next load's browser ahead (browser/prestart.py): which request takes
it, what happens to one nobody takes, and when a browser counts as quiet."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from clarke.browser import prestart
from clarke.browser.load import BrowserSettings


class FakeDriver:
    def __init__(self) -> None:
        self.quit_calls = 0

    def quit(self) -> None:
        self.quit_calls += 1


def _starter(tmp_path: Path, made: list[Any], gate: threading.Event | None = None) -> Any:
    def start() -> prestart.Started:
        if gate is not None:
            gate.wait(5)
        profile = tmp_path / f"profile{len(made)}"
        profile.mkdir()
        started = prestart.Started(FakeDriver(), profile, "template", "153.0")
        made.append(started)
        return started

    return start


H2 = BrowserSettings(http="2")
H3 = BrowserSettings(http="3")


def test_the_request_announced_takes_the_browser_started_for_it(tmp_path: Path) -> None:
    spares, made = prestart.Spares(), []
    gate = threading.Event()
    spares.prepare(H2, _starter(tmp_path, made, gate))
    gate.set()  # take() waits for a start that is still under way
    started, why_not = spares.take(BrowserSettings(http="2"))
    assert started is made[0] and why_not == ""
    assert started.driver.quit_calls == 0 and started.profile.is_dir()
    assert spares.take(H2) == (None, "")  # taken once


def test_a_request_with_other_settings_gets_none_and_the_spare_is_quit(tmp_path: Path) -> None:
    spares, made = prestart.Spares(), []
    spares.prepare(H2, _starter(tmp_path, made))
    started, why_not = spares.take(H3)
    assert started is None and "other settings" in why_not
    assert made[0].driver.quit_calls == 1 and not made[0].profile.exists()


def test_prefs_and_connections_are_part_of_the_settings(tmp_path: Path) -> None:
    spares, made = prestart.Spares(), []
    spares.prepare(BrowserSettings(http="1.1", connections=1), _starter(tmp_path, made))
    assert spares.take(BrowserSettings(http="1.1", connections=6))[0] is None
    spares.prepare(
        BrowserSettings(http="2", prefs={"network.http.http2.chunk-size": 16}),
        _starter(tmp_path, made),
    )
    assert spares.take(BrowserSettings(http="2"))[0] is None


def test_a_start_that_failed_is_said_and_leaves_the_load_to_start_its_own(
    tmp_path: Path,
) -> None:
    spares = prestart.Spares()

    def fails() -> prestart.Started:
        raise RuntimeError("geckodriver exited")

    spares.prepare(H2, fails)
    assert spares.take(H2) == (None, "RuntimeError: geckodriver exited")


def test_discard_and_a_new_announcement_quit_the_spare(tmp_path: Path) -> None:
    spares, made = prestart.Spares(), []
    spares.prepare(H2, _starter(tmp_path, made))
    spares.prepare(H3, _starter(tmp_path, made))
    spares.discard()
    assert [s.driver.quit_calls for s in made] == [1, 1]
    assert not any(s.profile.exists() for s in made)


def test_the_process_tree_holds_the_children() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tree = prestart.process_tree(os.getpid())
        assert tree[0] == os.getpid() and child.pid in tree
    finally:
        child.kill()
        child.wait()


def test_a_sleeping_browser_is_quiet_at_once_and_a_busy_one_never(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        waited, quiet = prestart.wait_quiet(sleeper.pid)
        assert quiet and waited < prestart.QUIET_MAX_S
        # Any CPU at all is too much here: a spinning process is never quiet.
        monkeypatch.setattr(prestart, "QUIET_CPU_FRACTION", 0.0)
        monkeypatch.setattr(prestart, "QUIET_MAX_S", 0.6)
        waited, quiet = prestart.wait_quiet(busy.pid)
        assert not quiet and waited >= 0.6
    finally:
        for p in (sleeper, busy):
            p.kill()
            p.wait()
