"""`clarke link schedule starlink`: on the shipped parameters (a fixed seed) the slots
hold the fitted distributions (moments and quantiles within tolerance), every event sits
exactly on the 15 s grid from second 12 of the minute, the file is what the parameters
make, and bad parameters exit 2 naming the field."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest
import yaml

from clarke import paths, profiles
from clarke.schedules import files, starlink
from clarke.schedules import starlink_fit as fit

SCHEDULES = paths.data_dir("profiles") / "schedules"
PARAMS = SCHEDULES / "leo-starlink-measured.params.yaml"


@pytest.fixture(scope="module")
def made() -> tuple[starlink.Params, list[starlink.Slot], starlink.Fitted]:
    params = starlink.read_params(PARAMS)
    geo_slots, _ = starlink.geometry(params, SCHEDULES)
    f = starlink.fitted(params, geo_slots)
    return params, starlink.draw_slots(params, geo_slots, f), f


def test_fits_of_the_published_figures() -> None:
    # Two successive RTTs of a slot differ by a sum of two Laplace(m): mean size 1.5 m.
    m = fit.jitter_mean_ms(6.7)
    assert m == pytest.approx(6.7 / 1.5)
    rng = np.random.default_rng(3)
    rtt = rng.exponential(m, (2, 200_000, 2)).sum(axis=2)
    assert np.abs(rtt[0] - rtt[1]).mean() == pytest.approx(6.7, abs=0.05)
    # Background loss: events (1 % of the time, 50 % each way) plus it make the total.
    p = fit.background_loss(0.015, 0.01, 0.5)
    assert 0.01 * 0.75 + 0.99 * fit.echo_loss(p, p) == pytest.approx(0.015)
    with pytest.raises(ValueError):
        fit.background_loss(0.005, 0.01, 0.5)
    sigma = fit.rate_sigma(97.23, 300)
    assert fit.lognormal_quantile(0.99, 97.23, sigma) == pytest.approx(300)
    assert fit.lognormal_quantile(0.5, 97.23, sigma) == pytest.approx(97.23)


def test_the_slots_hold_the_fitted_distributions(made) -> None:  # type: ignore[no-untyped-def]
    params, slots, f = made
    n = len(slots)
    assert n == 40
    # The excesses are the fitted distribution's quantiles at (k + 0.5) / n ...
    want = [
        fit.truncnorm_quantile((k + 0.5) / n, f.excess_mu_ms, f.excess_sigma_ms) for k in range(n)
    ]
    assert sorted(s.excess_ms for s in slots) == pytest.approx(want, abs=1e-4)
    # ... so their moments are the distribution's, within the discreteness of 40 points.
    mean, sd = fit.truncnorm_moments(f.excess_mu_ms, f.excess_sigma_ms)
    assert statistics.fmean(s.excess_ms for s in slots) == pytest.approx(mean, abs=0.3)
    assert statistics.pstdev(s.excess_ms for s in slots) == pytest.approx(sd, abs=1.0)
    # Each minute has one slot from each quarter of it.
    quarter = sorted(s.excess_ms for s in slots)[n // 4 - 1 :: n // 4][:3]
    for minute in range(n // 4):
        four = [s.excess_ms for s in slots[4 * minute : 4 * minute + 4]]
        assert [sum(x <= q for x in four) for q in quarter] == [1, 2, 3]
    # The RTT the model gives (floors plus per-packet jitter) has the published quartiles.
    rng = np.random.default_rng(5)
    floors = np.array([f.ground_ms + s.geometry_rtt_ms + s.excess_ms for s in slots])
    rtt = np.repeat(floors, 5000) + rng.exponential(f.jitter_mean_ms, (n * 5000, 2)).sum(axis=1)
    assert np.percentile(rtt, [25, 50, 75]) == pytest.approx(params.rtt.quartiles_ms, abs=1.5)
    assert floors.min() >= params.rtt.min_ms
    assert floors.min() == pytest.approx(params.rtt.min_ms, abs=2.5)
    # Rates: the published median, within the published range.
    fwd = [s.forward_mbps for s in slots]
    assert statistics.median(fwd) == pytest.approx(params.rates.forward_median_mbps, rel=0.03)
    lo, hi = params.rates.forward_range_mbps
    assert lo <= min(fwd) and max(fwd) <= hi
    ret = [s.return_mbps for s in slots]
    assert statistics.median(ret) == pytest.approx(params.rates.return_median_mbps, rel=0.03)
    assert all(30 <= s.spike_ms <= 50 for s in slots)


def test_events_sit_exactly_on_the_slot_grid(made) -> None:  # type: ignore[no-untyped-def]
    params, slots, f = made
    sched = starlink.schedule(params, slots, f, "t")
    assert (sched.clock.value, sched.slot_s, sched.slot_offset_s, sched.length_s) == (
        "utc",
        15,
        12,
        600,
    )
    times = [s.at_s for s in sched.steps]
    want = [0.0]
    for k in range(40):
        b = 12 + 15 * k
        want += [round(b - 0.075, 6), b, round(b + 0.14, 6)]
    assert times == want
    # Boundaries at seconds 12, 27, 42, 57 of every minute of the loop (link time is UTC).
    assert {t % 60 for t in times[2::3]} == {12, 27, 42, 57}
    fwd = {s.at_s: s.forward for s in sched.steps}
    for k, slot in enumerate(slots):
        b = slot.at_s
        start, at, end = fwd[round(b - 0.075, 6)], fwd[b], fwd[round(b + 0.14, 6)]
        before = slots[k - 1]
        assert start is not None and at is not None and end is not None
        # The spike starts on the old slot's delay, the new slot's delay and rate take
        # over at the boundary, the spike and its loss end 140 ms after it.
        assert start.framing_delay_ms == pytest.approx(
            (f.ground_ms + before.excess_ms + slot.spike_ms) / 2, abs=1e-4
        )
        assert at.framing_delay_ms == pytest.approx(
            (f.ground_ms + slot.excess_ms + slot.spike_ms) / 2, abs=1e-4
        )
        assert end.framing_delay_ms == pytest.approx((f.ground_ms + slot.excess_ms) / 2, abs=1e-4)
        assert at.rate_mbps == slot.forward_mbps and at.uplink_delay_ms == slot.gateway_ms
        assert start.loss is not None and start.loss.model_dump() == {"packet_rate": 0.5}
        assert end.loss is not None and end.loss.model_dump() == {"packet_rate": f.background_loss}
    # Time-averaged echo loss over the loop: the published 1.5 %.
    spans = list(zip(times, [*times[1:], 600], strict=True))
    lossy = {
        s.at_s: s.forward.loss
        for s in sched.steps
        if s.forward and "loss" in s.forward.model_fields_set
    }
    loss, current = 0.0, 0.0
    for a, b in spans:
        if a in lossy:
            current = lossy[a].packet_rate if lossy[a] is not None else 0.0  # type: ignore[union-attr]
        loss += (b - a) * fit.echo_loss(current, current)
    assert loss / 600 == pytest.approx(0.015, abs=1e-5)


def test_the_shipped_file_is_what_its_parameters_make(run_cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    root = paths.data_dir("profiles").parent
    monkeypatch.chdir(root)
    out = tmp_path / "s.yaml"
    args = [
        "link",
        "schedule",
        "starlink",
        "--params",
        "profiles/schedules/leo-starlink-measured.params.yaml",
    ]
    code, stdout, err = run_cli(*args, "--id", "leo-starlink-measured-s30", "--out", str(out))
    assert code == 0, err
    shipped = SCHEDULES / "leo-starlink-measured.yaml"
    assert out.read_text() == shipped.read_text()
    other = tmp_path / "o.yaml"
    code, _, err = run_cli(*args, "--seed", "31", "--out", str(other))
    assert code == 0, err
    assert files.read(other).steps != files.read(shipped).steps
    # The profile's jitter is the fitted one, and its blocks are the loop's first state.
    p = profiles.read("leo-starlink-measured")
    params = starlink.read_params(PARAMS)
    for d in (p.forward, p.return_):
        assert d.jitter is not None and d.jitter.exponential is not None
        assert d.jitter.exponential.mean_ms == pytest.approx(
            fit.jitter_mean_ms(params.jitter.successive_diff_ms), abs=1e-4
        )
    first = files.read(shipped).steps[0]
    assert first.forward is not None
    assert first.forward.rate_mbps == p.forward.rate_mbps
    assert first.forward.framing_delay_ms == p.forward.framing_delay_ms


def _params(tmp_path: Path, change: dict[str, object]) -> Path:
    data = yaml.safe_load(PARAMS.read_text())
    for path, value in change.items():
        *parents, leaf = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        if value is None:
            del node[leaf]
        else:
            node[leaf] = value
    (tmp_path / "starlink-shell1-2023-07-18.tle").write_text(
        (SCHEDULES / "starlink-shell1-2023-07-18.tle").read_text()
    )
    out = tmp_path / "p.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"event.after_ms": -5}, "event.after_ms"),
        ({"event.loss": 1.5}, "event.loss"),
        ({"event.spike_ms": [50, 30]}, "event.spike_ms"),
        ({"slots.loop_s": 90}, "slots.loop_s"),
        ({"slots.first_boundary_s": 15}, "slots.first_boundary_s"),
        ({"rtt.quartiles_ms": [50, 40, 60]}, "rtt.quartiles_ms"),
        ({"loss.total_pct": 0.5}, "loss.total_pct"),
        ({"rates.forward_p99_mbps": 500}, "rates.forward_p99_mbps"),
        ({"slots.sources.loop_s": None}, "slots.sources.loop_s"),
        ({"jitter.sources.typo": "x"}, "jitter.sources.typo"),
        ({"geometry.start": "2023-07-18T12:00:30Z"}, "geometry.start"),
        ({"event.colour": 3}, "event.colour"),
    ],
)
def test_bad_parameters_exit_2_naming_the_field(run_cli, tmp_path: Path, change, named) -> None:  # type: ignore[no-untyped-def]
    p = _params(tmp_path, change)
    code, _, err = run_cli(
        "link", "schedule", "starlink", "--params", str(p), "--out", str(tmp_path / "o.yaml")
    )
    assert code == 2, err
    assert f"{named}:" in err and str(p) in err, err
    assert not (tmp_path / "o.yaml").exists()


def test_a_missing_parameter_file_exits_2(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli(
        "link",
        "schedule",
        "starlink",
        "--params",
        str(tmp_path / "none.yaml"),
        "--out",
        str(tmp_path / "o.yaml"),
    )
    assert code == 2 and "none.yaml" in err and "not found" in err, err
