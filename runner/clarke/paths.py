"""Where Clarke's shipped data lives: the source tree when run from a checkout, or the
copy packed into the wheel under clarke/_data."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_SOURCE_ROOT = _PACKAGE.parent.parent  # runner/clarke -> repository root


def data_dir(name: str) -> Path:
    """`pages`, `campaigns`, `profiles` or `peps`."""
    for candidate in (_SOURCE_ROOT / name, _PACKAGE / "_data" / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"Clarke's {name}/ directory is missing from this installation")


def source_root() -> Path | None:
    """The repository checkout Clarke runs from, if any (for git revisions, Rust parts)."""
    return _SOURCE_ROOT if (_SOURCE_ROOT / "pyproject.toml").is_file() else None


def rust_binary(name: str, env: str) -> Path | None:
    """A Rust part of satlink/'s workspace (satlink, splittcp): $`env`, else the
    checkout's release build, else `name` on PATH."""
    given = os.environ.get(env)
    if given:
        return Path(given)
    root = source_root()
    if root is not None:
        built = root / "satlink" / "target" / "release" / name
        if built.is_file():
            return built
    found = shutil.which(name)
    return Path(found) if found else None


def corpus_dir() -> Path | None:
    """Where `make corpus` writes the offline corpus of recorded sites by default, in the
    checkout Clarke runs from (docs/sites.md); None outside a checkout."""
    root = source_root()
    return root / "build" / "corpus" if root is not None else None
