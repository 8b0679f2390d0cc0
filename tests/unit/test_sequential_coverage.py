"""The coverage simulation from recorded loads (clarke bench sequential-coverage): the
stopping rule's interval at the stop holds the recorded cell's median at least at its
nominal 95 % (within three standard errors), also where the rule stops early, and the
command prints its figures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from clarke.cli import cli
from clarke.run.bench.coverage import Population, populations, simulate
from clarke.sequential import StoppingRule

DATA = Path(__file__).resolve().parents[1] / "data"


def test_recorded_cells_and_the_pooled_population() -> None:
    pops = populations([DATA / "recorded-repeats", DATA / "recorded-lan"], min_loads=10)
    # recorded-repeats: two cells of 20 real loads; recorded-lan's 22 cells of 2 are pooled.
    assert [len(p.values) for p in pops] == [20, 20, 84]
    assert "pooled: 24 cells" in pops[-1].name
    assert math.isclose(float(np.median(pops[-1].values)), 1.0)


def test_the_interval_at_the_stop_covers_the_recorded_median() -> None:
    pops = populations([DATA / "recorded-repeats"], min_loads=10)
    noisy = pops[1]  # HTTP/3: about ±10 % of its median, so a 10 % rule often stops early
    point = simulate(noisy, StoppingRule("plt_ms", 0.10, 3, 30), trials=600, seed=1)
    assert point.precise > 0.3 and point.mean_loads < 28  # optional stopping exercised
    assert point.covered >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / point.trials)


def test_a_tight_population_stops_at_the_first_interval_and_still_covers() -> None:
    """Loads within ±1 % of 5 s (a quiet GEO cell): the rule stops at the first load count
    with an interval (7) and that interval holds the median."""
    pop = Population("tight", 5000 * (1 + np.linspace(-0.01, 0.01, 41)))
    point = simulate(pop, StoppingRule("plt_ms", 0.02, 3, 30), trials=400, seed=2)
    assert point.precise == 1.0 and point.mean_loads == 7.0
    assert point.covered >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / point.trials)


def test_the_command_prints_its_figures() -> None:
    args = ["bench", "sequential-coverage", "--recorded", str(DATA / "recorded-repeats")]
    args += ["--half-width", "0.1", "--trials", "50", "--json"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    f = json.loads(out.output)
    assert f["earliest"] == 7 and len(f["points"]) == 3  # two cells and the pooled one
    assert all(0 <= p["covered"] <= 1 for p in f["points"])
    bad = CliRunner().invoke(cli, ["bench", "sequential-coverage", "--max", "5"])
    assert bad.exit_code == 2 and "--max" in bad.output
