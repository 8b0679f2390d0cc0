"""A link schedule on the opensand link (clarke.link.opensand.delay_file): the delay steps
become OpenSAND FileDelay entries at the gateway, the terminal adds no delay, and what
OpenSAND cannot follow is refused naming the step and field. On OpenSAND itself:
tests/integration/test_opensand_netns.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clarke import profiles
from clarke.errors import ValidationFailed
from clarke.link import opensand
from clarke.link.opensand import delay_file
from clarke.link.opensand.mapping import RTT_OVERHEAD_MS
from clarke.schedules import Schedule

ENT = opensand.Entities(gw_emu="198.19.232.3", st_emu="198.19.232.1", sat_emu="198.19.232.2")
SQUARE = "tests/data/profiles/opensand-square.yaml"


def _entries(text: str) -> list[tuple[int, int]]:
    rows = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    return [(int(t), int(v)) for t, v in rows]


def test_a_square_wave_becomes_two_entries_per_step_at_the_gateway(tmp_path: Path) -> None:
    files = opensand.generate(profiles.read(SQUARE), ENT, "square", tmp_path)
    # RTT 100 and 300 ms: (RTT - 23.5) / 2 at the gateway; 10 ms ticks; a 4 s loop is
    # 400 ticks, the last one (399) holding the last value until FileDelay wraps to 0.
    assert _entries(files["gw/delay.txt"]) == [(0, 38), (199, 38), (200, 138), (399, 138)]
    gw = ET.fromstring(files["gw/profile.xml"]).find(".//physical_layer/delay")
    st = ET.fromstring(files["st/profile.xml"]).find(".//physical_layer/delay")
    assert gw is not None and st is not None
    assert {e.tag: e.text for e in gw} == {
        "delay_type": "FileDelay",
        "file_path": str(tmp_path / "gw" / "delay.txt"),
        "refresh_period": "10",
        "loop": "true",
    }
    assert {e.tag: e.text for e in st} == {"delay_type": "ConstantDelay", "delay_value": "0"}
    assert "sat/delay.txt" not in files and "st/delay.txt" not in files


def test_a_held_schedule_ends_far_in_the_future() -> None:
    """OpenSAND 8.2 reads past its table's end when a file without loop runs out."""
    square = profiles.read(SQUARE)
    assert square.schedule is not None
    data = square.schedule.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["end"] = "hold"
    del data["length_s"]
    held = square.model_copy(update={"schedule": Schedule.model_validate(data)})
    assert _entries(delay_file.text(held, RTT_OVERHEAD_MS))[-1] == (delay_file.HOLD_TICK, 138)


def test_the_leo_schedule_maps_its_delays_and_the_rain_fade_is_refused() -> None:
    leo = profiles.read("leo-starlink")
    entries = _entries(delay_file.text(leo, RTT_OVERHEAD_MS))
    # 40 slots of 15 s: a step every 1500 ticks, each held until the next.
    assert [t for t, _ in entries][:4] == [0, 1499, 1500, 2999] and entries[-1][0] == 59_999
    assert {v for _, v in entries} <= {4, 5}  # 31.9-32.4 ms RTT, in whole ms per direction
    with pytest.raises(ValidationFailed) as e:
        opensand.derive(profiles.read("geo-rain-fade"), "link profile 'geo-rain-fade'")
    assert e.value.problems == [
        "schedule.steps[1, 2, 3, 4, 5, ...].forward.rate_mbps: OpenSAND follows a schedule's "
        "delays only (its FileDelay plugin): its rates are a carrier and a DAMA assignment "
        "set at start, it has no loss model or outage, and its attenuation file moves the "
        "MODCOD, not a rate Clarke can set; use --link satlink"
    ]


def test_steps_opensand_cannot_follow_are_named() -> None:
    square = profiles.read(SQUARE).model_dump(by_alias=True, exclude_none=True)
    steps = square["schedule"]["steps"]
    steps[1]["forward"] = {"uplink_delay_ms": 100, "downlink_delay_ms": 75}
    steps.append({"at_s": 2.004, "return": {"outage": True}})
    square["schedule"]["length_s"] = 4
    profile = type(profiles.read(SQUARE)).model_validate(square)
    with pytest.raises(ValidationFailed) as e:
        opensand.derive(profile, "p")
    assert e.value.problems == [
        "schedule.steps[2].return.outage: OpenSAND follows a schedule's delays only (its "
        "FileDelay plugin): its rates are a carrier and a DAMA assignment set at start, it "
        "has no loss model or outage, and its attenuation file moves the MODCOD, not a "
        "rate Clarke can set; use --link satlink",
        "schedule.steps[1]: one-way delays differ (175 ms forward, 150 ms return): OpenSAND "
        "has one delay for both directions",
        "schedule.steps[2]: one-way delays differ (175 ms forward, 150 ms return): OpenSAND "
        "has one delay for both directions",
        "schedule.steps[2].at_s: 2.004 is within one 10 ms refresh of steps[1]: OpenSAND "
        "changes its delay once per refresh",
    ]
