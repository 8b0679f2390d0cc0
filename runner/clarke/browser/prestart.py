"""The next load's browser, started while the current one ends, and a quiet browser
before every navigation.

Starting Firefox is most of a load's time beside the page (docs/running.md). The runner
tells the client what the next load will ask of its browser (LoadRequest.next_load);
once the current page is measured, the client starts that browser, with its own new
profile, in the background, while the current browser quits and the runner reads its
stats. The next request takes it if it asks for exactly those settings, and a new
browser is started otherwise. Nothing of the measured load overlaps: the spare starts
after the current load's entries are collected.

Whichever way a browser was started, the load navigates only once the browser's own
processes are quiet (wait_quiet), so no start-up work of Firefox runs inside a measured
page load, and a prestarted browser and one started on demand meet the page alike."""

from __future__ import annotations

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


def wait_quiet(root: int) -> tuple[float, bool]:
    """Waits until the processes under `root` (the driver and its browser) are quiet;
    (seconds waited, whether they became quiet before QUIET_MAX_S)."""
    started = time.monotonic()
    allowed = QUIET_CPU_FRACTION * QUIET_WINDOW_S * os.sysconf("SC_CLK_TCK")
    before = tree_cpu_ticks(root)
    while time.monotonic() - started < QUIET_MAX_S:
        time.sleep(QUIET_WINDOW_S)
        now = tree_cpu_ticks(root)
        if now - before <= allowed:
            return time.monotonic() - started, True
        before = now
    return time.monotonic() - started, False


class Spares:
    """At most one browser started ahead, for the settings the runner announced."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._settings: BrowserSettings | None = None
        self._thread: threading.Thread | None = None
        self._started: Started | None = None
        self._error = ""

    def prepare(self, settings: BrowserSettings, start: Callable[[], Started]) -> None:
        """Starts a browser for `settings` in the background (replacing any spare)."""
        self.discard()

        def run() -> None:
            try:
                started = start()
            except Exception as e:  # the next load then starts its own, and says why
                log.warning("the next load's browser did not start ahead: %s", e)
                with self._lock:
                    self._error = f"{type(e).__name__}: {e}"
                return
            with self._lock:
                self._started = started

        with self._lock:
            self._settings, self._error = settings, ""
            self._thread = threading.Thread(target=run, name="next-browser", daemon=True)
            self._thread.start()

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
        thread.join()
        with self._lock:
            started, error = self._started, self._error
            self._settings, self._thread, self._started = None, None, None
        return started, error

    def discard(self) -> None:
        """Quits a spare nobody will use."""
        with self._lock:
            thread = self._thread
            self._settings, self._thread = None, None
        if thread is not None:
            thread.join()
        with self._lock:
            started, self._started = self._started, None
        if started is not None:
            quit_browser(started)


def quit_browser(started: Started) -> None:
    try:
        started.driver.quit()
    finally:
        shutil.rmtree(started.profile, ignore_errors=True)


SPARES = Spares()
