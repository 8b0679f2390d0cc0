"""Shipped link profiles, their mapping to satlink's configuration, and what verify
expects of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from clarke import profiles, registry
from clarke.errors import InputError, UnknownName, ValidationFailed
from clarke.link import netem
from clarke.run.linkcheck import check as linkcheck


def test_shipped_profiles_load_and_cite_sources() -> None:
    names = profiles.available()
    for name in ("geo", "lan", "meo", "leo", "geo-lossy"):
        assert name in names
        p = profiles.read(name)
        if name != "lan":
            assert p.sources, name
    assert profiles.read("geo").idle_rtt_ms == 530
    assert profiles.read("geo-lossy").forward.loss.bit_error_rate == 1e-5  # type: ignore[union-attr]
    assert profiles.read("geo-lossy").lossy and not profiles.read("geo").lossy


def test_geo_maps_to_satlink_config() -> None:
    cfg = profiles.read("geo").to_satlink_config(seed=7)
    assert set(cfg) == {"forward", "return"}
    fwd = cfg["forward"]
    assert fwd == {
        "rate_bps": 10_000_000,
        "queue": {"bytes": 662500},
        "uplink_delay_ms": 125,
        "downlink_delay_ms": 125,
        "framing_delay_ms": 15,
        "loss": None,
        "seed": 7,
    }
    assert cfg["return"]["seed"] == 8


def test_lossy_and_unlimited_profiles_map() -> None:
    lossy = profiles.read("geo-lossy").to_satlink_config()
    assert lossy["forward"]["loss"] == {"bit_error_rate": 1e-5}
    lan = profiles.read("lan").to_satlink_config()
    assert lan["forward"]["rate_bps"] == 0


def test_unknown_profile_lists_the_shipped_ones() -> None:
    with pytest.raises(UnknownName, match="geo-lossy"):
        profiles.read("nope")


def test_netem_arguments() -> None:
    geo = profiles.read("geo").forward
    args = netem.netem_args(geo)
    assert args[:4] == ["delay", "265.0ms", "rate", "10.0mbit"]
    lossy = netem.netem_args(profiles.read("geo-lossy").forward)
    loss = float(lossy[lossy.index("loss") + 1].rstrip("%"))
    assert 11 < loss < 12  # 1 - (1 - 1e-5)^12000


def test_the_registry_names_every_implementation_once() -> None:
    assert registry.get("link").name == "satlink"  # the default
    assert registry.names("link") == ("satlink", "opensand", "netem")
    assert registry.names("server") == ("origin", "openlitespeed")
    assert registry.names("client") == ("firefox", "chromium")
    assert registry.for_role("gateway", "netem").name == "netem"
    with pytest.raises(UnknownName, match="allowed: satlink, opensand, netem"):
        registry.get("link", "tbf")
    with pytest.raises(UnknownName, match="allowed: origin, openlitespeed"):
        registry.for_role("server", "nginx")
    opensand = registry.get("link", "opensand")
    # Refused before anything is created, every field named, OpenSAND installed or not.
    with pytest.raises(InputError, match=r"forward\.rate_mbps"):
        opensand.check_profile(profiles.read("lan"), "link profile 'lan'")
    with pytest.raises(InputError, match=r"lan: forward\.rate_mbps"):
        registry.check_profiles(
            opensand, [("geo", profiles.read("geo")), ("lan", profiles.read("lan"))]
        )
    registry.get("link", "satlink").check_profile(profiles.read("lan"))  # takes anything
    assert "satlink:" in registry.help_text("link") and "(default)" in registry.help_text("link")


def test_expected_rtt_and_rate_comparison() -> None:
    geo = profiles.read("geo")
    assert linkcheck.expected_rtt_ms(geo) == pytest.approx(530 + 2 * 84 * 8 / 10e6 * 1e3)
    good = linkcheck.IperfResult("forward", 9.65e6, 10, 0, 0, "bbr")
    assert good.wire_bps == pytest.approx(9.65e6 * 1500 / 1448)
    assert linkcheck.rate_check(geo, good).verdict is linkcheck.CheckVerdict.ok
    slow = linkcheck.IperfResult("return", 9.0e6, 10, 0, 0, "bbr")
    assert linkcheck.rate_check(geo, slow).verdict is linkcheck.CheckVerdict.fail
    lan = linkcheck.rate_check(profiles.read("lan"), good)
    assert lan.verdict is linkcheck.CheckVerdict.info


def test_rtt_and_loss_checks() -> None:
    geo = profiles.read("geo")
    on = linkcheck.PingResult(20, [530.2] * 20)
    assert linkcheck.rtt_checks(geo, on)[0].verdict is linkcheck.CheckVerdict.ok
    off = linkcheck.PingResult(20, [540.0] * 20)
    assert linkcheck.rtt_checks(geo, off)[0].verdict is linkcheck.CheckVerdict.fail
    lost = linkcheck.PingResult(20, [530.2] * 19)
    assert linkcheck.loss_check(geo, lost).verdict is linkcheck.CheckVerdict.fail
    lossy = linkcheck.loss_check(profiles.read("geo-lossy"), lost)
    assert lossy.verdict is linkcheck.CheckVerdict.info and 0.01 < lossy.expected < 0.02  # type: ignore[operator]
    assert linkcheck.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5


def test_steady_rate_from_link_counters() -> None:
    # 0.25 s samples: 2 s of control exchange (a few bytes), then 10 Mb/s.
    samples = []
    for k in range(80):
        t = k * 0.25
        b = 300 if t < 2 else 300 + int((t - 2) * 10e6 / 8)
        samples.append((t, b))
    assert linkcheck.steady_rate(samples, omit=4, duration=10) == pytest.approx(10e6)
    assert linkcheck.steady_rate(samples[:3], omit=4, duration=10) is None
    assert linkcheck.steady_rate([(k * 0.25, 0) for k in range(40)], omit=4, duration=10) is None


def test_steady_rate_of_a_flow_the_link_carries_late_stops_where_the_link_went_idle() -> None:
    # Capacity on demand: 1 s of control exchange, then a 5 s flow the link carries only
    # from its grant 0.6 s in, at 2.75 Mb/s until its queue has drained (0.64 s after the
    # flow ended), then nothing. The 64 KB mark comes 0.79 s into the flow, so the window
    # (1 s after it, 4 s long) would reach 0.15 s past the drained queue.
    rate, begin, end = 2.75e6, 1.6, 6.64
    samples = [
        (t, 300 + int(max(0.0, min(t, end) - begin) * rate / 8))
        for t in (k * 0.25 for k in range(36))
    ]
    assert linkcheck.steady_rate(samples, omit=1, duration=5) == pytest.approx(rate, rel=1e-3)


def test_echo_packet_checksum() -> None:
    from clarke.place import echo

    pkt = echo.packet(0x1234, 7)
    assert len(pkt) == 64 and pkt[0] == 8
    assert echo.checksum(pkt) == 0  # a valid ICMP checksum sums to zero


@pytest.mark.parametrize(
    ("line", "value", "field"),
    [
        ("rate_mbps: 10", "rate_mbps: 1e300", "forward.rate_mbps"),
        ("rate_mbps: 10", "rate_mbps: .inf", "forward.rate_mbps"),
        ("queue: {bytes: 662500}", "queue: {bytes: 12345678901234567890}", "forward.queue"),
        ("queue: {bytes: 662500}", "queue: {ms: .nan}", "forward.queue"),
    ],
)
def test_values_satlink_cannot_hold_are_refused_when_read(
    tmp_path: Path, line: str, value: str, field: str
) -> None:
    text = Path("profiles/geo.yaml").read_text()
    assert line in text
    f = tmp_path / "p.yaml"
    f.write_text(text.replace(line, value))
    with pytest.raises(ValidationFailed, match=field.replace(".", r"\.")):
        profiles.read(str(f))
