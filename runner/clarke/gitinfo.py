"""Clarke's own revision, recorded with every result."""

from __future__ import annotations

import os
import subprocess

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
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{rev}-dirty" if dirty else rev
