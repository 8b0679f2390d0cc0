"""`clarke bench compare-power --slowed`: a recorded slowed cell against its base cell,
beside the multiplicative model at the measured slowdown. A slowed cell that is no slower
must rarely be caught, a clear slowdown always, the model must agree with a slowdown that
is a pure scale, and cells or pairs that cannot be simulated are input errors."""

from __future__ import annotations

import numpy as np
import pytest

from clarke.campaign.dimensions import Cell
from clarke.errors import InputError
from clarke.run.bench.power import Trials
from clarke.run.bench.power_real import real_figures, real_slowdowns, render_real


def _loads(rng: np.random.Generator, median: float, cv: float, count: int) -> np.ndarray:
    return median * rng.lognormal(0.0, cv, size=count)


def _recording(slowdown: float, count: int = 40) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {
        "base": _loads(rng, 2800.0, 0.03, count),
        "slowed": _loads(rng, 2800.0 * slowdown, 0.03, count),
        "other": _loads(rng, 4900.0, 0.01, count),
    }


def test_a_slowed_cell_that_is_no_slower_is_rarely_caught() -> None:
    points = real_slowdowns(
        _recording(1.0), {"slowed": "base"}, [10], [1, 12], Trials(count=200, threshold=0.0)
    )
    assert all(p.real <= 0.10 and p.model <= 0.10 for p in points)
    assert abs(points[0].measured - 1) < 0.03


def test_a_scaled_slowdown_is_caught_by_real_and_model_alike() -> None:
    points = real_slowdowns(
        _recording(1.08), {"slowed": "base"}, [10, 20], [1, 12], Trials(count=200, threshold=0.03)
    )
    by = {(p.n, p.cells): p for p in points}
    assert by[(20, 1)].real == 1.0 and by[(20, 1)].model == 1.0
    for p in points:
        assert abs(p.real - p.model) <= 0.15, p  # the model is fair for a pure scale
        assert 1.05 < p.measured < 1.11
    assert by[(10, 12)].real <= by[(10, 1)].real  # Holm over 12 cells costs power


def test_the_figures_render_every_point() -> None:
    cells = _recording(1.05)
    f = {
        "cells": {k: {"cv": float(v.std(ddof=1) / v.mean())} for k, v in cells.items()},
        **real_figures(cells, {"slowed": "base"}, [5], [1, 12], Trials(count=20)),
    }
    text = "\n".join(render_real(f))
    assert "slowed (" in text and "<- base (" in text and "measured +" in text
    rows = [line.split() for line in text.splitlines()]
    assert [r[1:3] for r in rows if r[:1] == ["slowed"] and r[1].isdigit()] == [
        ["5", "1"],
        ["5", "12"],
    ]


@pytest.mark.parametrize(
    ("pairs", "ns", "message"),
    [
        ({"nope": "base"}, [5], "no successful loads of cell 'nope'"),
        ({"slowed": "base", "base": "other", "other": "slowed"}, [5], "every recorded cell"),
        ({"slowed": "base"}, [21], "n=21 needs 42 loads"),
    ],
)
def test_what_cannot_be_simulated_is_an_input_error(
    pairs: dict[str, str], ns: list[int], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        real_slowdowns(_recording(1.05), pairs, ns, [1], Trials(count=5))


def _path(http: str) -> str:
    """A recorded cell's path: its values, every other dimension at its default."""
    values = {"profile": "lan", "http": http, "cc": "bbr", "model": "uniform", "size": "100k"}
    return Cell.parse(values | {"connections": 6}).path


H2, H3 = _path("2"), _path("3")


def test_cli_prints_real_and_model_for_recorded_cells(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli(
        "bench", "compare-power", "--slowed", f"{H2}={H3}", "-n", "8", "--trials", "40"
    )
    assert code == 0, out
    assert f"{H2} (20.6%) <- {H3} (15.6%): measured +8.4%" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(H2 + " ")]
    assert [r[1:3] for r in rows if r[1].isdigit()] == [["8", "1"], ["8", "12"]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--slowed", H2], "expected SLOWED=BASE"),
        (["--slowed", f"{H2}={H2}"], "two different cells"),
        (["--slowed", f"{H2}=lan/9"], "no successful loads of cell 'lan/9'"),
        (["--slowed", f"{H2}={H3}", "--family", "recorded"], "--family drawn"),
    ],
)
def test_cli_refuses_what_it_cannot_pair(run_cli, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli("bench", "compare-power", *args, "--trials", "5")
    assert code == 2 and message in err, err


def test_cli_cell_keeps_one_recorded_cell(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli(
        "bench", "compare-power", "--cell", H3, "-n", "8", "--cells", "1", "--trials", "20"
    )
    assert code == 0, out
    assert f"{H3}: 20 loads" in out and H2 not in out
    code, _, err = run_cli("bench", "compare-power", "--cell", "lan/9", "--trials", "5")
    assert code == 2 and "--cell lan/9: no successful loads of that cell" in err, err
