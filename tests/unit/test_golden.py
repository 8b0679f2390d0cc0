"""What Clarke derives from campaigns and recorded journals stays as it was written in
tests/data/golden/ (tests/golden.py says how and when): run ids and plans of every
shipped campaign, and per recorded journal the summary, export, InfluxDB points,
console table and report. A change that means to alter one of them writes it anew
(`uv run python tests/golden.py --write`) and says why in its commit."""

from __future__ import annotations

import difflib
import itertools
from functools import cache

import pytest

import golden

WRITTEN = sorted(str(p.relative_to(golden.GOLDEN)) for p in golden.GOLDEN.rglob("*.*"))


@cache
def produced() -> dict[str, str]:
    return golden.outputs()


def test_every_output_was_written() -> None:
    assert sorted(produced()) == WRITTEN


@pytest.mark.parametrize("rel", WRITTEN)
def test_derived_output_is_as_written(rel: str) -> None:
    got, written = produced()[rel], (golden.GOLDEN / rel).read_text()
    if got != written:
        # A line diff, cut short: pytest's own comparison of two long texts runs a
        # character diff that took over ten minutes on a golden InfluxDB file.
        diff = difflib.unified_diff(
            written.splitlines(), got.splitlines(), "written", "produced", lineterm="", n=1
        )
        shown = [line[:300] for line in itertools.islice(diff, 60)]
        pytest.fail(f"{rel} differs:\n" + "\n".join(shown))
