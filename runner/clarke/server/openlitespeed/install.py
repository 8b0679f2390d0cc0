"""Where OpenLiteSpeed is installed, and a server root of its own that runs it
(docs/openlitespeed.md)."""

from __future__ import annotations

import contextlib
import grp
import os
from pathlib import Path
from typing import Final

from clarke.errors import EnvironmentProblem
from clarke.server.openlitespeed.config import DEFAULT_SERVER_ROOT, OlsSite

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


def let_workers_in(site: OlsSite, root: Path) -> None:
    """OpenLiteSpeed's workers run as `site.user`:`site.group` (nobody:nogroup) and read
    the pages of a netns testbed, which sit in the testbed's directory that only root
    enters (0700: the agents' token, keys, control sockets). Their group may pass
    through that directory and the server root's (0710) and read the pages (0750);
    no other user can, and nothing else in them changes mode."""
    gid = grp.getgrnam(site.group).gr_gid
    site.pages_dir.mkdir(parents=True, exist_ok=True)
    testbed_dir = site.pages_dir.parent
    closed = [d for d in testbed_dir.parents if not d.stat().st_mode & 0o001]
    if closed:
        raise EnvironmentProblem(
            f"OpenLiteSpeed's workers ({site.user}) cannot reach the pages in "
            f"{site.pages_dir}: {closed[0]} is closed to other users (mode "
            f"{closed[0].stat().st_mode & 0o777:04o}); keep the testbeds' state directory "
            "(CLARKE_STATE_DIR) where any user may pass"
        )
    passages = [testbed_dir] + [d for d in root.parents if d.is_relative_to(testbed_dir)]
    for d in dict.fromkeys(passages):
        mode = d.stat().st_mode
        if not mode & 0o001:  # others may not pass: let the workers' group pass
            os.chown(d, -1, gid)
            d.chmod((mode & 0o7777) | 0o010)
    os.chown(site.pages_dir, -1, gid)
    site.pages_dir.chmod(0o750)


def check_master_can_reopen(paths: list[Path]) -> None:
    """OpenLiteSpeed's master runs as root and reopens its logs at every start and
    graceful restart, after handing them to its workers' user. Without the right to
    write another user's files (CAP_DAC_OVERRIDE, dropped in a hardened container) the
    reopening fails quietly: the access log is then written in Apache's default format,
    which the role cannot read, and every load would fail verification. This process
    runs as root with the master's capabilities, so it tries what the master will do."""
    for path in paths:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
        except FileNotFoundError:
            continue  # the master creates it
        except OSError as e:
            raise EnvironmentProblem(
                f"OpenLiteSpeed's master (root) could not reopen {path} ({e.strerror}): "
                "it writes its logs as root and they belong to its workers' user; give "
                "the server the capability to write other users' files (CAP_DAC_OVERRIDE; "
                "the server service of docker-compose.yml has it)"
            ) from None
