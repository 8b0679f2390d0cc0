"""Capacity on demand on OpenSAND (issue 52): a profile's `return.dama` becomes OpenSAND
8.2's Legacy DAMA (docs/opensand.md, "The return link"), checked without OpenSAND: the
values at their XPaths, the whole-burst arithmetic OpenSAND applies to them (its
UnitConverterFixedSymbolLength rounds a rate up to whole bursts per frame), and what it
cannot take refused naming the field."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from clarke import profiles
from clarke.errors import ValidationFailed
from clarke.link import opensand
from clarke.link.opensand import return_access
from clarke.profiles import LinkProfile

ENT = opensand.Entities(gw_emu="198.19.232.3", st_emu="198.19.232.1", sat_emu="198.19.232.2")


def xml(profile: LinkProfile) -> dict[str, ET.Element]:
    return {rel: ET.fromstring(text) for rel, text in opensand.generate(profile, ENT).items()}


def text(root: ET.Element, path: str) -> str | None:
    el = root.find(f"root/{path}")
    return None if el is None else el.text


def consumer(**dama: object) -> LinkProfile:
    data = profiles.read("geo-consumer").model_dump(by_alias=True)
    data["return"]["dama"] |= dama
    return LinkProfile.model_validate(data)


def opensand_bursts(kbps: int) -> int:
    """Bursts per frame OpenSAND grants for `kbps` of payload on 1616-symbol 16QAM 5/6
    bursts: the FEC added, then ceil(kbit/s x frame / (symbols x bit per symbol))."""
    return math.ceil(kbps / (5 / 6) * return_access.RETURN_FRAME_MS / (1616 * 4) - 1e-9)


def test_the_commercial_geo_profile_maps_onto_opensands_dama() -> None:
    x = xml(profiles.read("geo-consumer"))
    st, topo = x["st/profile.xml"], x["gw/topology.xml"]
    assert text(st, "access/dama/cra") == "203"
    assert text(st, "access/dama/rbdc_enabled") == "true"
    assert text(st, "access/dama/rbdc_max") == "2547"
    assert text(st, "access/dama/vbdc_enabled") == "false"
    assert text(st, "access/dama/vbdc_max") is None
    assert text(st, "access/dama/duration") == "21"  # 556.5 ms / 26.5 ms
    fifos = st.findall("root/network/st_fifos/item")
    assert {f.findtext("access_type") for f in fifos} == {"DAMA_RBDC"}
    assert text(topo, "advanced_settings/timers/synchro") == "27"  # every superframe
    assert text(topo, "advanced_settings/schedulers/burst_length") == "1616 sym"
    band = "frequency_plan/spots/item/return_band/item"
    assert (text(topo, f"{band}/wave_form"), text(topo, f"{band}/bandwidth")) == ("22", "1025")
    rcs2 = topo.findall("root/wave_forms/dvb_rcs2/item")
    assert {w.findtext("burst_length") for w in rcs2} == {"1616 sym"}
    assert "22" in {w.findtext("id") for w in rcs2}


def test_whole_bursts_as_opensand_counts_them() -> None:
    a = opensand.derive(profiles.read("geo-consumer")).return_access
    # The CRA written is one burst exactly: 16 kb/s rounds to one 203.27 kb/s burst, and
    # the value written must not round up to two.
    assert opensand_bursts(a.cra_kbps) == 1 and opensand_bursts(a.cra_kbps + 1) == 2
    # The carrier holds the rate and no more than a burst above it.
    symbols = a.bandwidth_khz / (1 + return_access.RETURN_ROLL_OFF) * 26.5
    assert math.floor(symbols / 1616) == a.carrier_bursts == 14
    half_burst = return_access.DAMA_BURST_KBPS / 2
    assert abs(a.carrier_bursts * return_access.DAMA_BURST_KBPS - 2750) <= half_burst
    # The request period: OpenSAND rounds synchro / frame to whole superframes.
    for period in (1, 2, 3, 38):
        synchro = consumer(request_period_sf=period).return_.dama
        assert synchro is not None
        access = return_access.on_demand(2.75, synchro)
        assert round(access.synchro_ms / 26.5) == period


def test_volume_requests_without_a_rate_request() -> None:
    x = xml(consumer(rbdc_max_kbps=0, vbdc_max_kbit=500))
    st = x["st/profile.xml"]
    assert text(st, "access/dama/rbdc_enabled") == "false"
    assert (text(st, "access/dama/vbdc_enabled"), text(st, "access/dama/vbdc_max")) == (
        "true",
        "500",
    )
    assert {f.findtext("access_type") for f in st.findall("root/network/st_fifos/item")} == {
        "DAMA_VBDC"
    }


def test_what_opensand_does_differently_is_said() -> None:
    notes = "\n".join(opensand.derive(profiles.read("geo-consumer")).notes)
    assert "its own round trip" in notes and "sync period + 1 superframes (2)" in notes
    assert "CRA 16 kb/s becomes 203 kb/s" in notes and "VBDC (1000 kbit) is not requested" in notes
    table = opensand.mapping_table(profiles.read("geo-consumer"))
    assert "| return.dama.cra_kbps | 16 | st profile.xml: access/dama/cra | 203 (kb/s)" in table


def test_another_superframe_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationFailed) as e:
        opensand.derive(consumer(superframe_ms=20, allocation_latency_ms=560))
    assert "return.dama.superframe_ms: 20 cannot be mapped" in str(e.value), str(e.value)


def test_constant_access_is_what_was_measured() -> None:
    """Profiles without capacity on demand keep the measured settings."""
    a = opensand.derive(profiles.read("geo")).return_access
    assert (a.bandwidth_khz, a.wave_form, a.burst, a.cra_kbps) == (48000, 22, "1616 sym", 10000)
    assert (a.synchro_ms, a.msl_frames, a.on_demand) == (1000, 23, False)
    st = xml(profiles.read("geo"))["st/profile.xml"]
    assert text(st, "access/dama/rbdc_enabled") is None
