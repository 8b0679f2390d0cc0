"""Profiles held against published figures: the typed `validation:` block, every
shipped profile anchored or saying it is illustrative, and the figures `clarke bench
validate` computes from echoes and counter samples (synthetic, exact expectations)."""

from __future__ import annotations

import math
import statistics

import pytest
from pydantic import ValidationError

from clarke import profiles
from clarke.published import Figure, PublishedFigure, Verdict
from clarke.run.bench import validate
from clarke.run.bench.validate_figures import (
    Echo,
    access_figures,
    analyse_echoes,
    echo_ber,
    echoes_from,
    rate_segments,
    schedule_median_mbps,
    segment_rates,
)
from clarke.schema import problems_of

MS = 1_000_000


def test_published_figure_forms_and_verdicts() -> None:
    v = PublishedFigure(figure=Figure.rtt_median_ms, value=50, tolerance=5, source="s")
    assert (v.bounds(), v.describe()) == ((45, 55), "50 ± 5 ms")
    assert [v.verdict(x) for x in (45, 55.01, None)] == [
        Verdict.inside,
        Verdict.outside,
        Verdict.not_measured,
    ]
    r = PublishedFigure(figure=Figure.loss_pct, range=(1, 2), source="s")
    assert r.describe() == "1 to 2%" and r.verdict(2.5) is Verdict.outside
    m = PublishedFigure(figure=Figure.rtt_median_ms, at_most=150, source="s")
    assert m.verdict(140) is Verdict.inside and m.describe() == "at most 150 ms"
    for bad, field in (
        ({"value": 50}, "tolerance"),
        ({"value": 50, "tolerance": 1, "range": [1, 2]}, ""),
        ({"range": [2, 1]}, "range"),
        ({"at_most": 3, "tolerance": 1}, "tolerance"),
        ({"range": [1, 2], "source": ""}, "source"),
        ({"range": [1, 2], "figure": "rtt_p99_ms"}, "figure"),
    ):
        with pytest.raises(ValidationError) as e:
            PublishedFigure.model_validate({"figure": "rtt_median_ms", "source": "s", **bad})
        assert any(p.startswith(field) for p in problems_of(e.value)), problems_of(e.value)


def test_every_shipped_profile_is_anchored_or_says_it_is_illustrative() -> None:
    for name in profiles.available():
        p = profiles.read(name)
        assert p.validation or "illustrative" in p.description.lower(), name
        for claim in p.validation:
            assert claim.source.strip(), name
    assert not profiles.read("schedule-check").validation


def test_echo_figures() -> None:
    t0 = 1_700_000_000 * 10**9
    rtts = [10.0, 12.0, None, 11.0, 20.0, 10.0, None, None, 13.0, 14.0]
    echoes = [Echo(t0 + k * 10 * MS, r) for k, r in enumerate(rtts)]
    f = analyse_echoes(echoes).figures
    assert f[Figure.loss_pct] == pytest.approx(30)
    assert f[Figure.rtt_min_ms] == 10 and f[Figure.rtt_median_ms] == 12
    # Successive pairs both answered: 10-12, 11-20, 20-10, 13-14.
    assert f[Figure.rtt_successive_diff_ms] == pytest.approx((2 + 9 + 10 + 1) / 4)
    assert f[Figure.echo_ber] == pytest.approx(echo_ber(0.3))
    assert 1 - (1 - echo_ber(0.3)) ** (2 * 84 * 8) == pytest.approx(0.3)
    assert Figure.step_median_ms not in f  # no clock, no slots
    data = {
        "sent_unix_ns": [e.sent_unix_ns for e in echoes if e.rtt_ms is not None],
        "rtts_ms": [e.rtt_ms for e in echoes if e.rtt_ms is not None],
        "lost_sent_unix_ns": [e.sent_unix_ns for e in echoes if e.rtt_ms is None],
    }
    assert echoes_from(data) == echoes


def test_losses_and_floors_placed_in_the_slots() -> None:
    """Echoes every 100 ms from link time 12.05 s over 3 slots of 15 s that start at link
    time 12; the floor is 20, 50, 30 ms by slot; losses 7 s into the first slot and 0.05 s
    and 1.55 s after the second boundary."""
    echoes = []
    for k in range(450):
        link = 12.05 + k / 10
        floor = (20, 50, 30)[math.floor((link - 12) / 15)]
        lost = k in (69, 150, 165)  # link times 18.95, 27.05, 28.55
        echoes.append(Echo(k * 100 * MS, None if lost else floor + (k % 3)))
    fig = analyse_echoes(echoes, lambda ns: 12.05 + ns / 1e9, 15, 12)
    f = fig.figures
    assert fig.lost == 3
    # Two of the three losses fell within 2 s after a boundary.
    assert f[Figure.loss_after_boundary_pct] == pytest.approx(200 / 3)
    assert [s["floor_ms"] for s in fig.slots] == [20, 50, 30]
    assert f[Figure.step_median_ms] == 25 and f[Figure.step_max_ms] == 30
    first = fig.phases[0]  # phases 0.05 and 0.15 s of each slot
    assert (first["from_s"], first["to_s"], first["echoes"]) == (0, 0.2, 6)
    assert first["lost_pct"] == pytest.approx(100 / 6)


