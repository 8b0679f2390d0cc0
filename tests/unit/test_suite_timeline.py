"""ci/suite_timeline.py: a phase's timeline summed up per worker, the tail named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite_timeline import Span, read, summary


def test_each_worker_busy_and_idle_at_the_end_and_the_tests_that_ended_last() -> None:
    spans = [
        Span("a.py::one", "gw0", 100.0, 160.0),
        Span("a.py::two", "gw1", 100.0, 400.0),
        Span("b.py::three", "gw0", 160.0, 190.0),
    ]
    out = summary(spans, last=2).splitlines()
    assert out[0] == "3 tests in 5:00; per worker: busy, idle at the end"
    assert out[1] == "     gw0:    2 tests, 1:30 busy, 3:30 idle"
    assert out[2] == "     gw1:    1 tests, 5:00 busy, 0:00 idle"
    assert out[4:] == ["     gw0 +1:00     30 s  b.py::three", "     gw1 +0:00    300 s  a.py::two"]


def test_a_line_that_is_not_the_timeline_s_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = {"test": "a", "worker": "main", "start": 1.0, "end": 2.0}
    path.write_text(json.dumps(good) + "\n" + json.dumps({"test": "b"}) + "\n")
    with pytest.raises(SystemExit, match=r"t.jsonl:2: not a timeline line"):
        read(path)
