"""Firefox's start-up caches, made once per client and copied into every load's new
profile, so that a load's Firefox starts warm without inheriting anything of another.

A new, empty profile makes Firefox build its start-up caches at every start: the
script preloader's compiled chrome JavaScript, the start-up cache, the built-in add-ons'
registry. That is most of the time Firefox takes to start (docs/running.md, "Where a
load's time goes"). The client makes a template once: Firefox with the base preferences
only, started and quit without opening any page. Only the files in TEMPLATE_FILES are
kept from it: caches of Firefox's own code and the record of its own add-ons, none of
which any page, connection or load writes. Cookies, the HTTP cache, HSTS and Alt-Svc
state, TLS session tickets, history and stored preferences are never copied: every load
still starts from nothing but these files, its own NSS database and its own user.js."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path

from clarke.browser import prefs as firefox_prefs

log = logging.getLogger(__name__)

# What a template keeps, and why each is safe to share between loads.
TEMPLATE_FILES: dict[str, str] = {
    "startupCache": "compiled chrome JavaScript and start-up cache of Firefox's own code",
    "compatibility.ini": "the build these caches belong to: another build discards them",
    "extensions.json": "the registry of Firefox's built-in add-ons (no add-on is installed)",
    "addonStartup.json.lz4": "where the built-in add-ons are, read at start",
    "times.json": "when the template was made (Firefox reads it at start)",
}
START_TIMEOUT_S = 120


def seed(profile: Path, template: Path) -> None:
    """Copies the template's files into `profile` (a new, empty directory)."""
    for name in TEMPLATE_FILES:
        source = template / name
        if source.is_dir():
            shutil.copytree(source, profile / name)
        elif source.is_file():
            shutil.copy2(source, profile / name)


def _make(binary: str, geckodriver: str, parent: Path | None) -> Path:
    """A template for `binary`: Firefox started headless on an empty profile with the
    base preferences, and quit once its first window is up; then only TEMPLATE_FILES."""
    # Selenium is imported here: the client's agent is the only process that makes one.
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.firefox.options import Options
    from selenium.webdriver.firefox.service import Service

    template = Path(tempfile.mkdtemp(prefix="clarke-profile-template-", dir=parent))
    (template / "user.js").write_text(
        firefox_prefs.user_js({p.name: p.value for p in firefox_prefs.BASE})
    )
    opts = Options()
    opts.binary_location = binary
    for arg in ("-headless", "-no-remote", "-profile", str(template)):
        opts.add_argument(arg)
    service = Service(executable_path=geckodriver, log_output=os.devnull)
    driver = webdriver.Firefox(options=opts, service=service)
    driver.quit()
    for entry in template.iterdir():
        if entry.name not in TEMPLATE_FILES:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    if not (template / "startupCache").is_dir():
        shutil.rmtree(template, ignore_errors=True)
        raise RuntimeError("Firefox wrote no startupCache into the template")
    return template


class Templates:
    """One template per Firefox binary for the life of the process, made on first use.
    A template that cannot be made is not retried: loads then start on empty profiles,
    as they always could, and say so (`template_error`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[str, Path | None] = {}
        self.errors: dict[str, str] = {}
        atexit.register(self.remove)

    def get(self, binary: str, geckodriver: str, parent: Path | None = None) -> Path | None:
        with self._lock:
            if binary not in self._made:
                try:
                    self._made[binary] = _make(binary, geckodriver, parent)
                except Exception as e:  # any failure leaves loads on empty profiles
                    log.warning("no Firefox profile template for %s: %s", binary, e)
                    self.errors[binary] = f"{type(e).__name__}: {e}"
                    self._made[binary] = None
            return self._made[binary]

    def remove(self) -> None:
        with self._lock:
            for path in self._made.values():
                if path is not None:
                    shutil.rmtree(path, ignore_errors=True)
            self._made.clear()


TEMPLATES = Templates()
