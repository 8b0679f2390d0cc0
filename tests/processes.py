"""The process tree as /proc shows it: what a test started, down to its grandchildren
(a browser's content processes, a node's jobs), to check it ended or to end it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path


def _children() -> dict[int, list[int]]:
    """Each running process's children, by parent PID."""
    kids: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while the list was read
        kids.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return kids


def tree(roots: Iterable[int]) -> set[int]:
    """`roots` and every process descending from them, as of now."""
    kids, seen, todo = _children(), set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo += kids.get(pid, [])
    return seen


def descendants(pid: int) -> set[int]:
    """Every process descending from `pid`, not `pid` itself."""
    return tree([pid]) - {pid}


def ended(proc: subprocess.Popen[bytes] | subprocess.Popen[str], timeout_s: float = 10) -> None:
    """`proc` asked to end (SIGTERM), killed if it has not within `timeout_s`, and reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
