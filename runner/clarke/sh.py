"""The one place that runs external commands (ip, tc, certutil, browsers, …).

Commands are argument lists, never shell strings, and are echoed as `$ cmd` when
verbose logging is on, so a person can replay what Clarke did."""

from __future__ import annotations

import logging
import shlex
import subprocess
from collections.abc import Sequence
from typing import Any

from clarke.errors import CommandFailed, EnvironmentProblem

log = logging.getLogger("clarke.sh")


def render(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    input: str | None = None,
    timeout: float | None = 60,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion and capture its output."""
    log.debug("$ %s", render(argv))
    try:
        proc = subprocess.run(
            list(argv), input=input, capture_output=True, text=True, timeout=timeout, env=env
        )
    except FileNotFoundError as e:
        raise EnvironmentProblem(f"{argv[0]} is not installed (needed for: {render(argv)})") from e
    except subprocess.TimeoutExpired as e:
        raise CommandFailed(f"timed out after {timeout} s: {render(argv)}") from e
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise CommandFailed(f"{render(argv)} exited {proc.returncode}: {detail}")
    return proc


def spawn(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start a long-running process; the caller owns it and must stop it by PID."""
    log.debug("$ %s &", render(argv))
    try:
        return subprocess.Popen(list(argv), **kwargs)
    except FileNotFoundError as e:
        raise EnvironmentProblem(f"{argv[0]} is not installed") from e
