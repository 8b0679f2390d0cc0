"""Capacity on demand in a link profile (issue 52): the return link's `dama`, checked as
satlink checks it, given to satlink as its configuration, refused on the forward link,
mapped onto OpenSAND (test_opensand_dama.py), and its RTT reported rather than judged by
the link check.
The model itself: satlink-model's src/dama_tests.rs."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from clarke import profiles, registry
from clarke.errors import InputError
from clarke.run.linkcheck.check import CheckVerdict, PingResult, rtt_checks

DAMA = {"superframe_ms": 26.5, "cra_kbps": 16, "rbdc_max_kbps": 2000, "vbdc_max_kbit": 500,
        "allocation_latency_ms": 560}  # fmt: skip


def _profile(tmp_path: Any, **return_changes: Any) -> profiles.LinkProfile:
    data = yaml.safe_load((profiles.profile_dir() / "geo.yaml").read_text())
    data["return"] = dict(data["return"]) | return_changes
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return profiles.read(str(path))


def test_the_return_links_capacity_on_demand_goes_to_satlink(tmp_path: Any) -> None:
    p = _profile(tmp_path, dama=DAMA)
    config = p.to_satlink_config()
    assert config["return"]["dama"] == DAMA | {"request_period_sf": 1, "rbdc_timeout_sf": 16}
    assert "dama" not in config["forward"]


@pytest.mark.parametrize(
    ("where", "dama", "said"),
    [
        ("forward", DAMA, "forward.dama: capacity on demand is the return link's"),
        ("return", DAMA | {"allocation_latency_ms": 10}, "must be at least one superframe"),
        ("return", {"superframe_ms": 26.5, "allocation_latency_ms": 560}, "no capacity"),
        ("return", DAMA | {"superframe_ms": 0}, "superframe_ms"),
    ],
)
def test_capacity_on_demand_that_cannot_be_is_refused_naming_the_field(
    tmp_path: Any, where: str, dama: dict[str, Any], said: str
) -> None:
    data = yaml.safe_load((profiles.profile_dir() / "geo.yaml").read_text())
    data[where] = dict(data[where]) | {"dama": dama}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError) as e:
        profiles.read(str(path))
    assert said in str(e.value), str(e.value)


def test_opensand_takes_it(tmp_path: Any) -> None:
    # The mapping itself: tests/unit/test_opensand_dama.py.
    registry.get("link", "opensand").check_profile(_profile(tmp_path, dama=DAMA))


def test_the_link_check_reports_the_rtt_without_judging_it(tmp_path: Any) -> None:
    p = _profile(tmp_path, dama=DAMA)
    checks = rtt_checks(p, PingResult(sent=3, rtts_ms=[1100.0, 640.0, 620.0]))
    p50 = checks[0]
    assert p50.verdict is CheckVerdict.info and "capacity on demand" in p50.reason, p50


def test_the_shipped_commercial_geo_profile_has_capacity_on_demand() -> None:
    p = profiles.read("geo-consumer")
    assert p.idle_rtt_ms == 640 and (p.forward.rate_mbps, p.return_.rate_mbps) == (20, 2.75)
    assert p.forward.dama is None and p.return_.dama is not None
    dama = p.to_satlink_config()["return"]["dama"]
    # The loop in whole superframes (satlink rounds it up): 21 of 26.5 ms.
    assert dama["allocation_latency_ms"] / dama["superframe_ms"] == 21
    assert {f.figure.value for f in p.validation} >= {"rtt_median_ms", "request_grant_delay_ms"}
