"""PEP presets and the accelerated mode without a testbed: the presets as data, the
settings they give on a link profile, and the verdict that fails a load that says it
was accelerated but was not (docs/peps.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from clarke import pep_presets, profiles
from clarke.agent import auth
from clarke.agent.pep_slot import HOP_KEY_LABEL, PepSlot
from clarke.contract import HopPacing, HopWindow
from clarke.errors import UnknownName
from clarke.pep import HOP_KEY_FILE
from clarke.place import Place
from clarke.place.plan import plan
from clarke.run.session.pep import HOP_MSS, bdp_bytes, pep_body, pep_metrics
from clarke.schema import problems_of
from helpers import pep_stations, pep_verdict_of

P = plan(5)
CLIENT, GATEWAY = P.addresses["client"], P.addresses["gateway"]
TERMINAL_SAT = P.sat.address("terminal")


def test_the_shipped_presets_are_data_with_their_sources() -> None:
    assert pep_presets.names() == ("none", "accelerated", "pepsal", "splittcp")
    for name in pep_presets.available():
        preset = pep_presets.read(name)
        assert preset.description and preset.sources, name
    split = pep_presets.read("splittcp")
    assert (split.implementation, split.mode, split.pool) == ("splittcp", "split", None)
    assert split.hop.initial_window_bdp == 0 and split.hop.pacing == "none"
    accel = pep_presets.read("accelerated")
    assert (accel.implementation, accel.mode) == ("splittcp", "accelerated")
    assert accel.hop.initial_window_bdp == 1 and accel.hop.pacing == "link_rate"
    assert accel.pool is not None and accel.pool.size >= 6
    assert any("RFC 3135" in s for s in accel.sources)
    with pytest.raises(UnknownName, match="unknown PEP 'turbo'; allowed: none, accelerated"):
        pep_presets.read("turbo")


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"mode": "split", "pool": {"size": 2}}, "pool: only the accelerated mode"),
        ({"mode": "accelerated"}, "pool: the accelerated mode needs its pool"),
        ({"mode": "split", "hop": {"pacing": "link_rate"}}, "hop: initial_window_bdp and pacing"),
        ({"implementation": "pepsal", "hop": {"buffer_bdp": 4}}, "hop: PEPsal takes only"),
        ({"implementation": "pepsal", "mode": "accelerated", "pool": {}}, "mode: PEPsal"),
        ({"hop": {"initial_window_bdp": 9}}, "hop.initial_window_bdp"),
        ({"pool": {"size": 1000}, "mode": "accelerated"}, "pool.size"),
    ],
)
def test_a_preset_that_cannot_hold_is_refused_naming_the_field(
    doc: dict[str, Any], field: str
) -> None:
    base = {"description": "t", "implementation": "splittcp"}
    with pytest.raises(ValidationError) as e:
        pep_presets.Preset.model_validate(base | doc)
    assert any(field in p for p in problems_of(e.value)), problems_of(e.value)


def test_the_accelerated_settings_on_geo_start_the_hop_at_one_bdp_paced_at_the_rate() -> None:
    geo = profiles.read("geo")
    body = pep_body("accelerated", "bbr", geo)
    assert body.name == "splittcp" and body.preset == "accelerated"
    assert body.mode == "accelerated" and body.hop_cc == "bbr"
    # 10 Mb/s x ~530 ms: ~662 kB, 458 segments of 1448 bytes, each way.
    for direction in ("forward", "return"):
        segments = body.hop_initial_window.of(direction)
        assert 450 <= segments <= 465
        assert (segments - 1) * HOP_MSS < bdp_bytes(geo, direction) <= segments * HOP_MSS
        assert body.hop_max_pacing_rate.of(direction) == 1_250_000
    assert (body.pool_size, body.pool_max_opening, body.pool_spare) == (8, 4, 8)
    # The pure split carries none of it: it is today's splittcp (the kernel's window, no
    # pacing, no pool).
    split = pep_body("splittcp", "cubic", geo)
    assert split.mode == "split" and split.pool_size == 0
    assert split.hop_initial_window == HopWindow() and split.hop_max_pacing_rate == HopPacing()


def test_an_unlimited_link_leaves_the_kernel_its_window_and_no_pacing() -> None:
    body = pep_body("accelerated", "cubic", profiles.read("lan"))
    assert body.body()["hop_initial_window"] == {"forward": 0, "return": 0}
    assert body.body()["hop_max_pacing_rate"] == {"forward": 0, "return": 0}


def _conn(peer: str) -> dict[str, Any]:
    return {"peer": f"{peer}:40000", "requests": 3}


def _first(cwnd: int, snd_wnd: int = 2_000_000, pacing: int | None = 1_250_000) -> dict[str, Any]:
    return {
        "cwnd": cwnd, "mss": HOP_MSS, "snd_wnd": snd_wnd,
        "window_bytes": min(cwnd * HOP_MSS, snd_wnd), "max_pacing_rate": pacing,
    }  # fmt: skip


def _accelerated(n: int = 1, pre_opened: bool = True, cwnd: int = 458) -> dict[str, Any]:
    terminal = {
        "pep": "splittcp", "preset": "accelerated", "mode": "accelerated",
        "accepted": n, "relayed": n, "failed": 0, "hops_opened": n,
        "connections": [
            {
                "accepted_from": f"{CLIENT}:{5000 + i}",
                "relayed_from": f"{TERMINAL_SAT}:{6000 + i}", "stream": i + 1,
                "hop": {"id": i + 1, "pre_opened": pre_opened, "streams": 1},
            }
            for i in range(n)
        ],
    }  # fmt: skip
    gateway = {
        "pep": "splittcp", "preset": "accelerated", "mode": "accelerated",
        "accepted": n, "relayed": n, "failed": 0,
        "connections": [
            {
                "accepted_from": f"{TERMINAL_SAT}:{6000 + i}", "stream": i + 1,
                "hop": {"id": i + 1, "pre_opened": pre_opened, "streams": 1},
                "bytes_to_client": 100_000, "hop_first_data": _first(cwnd),
            }
            for i in range(n)
        ],
    }  # fmt: skip
    return {"terminal": terminal, "gateway": gateway}


BODY = pep_body("accelerated", "cubic", profiles.read("geo"))


def _verdict(stations: dict[str, Any], n: int = 1, http: str = "2") -> str:
    return pep_verdict_of("accelerated", http, [_conn(GATEWAY)] * n, stations, P, BODY)


def test_an_accelerated_load_passes() -> None:
    ok = _accelerated(cwnd=BODY.hop_initial_window.forward)
    assert _verdict(ok) == ""
    assert _verdict(_accelerated(2, cwnd=BODY.hop_initial_window.forward), 2) == ""


def test_a_connection_without_a_pre_opened_hop_was_not_accelerated() -> None:
    why = _verdict(_accelerated(pre_opened=False))
    assert why.startswith("not accelerated: 1 of 1 client connection(s) found no pre-opened")
    assert "pool of 8" in why


def test_a_hop_that_started_below_the_presets_window_was_not_accelerated() -> None:
    """The route's initcwnd was gone (cwnd 10), or the terminal advertised a small
    window: either way the hop did not start at one BDP."""
    why = _verdict(_accelerated(cwnd=10))
    assert "not accelerated: the hop's window at its first data for stream 1 was 14480" in why
    assert "cwnd 10 segments" in why
    small = _accelerated()
    small["gateway"]["connections"][0]["hop_first_data"] = _first(458, snd_wnd=64_512)
    assert "the terminal's window 64512 bytes" in _verdict(small)


def test_a_hop_not_paced_as_asked_was_not_accelerated() -> None:
    stations = _accelerated()
    stations["gateway"]["connections"][0]["hop_first_data"] = _first(458, pacing=None)
    assert "paced at None bytes/s, the preset asks for 1250000" in _verdict(stations)


def test_a_reused_hop_keeps_its_own_window_and_streams_must_all_arrive() -> None:
    stations = _accelerated()
    gw_row = stations["gateway"]["connections"][0]
    gw_row["hop"]["streams"] = 2
    gw_row["hop_first_data"] = _first(40)
    assert _verdict(stations) == ""
    stations["gateway"]["connections"][0]["stream"] = 9
    assert "did not carry stream(s) [1]" in _verdict(stations)


def test_the_wrong_preset_running_fails() -> None:
    stations = _accelerated()
    stations["terminal"]["preset"] = "splittcp"
    assert _verdict(stations) == "asked for PEP accelerated, but terminal runs splittcp"


def test_quic_passes_the_accelerated_pep_untouched() -> None:
    stations = _accelerated(0)
    assert pep_verdict_of("accelerated", "3", [_conn(CLIENT)], stations, P, BODY) == ""
    why = pep_verdict_of("accelerated", "3", [_conn(GATEWAY)], stations, P, BODY)
    assert "QUIC passed a PEP" in why


def test_metrics_of_an_accelerated_load() -> None:
    stations = _accelerated(2)
    stations["terminal"]["connections"][1]["hop"]["pre_opened"] = False
    stations["gateway"]["connections"][1]["hop_first_data"] = _first(100)
    m = pep_metrics(pep_stations(stations))
    assert (m["pep_hops_pre_opened"], m["pep_hops_opened_on_demand"]) == (1.0, 1.0)
    assert m["pep_hop_handshakes"] == 2.0
    assert m["pep_hop_first_cwnd"] == 100.0
    assert m["pep_hop_first_window_bytes"] == 100.0 * HOP_MSS
    assert "pep_hops_pre_opened" not in pep_metrics(pep_stations({"terminal": {"mode": "split"}}))


def test_the_hop_key_is_the_testbeds_own_and_root_only(tmp_path: Path) -> None:
    """Both stations derive the same key from the testbed's token, another testbed's
    token gives another; the slot writes it 0600, replacing what was there, never
    through a symlink planted in its place."""
    token = "x" * 43
    key = auth.derive_key(token, HOP_KEY_LABEL)
    assert key == auth.derive_key(token, HOP_KEY_LABEL) and len(key) == 64
    assert key != auth.derive_key("y" * 43, HOP_KEY_LABEL)
    assert key != auth.derive_key(token, "another purpose")
    place = Place("netns", "terminal", P, tmp_path, tmp_path, tmp_path)
    slot = PepSlot(place, key)
    target = tmp_path / "elsewhere"
    target.write_text("keep me")
    (tmp_path / HOP_KEY_FILE).symlink_to(target)
    slot._write_hop_key()
    written = tmp_path / HOP_KEY_FILE
    assert not written.is_symlink() and written.read_text().strip() == key
    assert written.stat().st_mode & 0o777 == 0o600
    assert target.read_text() == "keep me"