def test_rates_per_stretch_of_constant_scheduled_rate() -> None:
    p = profiles.LinkProfile.model_validate(
        {
            "description": "x",
            "forward": {"rate_mbps": 10, "uplink_delay_ms": 1, "downlink_delay_ms": 1},
            "return": {"rate_mbps": 10, "uplink_delay_ms": 1, "downlink_delay_ms": 1},
            "schedule": {
                "version": 1,
                "end": "loop",
                "length_s": 10,
                "steps": [
                    {"at_s": 0, "forward": {"rate_mbps": 20}},
                    {"at_s": 4, "forward": {"uplink_delay_ms": 3}},  # not a rate change
                    {"at_s": 6, "forward": {"rate_mbps": 5}},
                ],
            },
        }
    )
    segs = rate_segments(p, "forward", 3, 25)
    # 20 Mb/s from 0 to 6 s, 5 Mb/s from 6 to 10, and so on round the loop (the step at
    # 4 s changes no rate); those that overlap link times 3 to 25.
    assert segs == [(0, 6, 20), (6, 10, 5), (10, 16, 20), (16, 20, 5), (20, 26, 20)]
    assert schedule_median_mbps(p, "forward") == (20, 20)
    # Samples every 0.25 s of a link that carries exactly the scheduled rate.
    samples, total, t = [], 0.0, 3.0
    while t <= 25:
        samples.append((t, int(total)))
        rate = next(r for a, b, r in segs if a <= t < b)
        total += rate * 1e6 / 8 * 0.25
        t += 0.25
    got = segment_rates(samples, [(max(a, 3), min(b, 25), r) for a, b, r in segs])
    assert [round(g["measured_mbps"], 3) for g in got] == [20, 5, 20, 5, 20]
    assert [g["scheduled_mbps"] for g in got] == [20, 5, 20, 5, 20]
    constant = profiles.read("geo")
    assert rate_segments(constant, "return", 1, 9) == [(1, 9, 10)]


def test_the_table_sets_each_figure_beside_its_published_one() -> None:
    prof = profiles.read("leo-starlink-measured")
    result = {
        "profile": "leo-starlink-measured",
        "link": "satlink",
        "duration_s": 60,
        "interval_s": 0.01,
        "echoes": {"sent": 6000, "lost": 90, "phases": [], "slots": []},
        "figures": {"rtt_median_ms": 51.0, "loss_pct": 2.5, "rtt_p95_ms": 80.0},
        "rates": {},
    }
    result["published"] = [
        validate._judged(p, result["figures"].get(p.figure.value)) for p in prof.validation
    ]
    text = validate.render(result)
    line = next(x for x in text.splitlines() if x.strip().startswith("RTT median"))
    assert "50 ± 5 ms" in line and "51.00" in line and line.endswith("inside")
    line = next(x for x in text.splitlines() if x.strip().startswith("echo loss"))
    assert "1 to 2%" in line and line.endswith("outside")
    assert any(x.strip().startswith("RTT p95") and "80.0" in x for x in text.splitlines())
    assert "Huston" in text and "Michel" in text
    md = validate.render(result, markdown=True)
    assert "| RTT median (ms) | 50 ± 5 ms | [1] | 51.00 | inside |" in md


def test_access_figures_set_echoes_after_idle_beside_a_steady_flows() -> None:
    # The steady flow's first half waits as after idle (its first requests): left out.
    steady = [1200.0, 1190.0, 1180.0, 660.0, 650.0, 655.0, 662.0, 651.0]
    f = access_figures([1210.0, 1230.0, 1205.0], steady)
    assert f[Figure.echo_after_idle_ms] == 1210
    assert f[Figure.echo_under_load_ms] == statistics.median([650.0, 655.0, 662.0, 651.0])
    assert f[Figure.request_grant_delay_ms] == 1210 - f[Figure.echo_under_load_ms]
    assert access_figures([], steady).keys() == {Figure.echo_under_load_ms}
    assert access_figures([1210.0], []) == {Figure.echo_after_idle_ms: 1210}


