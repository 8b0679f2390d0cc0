"""The comparison's statistics on their own (tests on recorded campaigns are in
tests/integration/test_compare_recorded.py)."""

from __future__ import annotations

import pytest

from clarke.errors import InputError
from clarke.run.compare.cells import Verdict, compare_records, holm, markdown
from helpers import moved, record


def test_holm_adjustment() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]


def _campaign(factor: float, n: int = 12) -> list:
    out = []
    for i in range(n):
        r = record(i)
        out.append(r.model_copy(update={"metrics": {k: v * factor for k, v in r.metrics.items()}}))
    return out


def test_identical_runs_are_same_and_shift_is_slower() -> None:
    base = _campaign(1.0)
    assert compare_records(base, base).regressed is False
    c = compare_records(base, _campaign(1.5))
    assert c.regressed and all(m.verdict is Verdict.slower for m in c.metrics)
    assert c.metrics[0].ratio == pytest.approx(1.5)
    assert c.metrics[0].ratio_ci[0] > 1.0
    assert compare_records(base, _campaign(0.5)).cells() == {c.metrics[0].cell: Verdict.faster}


def test_small_shift_below_threshold_is_same() -> None:
    c = compare_records(_campaign(1.0), _campaign(1.05))
    assert not c.regressed


def test_unusable_input() -> None:
    base = _campaign(1.0)
    other = [r.model_copy(update={"campaign": "other"}) for r in base]
    with pytest.raises(InputError, match="different campaigns: other, t"):
        compare_records(base, other)
    elsewhere = [moved(r, size="1m") for r in base]
    with pytest.raises(InputError, match="in the baseline only"):
        compare_records(base, elsewhere)
    with pytest.raises(InputError, match="successful loads"):
        compare_records(base, base[:1])


def test_other_browser_builds_and_implementation_versions_are_said() -> None:
    base = [
        r.model_copy(
            update={
                "browser_version": "148.0a1 build 20261101093000",
                "versions": {"clarke_client": "abc", "openlitespeed": "1.8.5"},
            }
        )
        for r in _campaign(1.0)
    ]
    assert compare_records(base, base).software_changes == ()
    newer = [
        r.model_copy(
            update={
                "browser_version": "148.0a1 build 20261124093000",
                "versions": {"clarke_client": "def", "openlitespeed": "1.8.5"},
            }
        )
        for r in base
    ]
    c = compare_records(base, newer)
    (change,) = c.software_changes  # Clarke's own revision is not a software change
    assert "20261101093000" in change and "current 148.0a1 build 20261124093000" in change
    assert c.to_json()["software_changes"] == [change]
    assert "Measured with other software than the baseline" in markdown(c)
