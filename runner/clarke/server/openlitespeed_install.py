"""Where OpenLiteSpeed is installed, and a server root of its own that runs it
(docs/openlitespeed.md)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

from clarke.errors import EnvironmentProblem
from clarke.server.openlitespeed_config import DEFAULT_SERVER_ROOT

INSTALL_ENV: Final = "OLS_SERVER_ROOT"


def find_install(explicit: Path | None = None) -> Path | None:
    """OpenLiteSpeed's install (a server root with bin/openlitespeed or bin/lshttpd, and
    bin/lswsctrl): `explicit`, else $OLS_SERVER_ROOT, else /usr/local/lsws (where
    LiteSpeed's package and ci/openlitespeed-from-source's documented prefix put it).
    None if there is none."""
    root = explicit or Path(os.environ.get(INSTALL_ENV) or DEFAULT_SERVER_ROOT)
    binary = next((b for b in ("openlitespeed", "lshttpd") if (root / "bin" / b).is_file()), None)
    if binary is None or not (root / "bin" / "lswsctrl").is_file():
        return None
    return root


def install_problem(explicit: Path | None = None) -> str:
    """Why find_install() found nothing, and how to get OpenLiteSpeed."""
    root = explicit or Path(os.environ.get(INSTALL_ENV) or DEFAULT_SERVER_ROOT)
    return (
        f"OpenLiteSpeed is not installed at {root} (no bin/openlitespeed and bin/lswsctrl; "
        f"set {INSTALL_ENV} to its server root): build it with "
        "`ci/openlitespeed-from-source SRC_DIR /usr/local/lsws` or install LiteSpeed's "
        "package (docs/openlitespeed.md)"
    )


def make_server_root(install: Path, root: Path) -> Path:
    """A server root of its own at `root` that runs `install`'s binary: bin/ links to
    the install's openlitespeed and lswsctrl, bin/lsws_env puts the pid files under
    root/tmp, conf/mime.properties and VERSION are copied. The configuration, logs and
    pid files are then this root's alone (tests, several servers on one host)."""
    install, root = Path(install), Path(root)
    binary = next(
        (
            install / "bin" / b
            for b in ("openlitespeed", "lshttpd")
            if (install / "bin" / b).is_file()
        ),
        None,
    )
    if binary is None or not (install / "bin" / "lswsctrl").is_file():
        raise EnvironmentProblem(install_problem(install))
    for sub in ("bin", "conf", "logs", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    links = {
        "openlitespeed": binary.resolve(),
        "lshttpd": Path("openlitespeed"),
        "litespeed": Path("lshttpd"),
        "lswsctrl": (install / "bin" / "lswsctrl").resolve(),
    }
    for name, target in links.items():
        link = root / "bin" / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    tmp = root / "tmp"
    (root / "bin" / "lsws_env").write_text(
        f"PIDFILE={tmp}/lshttpd.pid\nGRACEFUL_PIDFILE={tmp}/graceful.pid\n"
    )
    for rel in ("conf/mime.properties", "VERSION"):
        with contextlib.suppress(FileNotFoundError):
            (root / rel).write_bytes((install / rel).read_bytes())
    return root
