"""A site archive put where the server role reads it: `<pages>/sites/<name>/`, the
directory the runner shares with the server on both substrates (server/site.py). The
name carries the archive's content digest, so a changed archive is a new name and a
server never serves an old copy under a name it already has."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from clarke.sites import archive

SITES = "sites"
DIGEST_CHARS = 12


def staged_name(site: archive.Site) -> str:
    return f"{site.name}-{site.digest[:DIGEST_CHARS]}"


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link where both are on one file system (bodies are never written in
    place: a new archive is a new directory), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def stage(source: Path, pages_dir: Path) -> str:
    """Check the archive in `source` (ValidationFailed naming the entry) and put it
    under `pages_dir`/sites/ unless it is there already; its name there."""
    site = archive.read(source)
    name = staged_name(site)
    target = pages_dir / SITES / name
    if (target / archive.SITE_JSON).is_file():
        return name
    scratch = target.with_name(f".{name}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, scratch, copy_function=_link_or_copy)
    scratch.rename(target)
    return name
