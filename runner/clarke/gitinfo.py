"""Clarke's own revision, recorded with every result."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from clarke import paths


def revision() -> str:
    """The checkout's revision (with -dirty for uncommitted changes), or CLARKE_GIT_REV
    where there is no checkout: images are built with it from the revision they hold."""
    baked = os.environ.get("CLARKE_GIT_REV")
    if baked:
        return baked
    root = paths.source_root()
    if root is None:
        return "unknown"
    try:
        rev = _git(root, "rev-parse", "--short=12", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{rev}-dirty" if dirty else rev


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True
    ).stdout.strip()
