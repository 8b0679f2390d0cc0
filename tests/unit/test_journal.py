"""The journal keeps only complete records, even when its writer is killed mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clarke.errors import InputError
from clarke.results.journal import Journal
from helpers import record

WRITER = """
import sys
import pytest

from clarke.errors import InputError
from clarke.results.journal import Journal
sys.path.insert(0, "tests")
from helpers import record
j = Journal.__new__(Journal); j.__init__(__import__("pathlib").Path(sys.argv[1]))
j.open_for_append()
i = 0
while True:
    r = record(i)
    r.details.failure = "x" * 20000  # large lines make a cut mid-write likely
    j.append(r)
    i += 1
"""


def test_round_trip(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.jsonl") as j:
        for i in range(5):
            j.append(record(i))
    got = list(Journal(tmp_path / "j.jsonl").records())
    assert [r.run_id for r in got] == [record(i).run_id for i in range(5)]
    assert got[3] == record(3)


def test_torn_tail_is_skipped_then_cut_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path) as j:
        j.append(record(0))
        j.append(record(1))
    whole = path.read_bytes()
    path.write_bytes(whole + record(2).model_dump_json().encode()[:57])
    assert [r.run_index for r in Journal(path).records()] == [0, 1]
    with Journal(path) as j:
        j.append(record(3))
    assert [r.run_index for r in Journal(path).records()] == [0, 1, 3]
    assert path.read_bytes().startswith(whole) and path.read_bytes().endswith(b"\n")


def test_killed_writer_leaves_only_complete_records(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(["tests", *sys.path])}
    for attempt in range(5):
        path = tmp_path / f"j{attempt}.jsonl"
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], env=env)
        try:
            deadline = time.monotonic() + 20
            while (
                not path.exists() or path.stat().st_size < 200_000 * (attempt + 1)
            ) and time.monotonic() < deadline:
                assert proc.poll() is None, "writer died on its own"
                time.sleep(0.01)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        records = list(Journal(path).records())
        assert records, "the writer wrote nothing"
        assert [r.run_index for r in records] == list(range(len(records)))
        assert all(r.details.failure == "x" * 20000 for r in records)
        # after repair the file holds exactly those records, each on its own line
        with Journal(path):
            pass
        assert path.read_bytes().count(b"\n") == len(records)


def test_a_record_of_another_schema_version_is_refused_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path) as j:
        j.append(record(0))
    newer = record(1).model_dump_json().replace('"schema_version":1', '"schema_version":2')
    with path.open("a") as f:
        f.write(newer + "\n")
    with pytest.raises(
        InputError, match=r"(?s)line 2 .*schema_version 2: this Clarke reads records of version 1"
    ):
        list(Journal(path).records())
