"""The load breakdown's arithmetic: what is the agent's, what no phase covers, and the
spread over loads."""

from __future__ import annotations

import time

import pytest

from clarke.results.details import PhasesMs
from clarke.run.bench.load import breakdown, spread
from clarke.timing import Phases


def test_a_load_splits_into_the_client_the_agent_and_the_runner() -> None:
    phases = {
        "client": {
            "profile": 40.0,
            "browser_start": 900.0,
            "navigation": 700.0,
            "browser_exit": 300.0,
        },
        "runner": {"link_before": 10.0, "reset_stats": 5.0, "client": 2100.0, "server_stats": 8.0},
    }
    got = breakdown(PhasesMs.model_validate(phases), plt=500.0, wall=2200.0)
    assert got["client.agent"] == pytest.approx(2100 - 1940)
    assert got["client.navigation-plt"] == pytest.approx(200)
    assert got["runner.other"] == pytest.approx(2200 - 2123)
    assert "runner.client" not in got and got["runner.server_stats"] == 8


def test_a_browser_started_ahead_is_not_inside_the_agents_round_trip() -> None:
    phases = {
        "client": {
            "browser_start_wait": 300.0,
            "navigation": 700.0,
            "ahead_browser_start": 900.0,
            "next_context_open": 400.0,  # a kept browser's context, made ready before
        },
        "runner": {"client": 1100.0},
    }
    got = breakdown(PhasesMs.model_validate(phases), plt=500.0, wall=1100.0)
    assert got["client.agent"] == pytest.approx(1100 - 1000)
    assert got["client.ahead_browser_start"] == 900
    assert got["client.next_context_open"] == 400


def test_spread_is_the_median_and_the_outer_deciles() -> None:
    assert spread([5.0, 1.0, 3.0]) == {"median_ms": 3.0, "p10_ms": 1.0, "p90_ms": 5.0}
    s = spread([float(v) for v in range(1, 101)])
    assert s["median_ms"] == 50.5 and 10 <= s["p10_ms"] <= 11 and 90 <= s["p90_ms"] <= 91


def test_phases_add_up_when_a_phase_runs_twice() -> None:
    p = Phases()
    for _ in range(2):
        with p.phase("x"):
            time.sleep(0.01)
    assert p.ms["x"] >= 20  # two sleeps of at least 10 ms each
