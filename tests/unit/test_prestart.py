"""Starting the next load's browser ahead (browser/prestart.py): which request takes
it, what happens to one nobody takes, and when a browser counts as quiet."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
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


@pytest.mark.timing
def test_a_sleeping_browser_is_quiet_at_once_and_a_busy_one_never(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        waited, quiet_from = prestart.wait_quiet(sleeper.pid)
        assert quiet_from is not None and waited < prestart.QUIET_MAX_S
        # Where its quiet window began: judged from there, quiet still, with no new window.
        assert time.monotonic() - quiet_from.at >= prestart.QUIET_WINDOW_S
        assert prestart.wait_quiet(sleeper.pid, quiet_from) == (0.0, quiet_from)
        # Any CPU at all is too much here: a spinning process is never quiet.
        monkeypatch.setattr(prestart, "QUIET_CPU_FRACTION", 0.0)
        monkeypatch.setattr(prestart, "QUIET_MAX_S", 0.6)
        waited, quiet_from = prestart.wait_quiet(busy.pid)
        assert quiet_from is None and waited >= 0.6
    finally:
        for p in (sleeper, busy):
            p.kill()
            p.wait()


def test_a_browser_started_during_a_load_runs_at_idle_priority_until_taken(
    tmp_path: Path,
) -> None:
    """A start during a measured load: its thread, the process it starts and what that
    one starts all run at SCHED_IDLE; the load that takes it finds every one of them
    back at the normal policy."""
    spares, seen = prestart.Spares(), {}
    observed = threading.Event()  # take() moves them back at once: look before it
    children: list[subprocess.Popen[bytes]] = []
    forks = "import subprocess, time; subprocess.Popen(['sleep', '30']); time.sleep(30)"

    def start() -> prestart.Started:
        child = subprocess.Popen([sys.executable, "-c", forks])
        children.append(child)
        for _ in range(100):  # until its own child is up
            if len(prestart.process_tree(child.pid)) == 2:
                break
            threading.Event().wait(0.05)
        seen["idle"] = sorted(prestart.tasks_at_idle(os.getpid()))
        seen["tree"] = prestart.process_tree(child.pid)
        observed.set()
        profile = tmp_path / "profile"
        profile.mkdir()
        return prestart.Started(FakeDriver(), profile, "template", "153.0")

    try:
        spares.prepare(H2, start, idle=True)
        assert observed.wait(20)
        started, why_not = spares.take(H2)
        assert started is not None and why_not == ""
        assert started.how == "ahead, during the previous page, at idle priority"
        assert len(seen["tree"]) == 2
        assert set(seen["tree"]) <= set(seen["idle"]), "the start and its children at idle"
        assert threading.get_native_id() not in seen["idle"], "the caller is untouched"
        assert prestart.tasks_at_idle(os.getpid()) == []
        assert all(os.sched_getscheduler(pid) == os.SCHED_OTHER for pid in seen["tree"])
    finally:
        for child in children:
            for pid in prestart.process_tree(child.pid)[::-1]:
                os.kill(pid, 9)
            child.wait()


def test_a_browser_started_after_the_page_keeps_the_normal_policy(tmp_path: Path) -> None:
    spares, made = prestart.Spares(), []
    spares.prepare(H2, _starter(tmp_path, made))
    started, _ = spares.take(H2)
    assert started is not None and started.how == "ahead, after the previous page"


class _Process:
    def __init__(self, pid: int) -> None:
        self.pid = pid


class _Service:
    def __init__(self, pid: int) -> None:
        self.process = _Process(pid)


class DriverOf(FakeDriver):
    """A driver whose process is `pid`."""

    def __init__(self, pid: int) -> None:
        super().__init__()
        self.service = _Service(pid)


@pytest.mark.timing
def test_a_quiet_mark_spares_the_wait_only_for_a_browser_quiet_since(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The sleeper says when its interpreter has started: on a loaded host the start-up
    # alone outlasts a quiet window, and its CPU would count against the marks below.
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
    )
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline() == b"ready\n"
        young = prestart.QuietMark.now(sleeper.pid)
        waited, quiet_from = prestart.wait_quiet(sleeper.pid, young)
        # A mark too young: the rest of a window from it, no more.
        assert quiet_from == young and 0 < waited <= prestart.QUIET_WINDOW_S
        assert time.monotonic() - young.at >= prestart.QUIET_WINDOW_S
        old = prestart.QuietMark(young.at - 2 * prestart.QUIET_WINDOW_S, young.ticks)
        assert prestart.wait_quiet(sleeper.pid, old) == (0.0, old)
        monkeypatch.setattr(prestart, "QUIET_MAX_S", 0.3)
        mark = prestart.QuietMark.now(busy.pid)
        threading.Event().wait(2 * prestart.QUIET_WINDOW_S)
        waited, quiet_from = prestart.wait_quiet(busy.pid, mark)
        assert quiet_from is None and waited >= 0.3
    finally:
        for p in (sleeper, busy):
            p.kill()
            p.wait()
        assert sleeper.stdout is not None
        sleeper.stdout.close()


def test_promote_moves_a_started_spare_to_normal_priority_and_marks_it_quiet(
    tmp_path: Path,
) -> None:
    spares = prestart.Spares()
    children: list[subprocess.Popen[bytes]] = []

    def start() -> prestart.Started:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        children.append(child)
        return prestart.Started(DriverOf(child.pid), tmp_path, "template", "153.0")

    try:
        spares.prepare(H2, start, idle=True)
        # At idle priority its start waits for a free core: under a build on both cores
        # (cargo beside make check) that took longer than 20 s once.
        for _ in range(2400):
            if spares._started is not None:
                break
            threading.Event().wait(0.05)
        assert spares._started is not None, "the spare did not start at idle priority in 120 s"
        # The thread that started it runs at idle priority too, until it ends just after
        # (on a loaded machine a CI run saw it still there).
        assert spares._thread is not None
        spares._thread.join(timeout=30)
        assert prestart.tasks_at_idle(os.getpid()) == [children[0].pid]
        spares.promote()
        assert prestart.tasks_at_idle(os.getpid()) == []
        started, _ = spares.take(H2)
        assert started is not None and started.quiet_since is not None
    finally:
        for child in children:
            child.kill()
            child.wait()


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_without_sys_nice_idle_priority_is_refused_with_the_reason() -> None:
    """As in a container without SYS_NICE: a thread at idle priority could not be moved
    back, so no browser is started at it (the client then starts it after the page)."""
    probe = "from clarke.browser import prestart; print(prestart.idle_priority_problem() or 'ok')"
    out = subprocess.run(
        ["prlimit", "--nice=0", "setpriv", "--bounding-set", "-sys_nice", "--inh-caps",
         "-sys_nice", sys.executable, "-c", probe],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "cannot be moved back here" in out and "Operation not permitted" in out
    assert prestart.idle_priority_problem() == ""  # root, as the netns client runs
