"""The paths a campaign file names (`pages.models_file`, a `browser.binary` given as a
path, a recorded site's archive in `sites`) stay inside the campaign file's own
directory, Clarke's shipped data (pages/, profiles/, campaigns/) or the offline corpus
`make corpus` builds in the checkout (build/corpus/): a campaign from someone else must
not make Clarke (root) read, or run, a file of its choosing elsewhere. A path is judged
after every link in it is resolved, and refused before the file it names is opened, so
an error never quotes a foreign file. What is given on the command line (`--firefox`,
`--profile FILE`, the campaign file itself) is the user's own choice and is not limited."""

from __future__ import annotations

import contextlib
from pathlib import Path

from clarke import paths
from clarke.campaign.model import Campaign
from clarke.errors import ValidationFailed

SHIPPED = ("pages", "profiles", "campaigns")


def allowed_roots(source: Path) -> list[Path]:
    """The campaign file's directory, the shipped data directories and the corpus's,
    links resolved."""
    roots = [source.resolve().parent]
    for name in SHIPPED:
        with contextlib.suppress(FileNotFoundError):
            roots.append(paths.data_dir(name).resolve())
    corpus = paths.corpus_dir()
    if corpus is not None:
        roots.append(corpus.resolve())
    return roots


def contained(source: Path, given: str, field: str) -> Path:
    """`given` (relative to the campaign file) resolved, if it stays inside the allowed
    roots; ValidationFailed naming the field otherwise."""
    resolved = (source.resolve().parent / given).resolve()
    roots = allowed_roots(source)
    if not any(resolved.is_relative_to(root) for root in roots):
        raise ValidationFailed(
            str(source),
            [
                f"{field}: {given!r} leads outside the campaign file's directory "
                f"({roots[0]}), Clarke's shipped {', '.join(SHIPPED)} and the corpus `make corpus` "
                f"builds; a campaign may only "
                "name files there (copy the file beside the campaign)"
                + (
                    ", or give the browser on the command line (clarke testbed up "
                    "--firefox PATH, then clarke run --testbed ID)"
                    if field == "browser.binary"
                    else ""
                )
            ],
        )
    return resolved


def with_paths_checked(c: Campaign, source: Path) -> Campaign:
    """The campaign with its path-like fields checked, and a browser binary given as a
    path resolved (relative to the campaign file, not the working directory). A binary
    given as a name is looked up on PATH, as the candidates are."""
    if c.pages.models_file is not None:
        contained(source, c.pages.models_file, "pages.models_file")
    binary = c.browser.binary
    if binary is not None and "/" in binary:
        resolved = contained(source, binary, "browser.binary")
        return c.model_copy(
            update={"browser": c.browser.model_copy(update={"binary": str(resolved)})}
        )
    return c
