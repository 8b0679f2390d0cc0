"""The suite's own scheduling (ci/test.sh, tests/conftest.py): under `--dist loadgroup`
the tests of one xdist group run on one worker, so a fixture a module builds once (a
testbed, the compose stack, a Slurm cluster) is built once. pytest 9.2 stopped reading
the node id xdist 3.8 writes the group into; every test then became a group of its own
and a CI run built the compose stack on three workers at once, which collided."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

GROUPED = """\
import pytest

pytestmark = [pytest.mark.xdist_group("together")]


@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    pass
"""

SHARED_FIXTURE = """\
import pytest


@pytest.fixture(scope="module")
def built_once():
    return object()


@pytest.mark.parametrize("i", range(6))
def test_shares(built_once, i):
    pass


@pytest.mark.parametrize("i", range(6))
def test_alone(i):
    pass
"""


def _runs(tmp_path: Path) -> dict[str, list[tuple[str, str]]]:
    """Each test function's (worker, xdist group) per test run (pytest -v with 3 workers,
    the suite's conftest.py in force; a node id ends in `@group`)."""
    conftest = Path(__file__).parents[1] / "conftest.py"
    (tmp_path / "conftest.py").write_text(conftest.read_text())
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_shared.py").write_text(SHARED_FIXTURE)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup", "-v",
         "-p", "no:cacheprovider", "-p", "no:randomly", "-o", "addopts=", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        # this session's timeline is not the inner one's
        env={k: v for k, v in os.environ.items() if k != "CLARKE_TEST_TIMELINE"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs: dict[str, list[tuple[str, str]]] = {}
    for worker, test, group in re.findall(
        r"\[(gw\d+)\] \[\s*\d+%\] PASSED \S+::(test_\w+)\[\d+\]@(\S+)", done.stdout
    ):
        runs.setdefault(test, []).append((worker, group))
    return runs


def test_a_group_runs_on_one_worker_and_independent_tests_are_groups_of_their_own(
    tmp_path: Path,
) -> None:
    """Which worker takes an independent test is the scheduler's choice (a loaded run
    once gave all six to one worker), so they are judged by their groups, not by where
    they ran; a group's tests always run on one worker."""
    runs = _runs(tmp_path)
    assert set(runs) == {"test_grouped", "test_shares", "test_alone"}, runs
    assert all(len(r) == 6 for r in runs.values()), runs
    workers = {test: {w for w, _ in r} for test, r in runs.items()}
    groups = {test: {g for _, g in r} for test, r in runs.items()}
    assert len(workers["test_grouped"]) == 1 and groups["test_grouped"] == {"together"}, runs
    # A module fixture: the module's group.
    assert len(workers["test_shares"]) == 1 and groups["test_shares"] == {"test_shared.py"}, runs
    assert len(groups["test_alone"]) == 6, runs  # a group each
