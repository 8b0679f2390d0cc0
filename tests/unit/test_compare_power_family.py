"""`clarke bench compare-power --family recorded`: every recorded cell is a member of the
family with its own loads. Its Holm correction must be compare's, a night without a
slowdown must rarely fail, a doubling must always be caught, and the fixed slowdowns of
--at must be reported as they are."""

from __future__ import annotations

import numpy as np
import pytest

from clarke.errors import InputError
from clarke.run.bench.power import Trials
from clarke.run.bench.power_family import family_figures, holm_rows, simulate_family
from clarke.run.compare.cells import holm


def _cells(count: int, loads: int, cv: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        f"cell{k}": (1000.0 + 100 * k) * rng.lognormal(0.0, cv, size=loads) for k in range(count)
    }


def test_holm_rows_is_compares_holm_on_every_row() -> None:
    rng = np.random.default_rng(1)
    p = rng.uniform(0, 0.2, size=(50, 12))
    p[0, :3] = 0.01  # ties
    expected = np.array([holm(list(row)) for row in p])
    assert np.allclose(holm_rows(p), expected)


def test_null_nights_rarely_fail_and_a_doubling_is_always_caught() -> None:
    points, false_alarm = simulate_family(
        _cells(12, 20, 0.05), [10], [1.0, 2.0], Trials(count=100, threshold=0.0)
    )
    by_s = {p.slowdown: p for p in points}
    assert false_alarm[10] <= 0.10
    assert by_s[1.0].alone <= 0.05
    assert by_s[2.0].detected == 1.0 and by_s[2.0].worst_cell == 1.0
    assert by_s[2.0].cells == 12


def test_the_threshold_hides_a_slowdown_below_it() -> None:
    points, _ = simulate_family(_cells(3, 20, 0.01), [10], [1.05], Trials(count=50, threshold=0.10))
    assert points[0].alone == 0.0 and points[0].detected == 0.0


def test_fixed_slowdowns_are_reported_and_the_curve_reaches_power() -> None:
    f = family_figures(
        _cells(4, 16, 0.03), [8], [1.0, 1.5], [1.05, 1.1], Trials(count=60, threshold=0.0), 0.8
    )
    assert set(f["detection_at"][8]) == {1.05, 1.1}
    at = f["detection_at"][8]
    assert at[1.05]["detected"] <= at[1.1]["detected"]
    assert f["min_detectable"][8]["worst_cell"] is not None
    assert f["family"] == 4


def test_too_few_loads_in_a_cell_is_an_input_error() -> None:
    with pytest.raises(InputError, match="n=10 needs 20 loads"):
        simulate_family(_cells(2, 15, 0.05), [10], [1.0], Trials(count=5))


def test_cli_rejects_cells_with_the_recorded_family(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli("bench", "compare-power", "--family", "recorded", "--cells", "12")
    assert code == 2 and "--cells" in err
