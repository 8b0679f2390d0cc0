"""The journal: one JSON line per page-load attempt, appended, flushed and fsync'd before
the next load starts, so a killed campaign loses nothing it had measured.

Each record is written with a single write() on a file opened O_APPEND. A process killed
inside that write can leave at most one torn final line; readers skip it (and say so) and
`Journal.open_for_append` cuts it off before appending, so the file only ever grows by
complete records."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from clarke.errors import InputError
from clarke.results.record import RunRecord

log = logging.getLogger(__name__)
JOURNAL = "journal.jsonl"


def _repair_tail(path: Path) -> int:
    """Truncate a torn last line; return the number of bytes removed."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with path.open("rb+") as f:
        f.seek(max(0, size - 1))
        if f.read(1) == b"\n":
            return 0
        # Scan back to the last newline.
        pos = size
        chunk = 65536
        keep = 0
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            data = f.read(pos - start)
            idx = data.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            pos = start
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
        return size - keep


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @classmethod
    def in_dir(cls, results_dir: Path) -> Journal:
        return cls(results_dir / JOURNAL)

    def open_for_append(self) -> Journal:
        removed = _repair_tail(self.path)
        if removed:
            log.warning("%s: removed a torn last record (%d bytes)", self.path, removed)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self

    def append(self, record: RunRecord) -> None:
        if self._fd is None:
            self.open_for_append()
        assert self._fd is not None
        line = (record.model_dump_json() + "\n").encode()
        written = os.write(self._fd, line)
        if written != len(line):  # only on a full disk: never leave half a record
            os.ftruncate(self._fd, os.lseek(self._fd, 0, os.SEEK_END) - written)
            raise OSError(f"{self.path}: short write ({written} of {len(line)} bytes)")
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Journal:
        return self.open_for_append()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def records(self) -> Iterator[RunRecord]:
        """Every complete record; a torn final line is skipped, anything else is an error."""
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            lines = f.read().split(b"\n")
        last = len(lines) - 1
        for n, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                yield RunRecord.model_validate(json.loads(raw))
            except (json.JSONDecodeError, ValidationError) as e:
                if n - 1 == last:  # no newline after it: a write cut short
                    log.warning("%s: skipping a torn last record", self.path)
                    return
                raise InputError(f"{self.path}: line {n} is not a valid record: {e}") from None
