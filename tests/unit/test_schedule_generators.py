"""`clarke link schedule leo|rain-fade|import`: outputs checked against expectations
worked out independently (geometry, the DVB-S2 table, packet counts), deterministic
output, and clear errors for bad input files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from clarke import paths
from clarke.schedules import files, leo, rainfade

TLE = paths.data_dir("profiles") / "schedules" / "starlink-shell1-2023-07-18.tle"
C_KM_PER_MS = 299.792458
START = "2023-07-18T12:00:00Z"


def _leo(run_cli, out: Path, *extra: str) -> files.Schedule:  # type: ignore[no-untyped-def]
    code, stdout, err = run_cli(
        "link", "schedule", "leo", "--tle", str(TLE), "--terminal", "43.6045,1.4440,146",
        "--start", START, "--out", str(out), *extra,
    )  # fmt: skip
    assert code == 0, err
    return files.read(out)


def test_slant_range_at_known_elevations() -> None:
    r = leo.WGS84_A_KM
    assert leo.slant_range_km(90, 550, r) == pytest.approx(550)
    # Independently: at 0 deg elevation the line of sight is tangent to the sphere.
    assert leo.slant_range_km(0, 550, r) == pytest.approx(math.sqrt((r + 550) ** 2 - r**2))
    # A point placed at that range and elevation (due east of a station on the equator,
    # where geodetic up is radial) is 550 km above the sphere, and look() sees it there.
    site = leo.Site(0, 0, 0)
    for elevation in (25.0, 40.0, 70.0):
        d = leo.slant_range_km(elevation, 550, r)
        e = math.radians(elevation)
        sat = site.ecef_km() + d * np.array([math.sin(e), math.cos(e), 0.0])
        assert np.linalg.norm(sat) - r == pytest.approx(550, abs=1e-6)
        el, rng = leo.look(site, sat)
        assert float(el) == pytest.approx(elevation) and float(rng) == pytest.approx(d)


def test_leo_schedule_from_the_shipped_tles(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    s = _leo(run_cli, tmp_path / "a.yaml")
    assert (s.end.value, s.length_s, s.slot_s) == ("loop", 600, 15)
    assert [st.at_s for st in s.steps] == [15 * k for k in range(40)]  # a step per slot
    # Shell 1 is at 540-570 km: a hop is at least 540 km / c (zenith) and at most the
    # slant range at the 25 deg minimum elevation over c.
    lo, hi = 540 / C_KM_PER_MS, leo.slant_range_km(25, 570, leo.WGS84_A_KM) / C_KM_PER_MS
    for st in s.steps:
        assert st.forward is not None and st.return_ is not None
        f, r = st.forward, st.return_
        assert lo <= f.downlink_delay_ms <= hi  # type: ignore[operator]
        # Gateway beside the terminal: both hops, both directions, the same range.
        assert f.uplink_delay_ms == f.downlink_delay_ms == r.uplink_delay_ms
    # Deterministic: the same inputs write the same bytes.
    _leo(run_cli, tmp_path / "b.yaml")
    assert (tmp_path / "a.yaml").read_bytes() == (tmp_path / "b.yaml").read_bytes()
    assert "sha256" in (tmp_path / "a.yaml").read_text().splitlines()[1]


def test_leo_delay_is_the_serving_satellites_range_over_c() -> None:
    tles = leo.read_tles(TLE)
    from datetime import UTC, datetime

    opts = leo.Options(
        terminal=leo.Site(43.6045, 1.4440, 146), start=datetime(2023, 7, 18, 12, tzinfo=UTC)
    )
    slots = leo.plan_slots(tles, opts)
    sched = leo.schedule(slots, opts)
    for slot, step in zip(slots, sched.steps, strict=True):
        assert slot.satellite and slot.elevation_deg >= 25
        # Range and elevation agree with the spherical-Earth geometry (within the
        # ellipsoid's and the orbit's few km), and the delay is that range over c.
        assert step.forward is not None
        d = step.forward.downlink_delay_ms
        assert d == pytest.approx(slot.terminal_range_km / C_KM_PER_MS, abs=1e-4)
        sphere = leo.slant_range_km(slot.elevation_deg, 550, 6371.0)
        assert slot.terminal_range_km == pytest.approx(sphere, abs=25)


def test_leo_handover_outage_and_gateway(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plain = _leo(run_cli, tmp_path / "plain.yaml")
    cut = _leo(run_cli, tmp_path / "cut.yaml", "--handover-outage-ms", "50")
    text = (tmp_path / "cut.yaml").read_text()
    changes = int(text.split("Result: ")[1].split(" changes")[0])
    assert changes > 0
    outs = [st for st in cut.steps if st.forward and st.forward.outage]
    assert len(outs) == changes and len(cut.steps) == 40 + changes
    for st in outs:  # at a slot boundary, the link back 50 ms later
        assert st.at_s % 15 == 0
        after = cut.steps[cut.steps.index(st) + 1]
        assert after.at_s == pytest.approx(st.at_s + 0.05) and after.forward.outage is False  # type: ignore[union-attr]
    assert len(plain.steps) == 40
    gw = _leo(run_cli, tmp_path / "gw.yaml", "--gateway", "45.0,3.0,300")
    for st in gw.steps:
        f, r = st.forward, st.return_
        assert f is not None and r is not None
        assert f.uplink_delay_ms == r.downlink_delay_ms and f.downlink_delay_ms == r.uplink_delay_ms
    assert any(st.forward.uplink_delay_ms != st.forward.downlink_delay_ms for st in gw.steps)  # type: ignore[union-attr]


def test_leo_bad_inputs(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines = TLE.read_text().splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("1 "))
    broken = lines[: first + 2]
    broken[first] = broken[first][:68] + str((int(broken[first][68]) + 1) % 10)
    bad = tmp_path / "bad.tle"
    bad.write_text("\n".join(broken) + "\n")
    out = tmp_path / "x.yaml"
    code, _, err = run_cli("link", "schedule", "leo", "--tle", str(bad), "--terminal", "1,2",
                           "--out", str(out))  # fmt: skip
    assert code == 2 and f"{bad}: lines {first + 1}-{first + 2}: TLE line 1: check digit" in err
    code, _, err = run_cli("link", "schedule", "leo", "--tle", str(TLE), "--terminal", "north",
                           "--out", str(out))  # fmt: skip
    assert code == 2 and "--terminal: 'north' is not LAT,LON[,ALT_M]" in err
    assert not out.exists()


def test_acm_picks_the_most_efficient_modcod_that_works() -> None:
    assert rainfade.best_modcod(5.0).name == "QPSK 4/5"  # type: ignore[union-attr]
    # 8PSK 3/5 needs 5.50 dB and beats QPSK 5/6 (5.18 dB): the table is not monotonic.
    assert rainfade.best_modcod(6.0).name == "8PSK 3/5"  # type: ignore[union-attr]
    assert rainfade.best_modcod(16.05).name == "32APSK 9/10"  # type: ignore[union-attr]
    assert rainfade.best_modcod(-2.36) is None


def test_rain_fade_from_an_attenuation_series(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    series = tmp_path / "a.csv"
    series.write_text("t_s,attenuation_db\n0,0\n10,7\n20,15\n30,0.5\n")
    out = tmp_path / "f.yaml"
    code, _, err = run_cli("link", "schedule", "rain-fade", "--csv", str(series),
                           "--symbol-rate-mbaud", "10", "--clear-sky-esn0-db", "12",
                           "--out", str(out))  # fmt: skip
    assert code == 0, err
    s = files.read(out)
    got = [(st.at_s, st.forward.model_dump()) for st in s.steps]  # type: ignore[union-attr]
    assert got == [
        (0, {"rate_mbps": 33.00184, "outage": False}),  # 12 dB: 16APSK 5/6 x 10 Mbaud
        (10, {"rate_mbps": 15.87196}),  # 5 dB: QPSK 4/5
        (20, {"outage": True}),  # -3 dB: below QPSK 1/4
        (30, {"rate_mbps": 31.65623, "outage": False}),  # 11.5 dB: 16APSK 4/5
    ]
    assert (s.end.value, s.length_s) == ("loop", 40)
    series.write_text("t_s,attenuation_db\n0,0\n5,abc\n")
    code, _, err = run_cli("link", "schedule", "rain-fade", "--csv", str(series),
                           "--symbol-rate-mbaud", "10", "--clear-sky-esn0-db", "12",
                           "--out", str(out))  # fmt: skip
    assert code == 2 and f"{series}: line 3: attenuation_db: 'abc' is not a number" in err


def test_synthetic_rectangular_fade(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "f.yaml"
    code, _, err = run_cli("link", "schedule", "rain-fade", "--depth-db", "7", "--duration-s",
                           "30", "--fade-start-s", "10", "--shape", "rectangle",
                           "--symbol-rate-mbaud", "1", "--clear-sky-esn0-db", "12",
                           "--slot-s", "100", "--out", str(out))  # fmt: skip
    assert code == 0, err
    s = files.read(out)
    assert s.slot_s == 100 and "--slot-s 100" in out.read_text()
    assert [(st.at_s, st.forward.rate_mbps) for st in s.steps] == [  # type: ignore[union-attr]
        (0, 3.300184), (10, 1.587196), (40, 3.300184)
    ]  # fmt: skip
    assert s.length_s == 100
    code, _, err = run_cli("link", "schedule", "rain-fade", "--symbol-rate-mbaud", "1",
                           "--clear-sky-esn0-db", "12", "--out", str(out))  # fmt: skip
    assert code == 2 and "give either --csv FILE or a fade's --depth-db and --duration-s" in err


def test_mahimahi_opportunities_become_rates(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trace = tmp_path / "down.trace"
    # Second 1: 100 opportunities; second 2: none; second 3: 50.
    stamps = [10 * k for k in range(1, 101)] + [2000 + 20 * k for k in range(1, 51)]
    trace.write_text("\n".join(map(str, stamps)) + "\n")
    up = tmp_path / "up.trace"
    up.write_text("\n".join(str(k) for k in range(1, 3001)) + "\n")  # one per ms
    out = tmp_path / "m.yaml"
    code, _, err = run_cli("link", "schedule", "import", "--format", "mahimahi", "--forward",
                           str(trace), "--return", str(up), "--out", str(out))  # fmt: skip
    assert code == 0, err
    s = files.read(out)
    fwd = [(st.at_s, st.forward.model_dump()) for st in s.steps if st.forward]  # type: ignore[union-attr]
    assert fwd == [
        (0, {"rate_mbps": 100 * 1500 * 8 / 1e6, "outage": False}),
        (1, {"outage": True}),
        (2, {"rate_mbps": 50 * 1500 * 8 / 1e6, "outage": False}),
    ]
    ret = [(st.at_s, st.return_.model_dump()) for st in s.steps if st.return_]  # type: ignore[union-attr]
    assert ret == [(0, {"rate_mbps": 12.0, "outage": False})]  # 1000 per s: 12 Mb/s
    assert (s.end.value, s.length_s) == ("loop", 3)
    trace.write_text("10\n20\nx\n")
    code, _, err = run_cli("link", "schedule", "import", "--format", "mahimahi", "--forward",
                           str(trace), "--out", str(out))  # fmt: skip
    assert code == 2 and f"{trace}: line 3: 'x' is not a timestamp in whole ms" in err


def test_csv_series_become_steps(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    series = tmp_path / "s.csv"
    series.write_text("t_s,delay_ms,loss\n0,40,0\n2.5,60,0.01\n5,60,0\n")
    out = tmp_path / "c.yaml"
    code, _, err = run_cli("link", "schedule", "import", "--format", "csv", "--return",
                           str(series), "--end", "hold", "--out", str(out))  # fmt: skip
    assert code == 0, err
    s = files.read(out)
    assert s.end.value == "hold" and s.length_s is None
    assert [(st.at_s, st.return_.model_dump()) for st in s.steps] == [  # type: ignore[union-attr]
        (0, {"uplink_delay_ms": 20, "downlink_delay_ms": 20, "framing_delay_ms": 0, "loss": None}),
        (2.5, {"uplink_delay_ms": 30, "downlink_delay_ms": 30, "loss": {"packet_rate": 0.01}}),
        (5, {"loss": None}),
    ]
    series.write_text("t_s,delay,loss\n0,40,0\n")
    code, _, err = run_cli("link", "schedule", "import", "--format", "csv", "--forward",
                           str(series), "--out", str(out))  # fmt: skip
    assert code == 2 and f"{series}: header: columns delay:" in err
    series.write_text("t_s,delay_ms\n0,40\n3,50\n2,10\n")
    code, _, err = run_cli("link", "schedule", "import", "--format", "csv", "--forward",
                           str(series), "--out", str(out))  # fmt: skip
    assert code == 2 and f"{series}: line 4: t_s: 2 is not after 3" in err


def test_the_cli_starts_without_sgp4() -> None:
    """Only `clarke link schedule leo` needs SGP4: every other command, and every role's
    agent (`clarke serve` in an image whose environment may predate the dependency),
    starts without importing it."""
    import subprocess
    import sys

    code = "import sys, clarke.cli; assert 'sgp4' not in sys.modules, 'sgp4 imported'"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
