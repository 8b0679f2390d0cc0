"""Link parameters swept over a base profile (issue 51; clarke/link_points.py): a point is
read as a profile file holding its values would be, named as the profile plus its
overrides, planned with a cell and a pair of link checks each, and refused with the field
named where it cannot be. The link it runs: tests/integration/test_link_sweep.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from clarke import link_points, profiles
from clarke.campaign.dimensions import PROFILE, by_name
from clarke.campaign.plan import plan_file
from clarke.errors import InputError, ValidationFailed
from clarke.run.loop.link_checks import LinkCheck, with_link_checks

CAMPAIGN = """\
name: sweep
repetitions: 1
matrix:
  profiles: [wired-10m-50ms]
  http: [2]
  cc: [cubic]
  models: [uniform]
  sizes: [100k]
{axes}"""


def _campaign(tmp_path: Path, axes: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN.format(axes=axes))
    return path


def test_a_point_has_the_values_it_names_and_the_profiles_other_parameters() -> None:
    point = profiles.read("wired-10m-50ms+rtt_ms=400+forward_loss=0.01+queue_ms=152")
    base = profiles.read("wired-10m-50ms")
    assert point.idle_rtt_ms == 400
    assert point.forward.uplink_delay_ms == point.forward.downlink_delay_ms == 100
    assert point.forward.framing_delay_ms == 0
    assert point.forward.loss is not None and point.forward.loss.model_dump() == {
        "packet_rate": 0.01
    }
    assert point.return_.loss is None
    assert point.forward.rate_mbps == base.forward.rate_mbps == 10
    assert point.forward.queue.bound().ms == 152
    assert point.tolerance == base.tolerance
    # Not the profile its sources measured: no published figures to hold it against.
    assert base.validation and not point.validation
    assert "Swept here: rtt_ms 400, forward_loss 0.01, queue_ms 152." in point.description


def test_a_sweep_point_and_a_copied_profile_with_its_values_configure_the_same_link(
    tmp_path: Path,
) -> None:
    """What the link is given (satlink's whole configuration) is the same for the point
    and for a profile file written by hand with its values."""
    data = yaml.safe_load((profiles.profile_dir() / "wired-10m-50ms.yaml").read_text())
    for way in ("forward", "return"):
        data[way] = dict(data[way]) | {
            "rate_mbps": 2,
            "uplink_delay_ms": 25,
            "downlink_delay_ms": 25,
            "loss": {"packet_rate": 0.015},
            "queue": {"discipline": "codel", "limit": {"ms": 152}},
        }
    copied = tmp_path / "copied.yaml"
    copied.write_text(yaml.safe_dump(data))
    point = profiles.read(
        "wired-10m-50ms+rtt_ms=100+rate_mbps=2+loss=0.015+discipline=codel+queue_ms=152"
    )
    assert point.to_satlink_config() == profiles.read(str(copied)).to_satlink_config()


def test_a_point_name_reads_back_as_its_profile_and_overrides() -> None:
    name = link_points.point_name(
        "wired-10m-50ms", {"loss": "0.015", "rtt_ms": "20", "rate_mbps": "profile"}
    )
    assert name == "wired-10m-50ms+rtt_ms=20+loss=0.015"
    assert link_points.split(name) == ("wired-10m-50ms", {"rtt_ms": "20", "loss": "0.015"})
    assert link_points.point_name("geo", {}) == "geo"


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("wired-10m-50ms+rtt_ms=-5",
         "rtt_ms: '-5' is out of range (profile, or a number in [0, 20000] ms)"),
        ("wired-10m-50ms+loss=1", "loss: '1' is out of range (profile, or a number in [0, 1))"),
        ("wired-10m-50ms+rate_mbps=0", "rate_mbps: '0' is out of range"),
        ("wired-10m-50ms+discipline=red", "discipline: 'red' is not one of profile, drop_tail"),
        ("wired-10m-50ms+mtu=1400", "'mtu=1400' is not PARAMETER=VALUE with a parameter of rtt_ms"),
        ("leo-starlink-measured+rtt_ms=40", "has a schedule (its parameters change over time)"),
        ("wired-10m-50ms+loss=0.01+forward_loss=0.02", "loss and forward_loss: both set"),
    ],
)  # fmt: skip
def test_a_point_that_cannot_be_is_refused_naming_the_parameter(name: str, said: str) -> None:
    with pytest.raises(InputError) as e:
        profiles.read(name)
    assert said in str(e.value), str(e.value)


def test_a_sweep_plans_a_cell_per_point_with_its_run_id_and_link_checks(tmp_path: Path) -> None:
    plan = plan_file(_campaign(tmp_path, "  rtt_ms: [20, 400]\n  loss: [0, 0.015]\n"))
    ids = [r.run_id for r in plan.runs]
    assert ids == [
        "wired-10m-50ms-rtt20-loss0-h2-cubic-uniform-100k-r1",
        "wired-10m-50ms-rtt20-loss0.015-h2-cubic-uniform-100k-r1",
        "wired-10m-50ms-rtt400-loss0-h2-cubic-uniform-100k-r1",
        "wired-10m-50ms-rtt400-loss0.015-h2-cubic-uniform-100k-r1",
    ], ids
    links = [r.cell.link for r in plan.runs]
    assert links[1] == "wired-10m-50ms+rtt_ms=20+loss=0.015", links
    assert {r.cell[PROFILE] for r in plan.runs} == {"wired-10m-50ms"}
    record = plan.runs[1].to_dict()
    assert (record["profile"], record["rtt_ms"], record["loss"]) == (
        "wired-10m-50ms",
        "20",
        "0.015",
    )
    assert record["rate_mbps"] == "profile"
    # Each point is measured before and after its runs, under its own name.
    checks = [s for s in with_link_checks(plan.runs, ()) if isinstance(s, LinkCheck)]
    assert [c.profile for c in checks if c.phase == "before"] == links
    # Without the axes, run ids and links are the profile's as they were.
    plain = plan_file(_campaign(tmp_path, ""))
    assert plain.runs[0].run_id == "wired-10m-50ms-h2-cubic-uniform-100k-r1"
    assert plain.runs[0].cell.link == "wired-10m-50ms"


def test_a_point_a_link_cannot_take_is_refused_when_the_campaign_is_read(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        CAMPAIGN.format(axes="").replace("[wired-10m-50ms]", "[leo-starlink-measured]")
        + "  rtt_ms: [40]\n"
    )
    with pytest.raises(ValidationFailed) as e:
        plan_file(path)
    said = str(e.value)
    assert "link leo-starlink-measured+rtt_ms=40" in said and "has a schedule" in said, said


@pytest.mark.parametrize(
    ("axes", "said"),
    [
        ("  rtt_ms: [20, 30000]\n", "rtt_ms"),
        ("  forward_loss: [0.5, 2]\n", "forward_loss"),
        ("  queue_ms: [fast]\n", "queue_ms"),
    ],
)
def test_the_command_line_exits_2_naming_the_field_and_its_range(
    tmp_path: Path, axes: str, said: str, run_cli: Any
) -> None:
    code, _, err = run_cli("campaign", "validate", str(_campaign(tmp_path, axes)))
    assert code == 2, err
    assert said in err and "profile, or a number in" in err and "Traceback" not in err, err


def test_validate_and_plan_name_every_point(tmp_path: Path, run_cli: Any) -> None:
    path = _campaign(tmp_path, "  rate_mbps: [2, 100]\n  discipline: [drop_tail, fq_codel]\n")
    code, _, err = run_cli("campaign", "validate", str(path))
    assert code == 0, err
    code, out, err = run_cli("campaign", "plan", str(path))
    assert code == 0, err
    assert "wired-10m-50ms+rate_mbps=100+discipline=fq_codel: 1" in out, out


def test_each_parameter_is_a_dimension_with_its_own_record_field() -> None:
    for parameter in link_points.PARAMETERS:
        d = by_name(parameter.name)
        assert d.key == parameter.name and d.default_text() == link_points.PROFILE_OWN
        example: Any = parameter.choices[0] if parameter.choices else 0.5
        assert d.text(d.parse(example)) == parameter.text(example)


def test_shipped_sweep_campaigns_validate(run_cli: Any) -> None:
    for shipped in (
        "campaigns/choffnes2006.yaml",
        "campaigns/choffnes2006-sizes.yaml",
        "campaigns/mohideen2019.yaml",
    ):
        code, out, err = run_cli("campaign", "validate", shipped)
        assert code == 0, err
        assert "valid campaign" in out, out
