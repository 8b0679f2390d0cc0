"""Context isolation: a browser kept running between loads, and a new isolated context
in it for every load (LoadRequest.isolation "context"; docs/running.md, "Isolation").

A context is a WebDriver BiDi user context (`browser.createUserContext`), which both
browsers implement: Firefox as a container (its own `userContextId` in every origin
attribute), Chromium as a browser context (CDP `Target.createBrowserContext`, an
off-the-record profile with its own network context). The load's page opens in a new
tab of that context (`browsingContext.create`), which Selenium's classic commands then
drive like any window; once the page is measured the tab is closed and the context
removed (`browser.removeUserContext`).

The specification promises each user context its own storage partition; it says
nothing of connections, TLS sessions, the HTTP cache, or Alt-Svc and HSTS state. So
whether a context starts from nothing is not assumed: every load is checked
(run/session/isolation.py, browser/load.py `from_cache`), and a browser whose load
failed anything is quit, never used again. A browser also ends after `loads_per_browser`
loads. The HTTP version, connections and preferences are the browser's, fixed at its
start, so the client keeps one browser per set of settings (at most KEPT_BROWSERS): a
campaign whose cells alternate finds each cell's browser waiting.

While the runner reads the stats of the load just measured, the client closes that
load's context and opens the next one in the background, and waits for the browser to
be quiet (prestart.wait_quiet): the next load mostly finds its context open and its
browser quiet."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clarke.browser import prestart
from clarke.browser.load import BrowserSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Context:
    """A user context and the tab (its WebDriver window handle) a load runs in."""

    user_context: str
    window: str


def open_context(driver: Any, window: tuple[int, int]) -> Context:
    """A new user context with one tab in it, which the driver then commands."""
    user_context = str(driver.browser.create_user_context())
    handle = str(driver.browsing_context.create(type="tab", user_context=user_context))
    driver.switch_to.window(handle)
    # A browser puts another context's tab in a window of its own (Chromium): the
    # campaign's window, whatever size that one was given.
    if tuple(driver.get_window_size().values()) != window:
        driver.set_window_size(*window)
    return Context(user_context, handle)


def close_context(driver: Any, context: Context, home: str) -> None:
    """Closes the context's tab and removes the context, back on the browser's first
    window (the browser ends when its last window closes)."""
    driver.browsing_context.close(context.window)
    driver.browser.remove_user_context(context.user_context)
    driver.switch_to.window(home)


# Browsers kept at once, one per set of settings: a campaign that alternates HTTP
# versions (or browsers' preferences) then finds a browser for each of its cells instead
# of starting one per load. Idle browsers cost memory (a few hundred MB each), not CPU.
KEPT_BROWSERS = 4


@dataclass
class _Kept:
    browser: prestart.Started
    thread: threading.Thread | None = None  # making its next context ready
    error: str = ""


class Resident:
    """Browsers kept for later loads, at most one per set of settings and `size` in
    all, each with its next context made ready in the background."""

    def __init__(self, size: int = KEPT_BROWSERS) -> None:
        self.size = size
        self._lock = threading.Lock()
        # By the settings' JSON (they hold a dict of preferences: not hashable), in the
        # order they were kept.
        self._kept: dict[str, _Kept] = {}

    def keep(
        self,
        browser: prestart.Started,
        settings: BrowserSettings,
        prepare: Callable[[prestart.Started], None],
    ) -> None:
        """Keeps `browser` for a later load with `settings`; `prepare` runs in the
        background (closes the context just used, opens the next). A browser kept for
        the same settings before is quit, and the longest-kept one when `size` are."""
        self.discard(settings)
        with self._lock:
            evicted = list(self._kept)[: max(0, len(self._kept) - self.size + 1)]
        for old in evicted:
            self._quit(old)
        entry = _Kept(browser)

        def run() -> None:
            try:
                prepare(browser)
            except Exception as e:  # the next load then starts a new browser, and says why
                log.warning("a browser kept for a later load failed: %s", e)
                entry.error = f"{type(e).__name__}: {e}"

        entry.thread = threading.Thread(target=run, name="next-context", daemon=True)
        with self._lock:
            self._kept[settings.model_dump_json()] = entry
            entry.thread.start()

    def _pop(self, key: str) -> _Kept | None:
        with self._lock:
            entry = self._kept.pop(key, None)
        if entry is not None and entry.thread is not None:
            entry.thread.join()
        return entry

    def has(self, settings: BrowserSettings | None) -> bool:
        if settings is None:
            return False
        with self._lock:
            return settings.model_dump_json() in self._kept

    def take(
        self, settings: BrowserSettings, limit: int, new_browser: bool
    ) -> tuple[prestart.Started | None, str]:
        """The browser kept for `settings`, its next context open, if it may serve a
        load; else None and why a new browser starts (a kept one that may not is quit).
        After a failed load (`new_browser`) every kept browser is quit: which of them a
        failed isolation check implicates is not known here."""
        if new_browser:
            self.discard()
            return None, "the previous load failed"
        self._wait_for_others(settings)
        entry = self._pop(settings.model_dump_json())
        if entry is None:
            with self._lock:
                others = len(self._kept)
            kept = f" ({others} kept for other settings)" if others else ""
            return None, f"no browser kept for this load's settings{kept}"
        browser, why = entry.browser, ""
        if entry.error:
            why = f"its next context could not be made ready: {entry.error}"
        elif browser.contexts >= limit:
            why = f"the browser served its {limit} loads"
        if why:
            prestart.quit_browser(browser)
            return None, why
        return browser, ""

    def _wait_for_others(self, settings: BrowserSettings) -> None:
        """Waits until every browser kept for other settings has its next context ready:
        the work of opening one (a new tab, its process woken; a Chromium renderer
        started) must not run beside this load's page, where it would take a core from
        the browser being measured. A campaign alternating its cells' settings made each
        load overlap the previous browser's context change before."""
        key = settings.model_dump_json()
        with self._lock:
            threads = [e.thread for k, e in self._kept.items() if k != key and e.thread]
        for thread in threads:
            thread.join()

    def discard(self, settings: BrowserSettings | None = None) -> None:
        """Quits the browser kept for `settings`, or every kept browser."""
        with self._lock:
            keys = [settings.model_dump_json()] if settings is not None else list(self._kept)
        for key in keys:
            self._quit(key)

    def _quit(self, key: str) -> None:
        entry = self._pop(key)
        if entry is not None:
            prestart.quit_browser(entry.browser)


RESIDENT = Resident()
