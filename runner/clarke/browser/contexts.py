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
loads, and whenever a load asks it for other settings (the HTTP version, connections and
preferences are the browser's, fixed at its start).

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


class Resident:
    """At most one browser kept for the next load, for the settings it was started with,
    its next context made ready in the background."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._browser: prestart.Started | None = None
        self._settings: BrowserSettings | None = None
        self._thread: threading.Thread | None = None
        self._error = ""

    def keep(
        self,
        browser: prestart.Started,
        settings: BrowserSettings,
        prepare: Callable[[prestart.Started], None],
    ) -> None:
        """Keeps `browser` for the next load with `settings`; `prepare` runs in the
        background (closes the context just used, opens the next)."""
        self.discard()

        def run() -> None:
            try:
                prepare(browser)
            except Exception as e:  # the next load then starts a new browser, and says why
                log.warning("the browser kept for the next load failed: %s", e)
                with self._lock:
                    self._error = f"{type(e).__name__}: {e}"

        with self._lock:
            self._browser, self._settings, self._error = browser, settings, ""
            self._thread = threading.Thread(target=run, name="next-context", daemon=True)
            self._thread.start()

    def _pop(self) -> tuple[prestart.Started | None, BrowserSettings | None, str]:
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._lock:
            out = self._browser, self._settings, self._error
            self._browser, self._settings, self._thread, self._error = None, None, None, ""
        return out

    def take(
        self, settings: BrowserSettings, limit: int, new_browser: bool
    ) -> tuple[prestart.Started | None, str]:
        """The kept browser, its next context open, if it may serve a load with
        `settings`; else None and why a new browser starts (the kept one is quit)."""
        browser, wanted, error = self._pop()
        if browser is None:
            return None, "no browser kept from the previous load"
        why = ""
        if error:
            why = f"its next context could not be made ready: {error}"
        elif new_browser:
            why = "the previous load failed"
        elif wanted != settings:
            why = "this load asks its browser for other settings"
        elif browser.contexts >= limit:
            why = f"the browser served its {limit} loads"
        if why:
            prestart.quit_browser(browser)
            return None, why
        return browser, ""

    def discard(self) -> None:
        """Quits the kept browser, if any."""
        browser, _, _ = self._pop()
        if browser is not None:
            prestart.quit_browser(browser)


RESIDENT = Resident()
