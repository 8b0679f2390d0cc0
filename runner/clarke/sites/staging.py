"""A site archive put where the server role reads it: `<pages>/sites/<name>/`, the
directory the runner shares with the server on both substrates (server/site.py). The
name carries the archive's content digest, so a changed archive is a new name and a
server never serves an old copy under a name it already has.

Only `site.json` and the bodies it names are copied, each read as untrusted input
(archive_files.py: never through a link, regular files only, of their declared sizes)
and hashed as it is copied: whatever else the directory holds (links to elsewhere,
notes, other files) stays behind."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from clarke.errors import ValidationFailed
from clarke.sites import archive, archive_files
from clarke.sites.archive_files import ArchiveFileError

SITES = "sites"
DIGEST_CHARS = 12


def staged_name(site: archive.Site) -> str:
    return f"{site.name}-{site.digest[:DIGEST_CHARS]}"


def _copy(site: archive.Site, raw_index: bytes, scratch: Path) -> None:
    (scratch / archive.BODIES).mkdir(mode=0o755)
    (scratch / archive.SITE_JSON).write_bytes(raw_index)
    bodies_fd = os.open(scratch / archive.BODIES, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with archive_files.opened(site.path, site.limits) as d:
            copied: set[str] = set()
            for e in site.archive.exchanges:
                if e.body is None or e.body in copied:
                    continue
                try:
                    found = d.copy_body(e.body, e.size, bodies_fd)
                except ArchiveFileError as err:
                    raise ValidationFailed(str(site.path), [str(err)]) from None
                if found != e.body:
                    raise ValidationFailed(
                        str(site.path), [f"{archive.BODIES}/{e.body} changed while it was staged"]
                    )
                copied.add(e.body)
    finally:
        os.close(bodies_fd)


def stage(source: Path, pages_dir: Path) -> str:
    """Check the archive in `source` (ValidationFailed naming the entry) and put it
    under `pages_dir`/sites/ unless it is there already; its name there."""
    site = archive.read(source)
    name = staged_name(site)
    target = pages_dir / SITES / name
    if (target / archive.SITE_JSON).is_file():
        return name
    try:
        with archive_files.opened(source, site.limits) as d:
            raw_index = d.read_index()
    except ArchiveFileError as err:
        raise ValidationFailed(str(source), [str(err)]) from None
    if archive.sha256_of(raw_index) != site.digest:
        raise ValidationFailed(str(source), [f"{archive.SITE_JSON} changed while it was staged"])
    scratch = target.with_name(f".{name}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.parent.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(mode=0o755)
    try:
        _copy(site, raw_index, scratch)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    scratch.rename(target)
    return name
