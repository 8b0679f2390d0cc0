"""The next load's browser, started while the current one ends, and a quiet browser
before every navigation.

Starting Firefox is most of a load's time beside the page (docs/running.md). The runner
tells the client what the next load will ask of its browser (LoadRequest.next_load);
once the current page is measured, the client starts that browser, with its own new
profile, in the background, while the current browser quits and the runner reads its
stats. The next request takes it if it asks for exactly those settings, and a new
browser is started otherwise.

When (LoadRequest.start_ahead): "after-page", the default, starts the spare once the
current page's entries are collected, so nothing of it overlaps a measured load; the
load then waits for most of that start. "during-page" starts it just before the current
load navigates, at the kernel's idle priority (SCHED_IDLE): its processes run only on a
core the measured load leaves idle, and are preempted the moment the load's own wake.
Once the current page is measured, every task of the spare is moved back to normal
priority (Spares.promote, to_normal_priority; take() does it too where promote did not
run), and the load that takes it checks none is left at idle before it navigates.
docs/running.md has the measured cost of either on PLT and on the time between loads.

Whichever way a browser was started, the load navigates only once the browser's own
processes are quiet (wait_quiet), so no start-up work of Firefox runs inside a measured
page load, and a prestarted browser and one started on demand meet the page alike."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clarke.browser.load import BrowserSettings
from clarke.place import procs

log = logging.getLogger(__name__)

# Quiet: the browser's processes together used less than QUIET_CPU_FRACTION of one core
# over QUIET_WINDOW_S. Waiting stops after QUIET_MAX_S whatever the browser does.
QUIET_WINDOW_S = 0.1
QUIET_CPU_FRACTION = 0.1
QUIET_MAX_S = 3.0


@dataclass
class Started:
    """A browser up and ready to navigate."""

    driver: Any
    profile: Path
    made_from: str  # LoadResult.profile
    version: str
    phases_ms: dict[str, float] = field(default_factory=dict)  # its profile and start
    # How it was started (LoadResult.started): "on demand", or ahead and when.
    how: str = "on demand"
    # Since when its processes are known quiet (at normal priority), if they are.
    quiet_since: QuietMark | None = None
    # Context isolation (browser/contexts.py): its first window's handle and size, the
    # loads it served, the context made ready for its next load, and (Chromium) the
    # reader of its NetLog.
    home: str = ""
    home_size: tuple[int, int] = (0, 0)
    contexts: int = 0
    context: Any = None
    netlog: Any = None


def process_tree(root: int) -> list[int]:
    """`root` and every process descended from it."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            head, rest = stat.read_text().split(" (", 1)
            ppid = int(rest.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not a process
        children.setdefault(ppid, []).append(int(head))
    tree: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def tree_cpu_ticks(root: int) -> int:
    return sum(procs.cpu_ticks(pid) or 0 for pid in process_tree(root))


def at_idle_priority() -> None:
    """The calling thread, and every process it starts from now on, at SCHED_IDLE: they
    run only when a core has nothing else to run (the policy is per thread on Linux, and
    inherited through fork and exec)."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


@functools.cache
def idle_priority_problem() -> str:
    """Why this process may not start a browser at idle priority, or "": it must be able
    to move a thread back from SCHED_IDLE to normal, which takes CAP_SYS_NICE or a
    RLIMIT_NICE that allows nice 0 (a container without SYS_NICE has neither)."""
    problem: list[str] = []

    def probe() -> None:
        try:
            at_idle_priority()
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError as e:
            problem.append(f"a thread at idle priority cannot be moved back here: {e}")

    thread = threading.Thread(target=probe, name="idle-priority-probe", daemon=True)
    thread.start()
    thread.join()
    return problem[0] if problem else ""


def tasks_at_idle(root: int) -> list[int]:
    """Every thread of every process under `root` whose policy is SCHED_IDLE."""
    idle = []
    for pid in process_tree(root):
        for task in Path(f"/proc/{pid}/task").glob("[0-9]*"):
            try:
                if os.sched_getscheduler(int(task.name)) == os.SCHED_IDLE:
                    idle.append(int(task.name))
            except OSError:
                continue  # ended meanwhile
    return idle


def to_normal_priority(root: int) -> int:
    """Moves every task under `root` at SCHED_IDLE back to the normal policy, scanning
    until two scans in a row find none (a process forked meanwhile inherits the idle
    policy, and one forked while its parent was moved may not be listed yet: the load
    checks again before it navigates); the number of tasks moved. RuntimeError when
    they keep appearing."""
    moved, clean = 0, 0
    for _ in range(20):
        idle = tasks_at_idle(root)
        clean = 0 if idle else clean + 1
        if clean == 2:
            return moved
        for tid in idle:
            try:
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                moved += 1
            except ProcessLookupError:
                continue
    raise RuntimeError(f"tasks under {root} kept starting at idle priority")


@dataclass(frozen=True)
class QuietMark:
    """The CPU ticks of a browser's processes at a moment (time.monotonic()), taken while
    they ran at normal priority: from it, wait_quiet can judge a longer window that ends
    now instead of waiting for a new one."""

    at: float
    ticks: int

    @classmethod
    def now(cls, root: int) -> QuietMark:
        return cls(time.monotonic(), tree_cpu_ticks(root))


def quiet_all_along(since: QuietMark, now: float, ticks: int, per_window: float) -> bool:
    """Whether `ticks` at `now` are within the quiet rate since `since`, over a window at
    least QUIET_WINDOW_S long."""
    window_s = now - since.at
    return window_s >= QUIET_WINDOW_S and ticks - since.ticks <= per_window * window_s / (
        QUIET_WINDOW_S
    )


def wait_quiet(root: int, since: QuietMark | None = None) -> tuple[float, QuietMark | None]:
    """Waits until the processes under `root` (the driver and its browser) are quiet;
    (seconds waited, and where the window they were quiet over began, or None when they
    were not quiet before QUIET_MAX_S). With `since`, the window from it to now (waiting
    until it is QUIET_WINDOW_S long) is judged first, at the same rate, and nothing more
    is waited for when they were quiet all along.

    The mark returned serves as a later call's `since`: the window it judges then runs
    from the start of this quiet one to that moment, so a browser found quiet here and
    quiet since needs no new window of its own."""
    started = time.monotonic()
    per_window = QUIET_CPU_FRACTION * QUIET_WINDOW_S * os.sysconf("SC_CLK_TCK")
    slept = 0.0
    if since is not None and started - since.at < QUIET_WINDOW_S:
        # A mark too recent for a window: the rest of one, judged from the mark.
        slept = QUIET_WINDOW_S - (started - since.at)
        time.sleep(slept)
    before = QuietMark.now(root)
    if since is not None and quiet_all_along(since, before.at, before.ticks, per_window):
        return slept, since
    while time.monotonic() - started < QUIET_MAX_S:
        time.sleep(QUIET_WINDOW_S)
        now = QuietMark.now(root)
        if now.ticks - before.ticks <= per_window:
            return time.monotonic() - started, before
        before = now
    return time.monotonic() - started, None


class Spares:
    """At most one browser started ahead, for the settings the runner announced."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._settings: BrowserSettings | None = None
        self._thread: threading.Thread | None = None
        self._started: Started | None = None
        self._error = ""
        self._idle = False

    def prepare(
        self, settings: BrowserSettings, start: Callable[[], Started], idle: bool = False
    ) -> None:
        """Starts a browser for `settings` in the background (replacing any spare); `idle`:
        at idle priority (at_idle_priority), for a start during a measured load."""
        self.discard()

        def run() -> None:
            try:
                if idle:
                    at_idle_priority()
                started = start()
                started.how = (
                    "ahead, during the previous page, at idle priority"
                    if idle
                    else "ahead, after the previous page"
                )
            except Exception as e:  # the next load then starts its own, and says why
                log.warning("the next load's browser did not start ahead: %s", e)
                with self._lock:
                    self._error = f"{type(e).__name__}: {e}"
                return
            with self._lock:
                self._started = started

        with self._lock:
            self._settings, self._error, self._idle = settings, "", idle
            self._thread = threading.Thread(target=run, name="next-browser", daemon=True)
            self._thread.start()

    def promote(self) -> None:
        """Moves a spare started at idle priority back to normal priority, once the page
        it overlapped is measured, so it may finish its start, and be seen quiet, while
        the current browser quits."""
        with self._lock:
            if not self._idle or self._thread is None:
                return
            self._idle = False
            started = self._started
        to_normal_priority(os.getpid())
        if started is not None:  # its start is over: quiet from now on, if nothing runs
            started.quiet_since = QuietMark.now(started.driver.service.process.pid)

    def take(self, settings: BrowserSettings) -> tuple[Started | None, str]:
        """The spare if it was started for `settings` (waiting for its start to end);
        else None, with why not ("" when none was announced)."""
        with self._lock:
            wanted, thread = self._settings, self._thread
        if wanted is None or thread is None:
            return None, ""
        if wanted != settings:
            self.discard()
            return None, "the next load asked for other settings than announced"
        if self._idle:  # the rest of its start at normal priority; again for what it forks
            to_normal_priority(os.getpid())
        thread.join()
        if self._idle:
            to_normal_priority(os.getpid())
        with self._lock:
            started, error = self._started, self._error
            self._settings, self._thread, self._started = None, None, None
        return started, error

    def discard(self) -> None:
        """Quits a spare nobody will use."""
        with self._lock:
            thread, idle = self._thread, self._idle
            self._settings, self._thread = None, None
        if thread is not None:
            if idle:  # its start and its quitting, without waiting for an idle core
                to_normal_priority(os.getpid())
            thread.join()
            if idle:
                to_normal_priority(os.getpid())
        with self._lock:
            started, self._started = self._started, None
        if started is not None:
            quit_browser(started)


# How long quitting a browser started with WebDriver BiDi waits for Selenium's thread that
# reads the BiDi socket. Selenium closes the socket, then joins that thread for its whole
# reply timeout (30 s); websocket-client's reader waits in epoll for up to 10 s at a time,
# and a socket closed under it no longer wakes it: 1 quit in 4 to 6 took 10.0 s instead of
# about 0.6 s (Firefox 153 ESR, Selenium 4.51, websocket-client 1.9; docs/running.md). The
# reader is a daemon thread with nothing left to do, and ends within those 10 s by itself.
BIDI_READER_JOIN_S = 0.2


def quit_driver(driver: Any) -> None:
    """Ends a WebDriver session and its browser, without waiting on the BiDi reader."""
    # Selenium gives no public handle on its BiDi connection; without one (no BiDi, or
    # another Selenium), quit() is as it always was.
    bidi = getattr(driver, "_websocket_connection", None)
    if bidi is not None and hasattr(bidi, "response_wait_timeout"):
        bidi.response_wait_timeout = BIDI_READER_JOIN_S
    driver.quit()


def quit_browser(started: Started) -> None:
    try:
        quit_driver(started.driver)
    finally:
        shutil.rmtree(started.profile, ignore_errors=True)


SPARES = Spares()
