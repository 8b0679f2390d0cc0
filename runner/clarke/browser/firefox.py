"""Finding Firefox and geckodriver, and making a fresh profile for one load."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from clarke import sh
from clarke.browser import prefs as firefox_prefs
from clarke.browser import profile_template
from clarke.errors import EnvironmentProblem
from clarke.timing import Phases

CANDIDATES = ("firefox-nightly", "firefox", "firefox-esr")
CA_NICKNAME = "Clarke testbed CA"


def find_firefox(wanted: str | None = None) -> str:
    """A path or name given, else the first of firefox-nightly, firefox, firefox-esr."""
    names = (wanted,) if wanted else CANDIDATES
    for name in names:
        found = shutil.which(name) or (
            name if os.path.isfile(name) and os.access(name, os.X_OK) else None
        )
        if found:
            return found
    raise EnvironmentProblem(
        f"no Firefox found (looked for {', '.join(names)} on PATH); install firefox-esr, "
        "or set the campaign's browser.binary"
    )


def find_geckodriver() -> str:
    found = shutil.which("geckodriver") or next(
        (str(p) for p in (Path.home() / ".cargo/bin/geckodriver",) if p.is_file()), None
    )
    if not found:
        raise EnvironmentProblem(
            "geckodriver is not installed (ci/setup.sh installs it with cargo)"
        )
    return found


def version(binary: str) -> str:
    """The version Firefox reports, and its build id where it has one ("148.0a1 build
    20261123093612"): Nightlies share a version for weeks, their build ids differ."""
    out = sh.run([binary, "--version"], timeout=30).stdout.strip()
    m = re.search(r"(\d+[\w.]*)\s*$", out)
    number = m.group(1) if m else out
    return with_build(number, build_id(binary))


def with_build(version: str, build: str) -> str:
    """A version with its build id, the form every record carries ("148.0a1 build
    20261123093612"); the version alone where no build id is known."""
    return f"{version} build {build}" if build else version


def build_id(binary: str) -> str:
    """BuildID from the application.ini beside the real binary. Launchers in /usr/bin are
    links, or scripts (Debian's firefox-esr diverts /usr/bin/firefox to one that execs
    firefox.real or firefox-esr): the installation directory is found through them."""
    launcher = Path(shutil.which(binary) or binary)
    candidates = [launcher.resolve(), Path(f"{launcher}.real").resolve()]
    try:
        with launcher.open("rb") as f:  # the first bytes only: it may be the binary itself
            head = f.read(4096)
    except OSError:
        head = b""
    if head.startswith(b"#!"):  # a launcher script: the programs it execs
        for name in re.findall(rb"exec\s+([\w./-]+)", head):
            found = shutil.which(name.decode())
            if found:
                candidates.append(Path(found).resolve())
    for path in candidates:
        ini = path.parent / "application.ini"
        if ini.is_file():
            m = re.search(r"^BuildID=(\d+)\s*$", ini.read_text(errors="replace"), re.M)
            if m:
                return m.group(1)
    return ""


def make_profile(
    ca_cert: Path | None,
    prefs: dict[str, firefox_prefs.PrefValue],
    parent: Path | None = None,
    template: Path | None = None,
) -> Path:
    """A new profile: Firefox's start-up caches from `template` (profile_template.py:
    nothing a page or a connection writes), an NSS database trusting only the testbed CA
    (besides Firefox's built-in roots) and a user.js with the load's preferences."""
    profile = Path(tempfile.mkdtemp(prefix="clarke-profile-", dir=parent))
    if template is not None:
        profile_template.seed(profile, template)
    if ca_cert is not None:
        db = f"sql:{profile}"
        sh.run(["certutil", "-N", "-d", db, "--empty-password"])
        sh.run(["certutil", "-A", "-d", db, "-n", CA_NICKNAME, "-t", "C,,", "-i", str(ca_cert)])
    (profile / "user.js").write_text(firefox_prefs.user_js(prefs))
    return profile


def profile_for_load(
    binary: str,
    ca_cert: Path | None,
    prefs: dict[str, firefox_prefs.PrefValue],
    parent: Path | None,
    phases: Phases,
) -> tuple[Path, str]:
    """A load's new profile, seeded from the client's template for `binary` where there
    is one (made on the first load: phase profile_template), and what it was made from:
    "template", or "empty: <why>" (LoadResult.profile)."""
    with phases.phase("profile_template"):
        template = profile_template.TEMPLATES.get(binary, find_geckodriver(), parent)
    with phases.phase("profile"):
        profile = make_profile(ca_cert, prefs, parent, template)
    if template is not None:
        return profile, "template"
    return profile, f"empty: {profile_template.TEMPLATES.errors.get(binary, 'no template')}"
