"""GitHub's `hashFiles()` over the committed tree the local run checks out: the SHA-256
of the concatenated SHA-256 digests of every matching file, in path order, or an empty
string when nothing matches: GitHub's construction, with the files taken in sorted
path order."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from .expr import ExprError


def _pattern(glob: str) -> re.Pattern[str]:
    if glob.startswith("!"):
        raise ExprError(f"hashFiles(): exclusion patterns are not supported: {glob!r}")
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out))


def hash_files(repo: Path, commit: str, *globs: str) -> str:
    """hashFiles(globs...) of `commit`'s tree in `repo` (paths relative to its root)."""
    patterns = [_pattern(g.strip()) for g in globs]
    listing = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "-z", "--name-only", commit],
        capture_output=True,
        check=True,
    ).stdout.decode()
    names = sorted(n for n in listing.split("\0") if n and any(p.fullmatch(n) for p in patterns))
    if not names:
        return ""
    outer = hashlib.sha256()
    for name in names:
        blob = subprocess.run(
            ["git", "-C", str(repo), "cat-file", "blob", f"{commit}:{name}"],
            capture_output=True,
            check=True,
        ).stdout
        outer.update(hashlib.sha256(blob).digest())
    return outer.hexdigest()