def test_geo_consumers_request_grant_delay_is_judged_and_shown() -> None:
    prof = profiles.read("geo-consumer")
    access = {"payload_bytes": 1472, "after_idle_ms": [1215.0, 1208.0], "after_idle_lost": 0,
              "steady_interval_ms": 20.0, "steady_ms": [1200.0, 661.0, 655.0],
              "steady_lost": 1}  # fmt: skip
    figures = access_figures(access["after_idle_ms"], access["steady_ms"])
    result = {
        "profile": "geo-consumer", "link": "satlink", "duration_s": 60, "interval_s": 0.01,
        "echoes": {"sent": 6000, "lost": 0, "phases": [], "slots": []},
        "figures": {"rtt_median_ms": 655.0} | {k.value: v for k, v in figures.items()},
        "rates": {}, "access": access,
    }  # fmt: skip
    result["published"] = [
        validate._judged(p, result["figures"].get(p.figure.value)) for p in prof.validation
    ]
    text = validate.render(result)
    line = next(x for x in text.splitlines() if x.strip().startswith("extra wait after idle"))
    assert "at least 500 ms" in line and line.endswith("inside"), line
    assert "Full-sized echoes (1500 bytes) after idle, ms: 1215, 1208 (0 lost)" in text, text
    assert "second half: 655 to 661 (1 lost in all)" in text, text
    assert "ETSI TR 101 545-4" in text


def test_link_checks_report_rtts_a_schedule_or_jitter_moves() -> None:
    from clarke.run.linkcheck import check as linkcheck

    pr = linkcheck.PingResult(sent=5, rtts_ms=[50.0, 52.0, 47.0, 61.0, 49.0])
    for name, why in (
        ("leo-starlink-measured", "jitter"),
        ("schedule-check", "from 20.0 to 80.0 ms"),
        # Its geometry moves the RTT by 1.2 ms over the loop, more than its 1 ms tolerance.
        ("leo-starlink", "from 31.4 to 32.6 ms"),
    ):
        p50 = linkcheck.rtt_checks(profiles.read(name), pr)[0]
        assert p50.verdict is linkcheck.CheckVerdict.info and why in p50.reason, p50
    # A fade changes the rate, not the delay: the RTT is judged.
    p50 = linkcheck.rtt_checks(profiles.read("geo-rain-fade"), pr)[0]
    assert p50.verdict is linkcheck.CheckVerdict.fail and "off by" in p50.reason


def test_the_report_counts_loads_that_ran_into_the_next_slot() -> None:
    from clarke.campaign.dimensions import HTTP, PROFILE
    from clarke.report.timeline import crosses_boundary, crossing_summary
    from clarke.results import store
    from clarke.results.record import RunRecord
    from clarke.vocab import HttpVersion
    from helpers import RECORDED_SCHEDULE

    _, journal = store.open_existing(RECORDED_SCHEDULE)
    base = next(iter(journal.records()))

    def load(phase: float, plt_s: float, http: HttpVersion) -> RunRecord:
        metrics = {**base.metrics, "slot_phase_s": phase, "plt_ms": plt_s * 1000}
        cell = base.cell.replace(PROFILE, "leo-starlink-measured").replace(HTTP, http)
        return base.model_copy(update={"metrics": metrics, "cell": cell})

    h2, h3 = HttpVersion.h2, HttpVersion.h3
    loads = [load(14.0, 1.2, h2), load(13.0, 1.9, h2), load(3.0, 1.0, h2), load(5.0, 1.4, h3)]
    assert [crosses_boundary(r) for r in loads] == [True, False, False, False]
    lines = crossing_summary(loads)
    assert (
        lines[0].startswith("HTTP/2")
        and "1 crossed a reconfiguration, median PLT 1.20 s" in lines[0]
    )
    assert "2 stayed in their slot, median PLT 1.45 s" in lines[0]
    assert "0 crossed a reconfiguration; 1 stayed" in lines[1]
    assert crosses_boundary(base) is None  # schedule-check has no slots


def test_the_rate_is_read_where_the_link_counts_it() -> None:
    # satlink and netem count at the sending station; OpenSAND at the receiving
    # station's TAP (its stats carry no sender's count of that direction).
    satlink = {
        "terminal": {"bytes_onto_link": {"return": 10}},
        "satellite": {},
        "gateway": {"bytes_onto_link": {"forward": 20}},
    }
    opensand = {
        "terminal": {"bytes_onto_link": {"forward": 20}},
        "satellite": {},
        "gateway": {"bytes_onto_link": {"return": 10}},
    }
    assert [validate.counting_role(satlink, d) for d in ("forward", "return")] == [
        "gateway",
        "terminal",
    ]
    assert [validate.counting_role(opensand, d) for d in ("forward", "return")] == [
        "terminal",
        "gateway",
    ]
    assert validate.counting_role({"satellite": {}}, "forward") == "gateway"
