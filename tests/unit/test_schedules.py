"""Link schedules in profiles: errors through the CLI (exit 2, file, step index, field),
the mapping to satlink's JSON, and the shipped scheduled profiles."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from clarke import profiles, registry, roles
from clarke.errors import ValidationFailed

BASE = {
    "description": "test",
    "forward": {"rate_mbps": 100, "uplink_delay_ms": 3, "downlink_delay_ms": 3},
    "return": {"rate_mbps": 15, "uplink_delay_ms": 3, "downlink_delay_ms": 3},
}
# A step's Gilbert-Elliott loss, given and written out alike.
BURSTS = {
    "gilbert_elliott": {"p_good_bad": 0.01, "p_bad_good": 0.3, "loss_good": 0.0, "loss_bad": 0.5}
}
# The contract's example (schedule-contract), with a return step added to clear the loss.
SCHEDULE = {
    "version": 1,
    "end": "loop",
    "length_s": 600,
    "slot_s": 15,
    "steps": [
        {
            "at_s": 0,
            "forward": {"uplink_delay_ms": 3.1, "downlink_delay_ms": 2.9, "rate_mbps": 100},
            "return": {"uplink_delay_ms": 2.9, "downlink_delay_ms": 3.1, "rate_mbps": 15},
        },
        {"at_s": 15.0, "forward": {"outage": True}, "return": {"outage": True}},
        {
            "at_s": 15.05,
            "forward": {
                "outage": False,
                "uplink_delay_ms": 4.0,
                "loss": BURSTS,
            },
            "return": {"outage": False, "loss": None},
        },
    ],
}


def _profile(tmp_path: Path, schedule: dict | None = None, name: str = "p") -> Path:
    path = tmp_path / f"{name}.yaml"
    data = dict(BASE, schedule=schedule if schedule is not None else SCHEDULE)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _edit(change) -> dict:  # type: ignore[no-untyped-def]
    sched = json.loads(json.dumps(SCHEDULE))
    change(sched)
    return sched


BAD = [
    ("time goes back", lambda s: s["steps"][2].update(at_s=14), "schedule.steps[2].at_s"),
    ("equal times", lambda s: s["steps"][2].update(at_s=15.0), "schedule.steps[2].at_s"),
    ("first not at 0", lambda s: s["steps"][0].update(at_s=1), "schedule.steps[0].at_s"),
    (
        "negative delay",
        lambda s: s["steps"][1]["forward"].update(uplink_delay_ms=-1),
        "schedule.steps[1].forward.uplink_delay_ms",
    ),
    (
        "rate 0 without outage",
        lambda s: s["steps"][0]["return"].update(rate_mbps=0),
        "schedule.steps[0].return.rate_mbps",
    ),
    ("unknown step key", lambda s: s["steps"][1].update(forwrd={}), "schedule.steps[1].forwrd"),
    (
        "unknown direction key",
        lambda s: s["steps"][2]["return"].update(los=None),
        "schedule.steps[2].return.los",
    ),
    ("loop without length", lambda s: s.pop("length_s"), "schedule.length_s"),
    ("length not after last", lambda s: s.update(length_s=15.05), "schedule.length_s"),
    ("unknown end", lambda s: s.update(end="repeat"), "schedule.end"),
    ("version 2", lambda s: s.update(version=2), "schedule.version"),
    ("bad id", lambda s: s.update(id="Leo Starlink"), "schedule.id"),
    (
        "loss out of range",
        lambda s: s["steps"][2]["forward"]["loss"]["gilbert_elliott"].update(loss_bad=1.0),
        "schedule.steps[2].forward.loss.gilbert_elliott.loss_bad",
    ),
    (
        "null rate",
        lambda s: s["steps"][0]["forward"].update(rate_mbps=None),
        "schedule.steps[0].forward.rate_mbps",
    ),
    ("empty steps", lambda s: s.update(steps=[]), "schedule.steps"),
    ("no direction", lambda s: s["steps"].__setitem__(1, {"at_s": 15}), "schedule.steps[1]"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "change", "field"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_schedule_is_refused_naming_file_step_and_field(
    run_cli, tmp_path: Path, what: str, change, field: str
) -> None:  # type: ignore[no-untyped-def]
    path = _profile(tmp_path, _edit(change))
    code, out, err = run_cli("link", "schedule", "validate", str(path))
    assert code == 2, (what, out, err)
    assert f"{path}: {field}:" in err, (what, err)
    assert "Traceback" not in err


def test_outage_false_leaving_rate_zero_names_that_step(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    def change(s: dict) -> None:
        s["steps"][1]["forward"]["rate_mbps"] = 0  # with outage: true, allowed

    path = _profile(tmp_path, _edit(change))
    code, _, err = run_cli("link", "schedule", "validate", str(path))
    assert code == 2
    assert "schedule.steps[2].forward.outage: false leaves rate_mbps 0 (set in steps[1])" in err


def test_a_broken_schedule_fails_clarke_load_before_anything_runs(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _profile(tmp_path, _edit(lambda s: s["steps"][2].update(at_s=10)))
    code, _, err = run_cli("load", "--profile", str(path), "--http", "2", "--cc", "cubic")
    assert code == 2 and f"{path}: schedule.steps[2].at_s:" in err


def test_schedule_file_errors_name_the_schedule_file_and_the_profile(
    run_cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "schedules").mkdir()
    sched = tmp_path / "schedules" / "s.yaml"
    sched.write_text(yaml.safe_dump(_edit(lambda s: s["steps"][1]["return"].update(rate_mbps=-2))))
    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump(dict(BASE, schedule_file="s.yaml")))
    code, _, err = run_cli("link", "schedule", "validate", str(prof))
    assert code == 2
    assert f"{sched} (schedule_file of {prof}): steps[1].return.rate_mbps:" in err
    code, _, err = run_cli("link", "schedule", "validate", str(sched))  # the file alone
    assert code == 2 and f"{sched}: steps[1].return.rate_mbps:" in err
    prof.write_text(yaml.safe_dump(dict(BASE, schedule_file="missing.yaml")))
    code, _, err = run_cli("link", "schedule", "validate", str(prof))
    assert code == 2 and "missing.yaml (schedule_file of" in err and "file not found" in err
    prof.write_text(yaml.safe_dump(dict(BASE, schedule_file="../p.yaml")))
    code, _, err = run_cli("link", "schedule", "validate", str(prof))
    assert code == 2 and f"{prof}: schedule_file:" in err
    prof.write_text(yaml.safe_dump(dict(BASE, schedule_file="s.yaml", schedule=SCHEDULE)))
    code, _, err = run_cli("link", "schedule", "validate", str(prof))
    assert code == 2 and "schedule_file: give either schedule or schedule_file" in err


def test_scheduled_profile_maps_to_satlink_schedule(tmp_path: Path) -> None:
    profile = profiles.read(str(_profile(tmp_path)))
    cfg = profile.to_satlink_config(seed=3, name="p")
    assert set(cfg) == {"forward", "return", "schedule"}
    assert cfg["forward"]["rate_bps"] == 100_000_000 and cfg["return"]["seed"] == 4
    s = cfg["schedule"]
    assert re.fullmatch(r"p-[0-9a-f]{12}", s["id"])
    assert (s["end"], s["length_ms"]) == ("loop", 600_000)
    assert s["steps"] == [
        {
            "at_ms": 0,
            "forward": {"uplink_delay_ms": 3.1, "downlink_delay_ms": 2.9, "rate_bps": 100_000_000},
            "return": {"uplink_delay_ms": 2.9, "downlink_delay_ms": 3.1, "rate_bps": 15_000_000},
        },
        {"at_ms": 15_000, "forward": {"outage": True}, "return": {"outage": True}},
        {
            "at_ms": 15_050,
            "forward": {
                "outage": False,
                "uplink_delay_ms": 4.0,
                "loss": BURSTS,
            },
            "return": {"outage": False, "loss": None},  # loss: null is named, not left out
        },
    ]
    assert "slot_s" not in s and "slot_ms" not in s  # not part of satlink's schedule
    hold = _edit(lambda x: (x.pop("length_s"), x.update(end="hold")))
    held = profiles.read(str(_profile(tmp_path, hold))).to_satlink_config()["schedule"]
    assert held["end"] == "hold" and "length_ms" not in held


def test_schedule_id_defaults_to_name_and_content_digest(tmp_path: Path) -> None:
    a = profiles.read(str(_profile(tmp_path, name="alpha"))).schedule
    assert a is not None and a.id is not None and a.id.startswith("alpha-")
    # The same schedule written differently (key order, 15.0 vs 15) has the same id.
    reordered = json.loads(json.dumps(SCHEDULE))
    reordered["steps"][1] = {"return": {"outage": True}, "forward": {"outage": True}, "at_s": 15}
    b = profiles.read(str(_profile(tmp_path / "..", reordered, name="alpha"))).schedule
    assert b is not None and b.id == a.id
    changed = _edit(lambda s: s["steps"][2]["forward"].update(uplink_delay_ms=4.5))
    c = profiles.read(str(_profile(tmp_path, changed, name="alpha"))).schedule
    assert c is not None and c.id != a.id
    named = profiles.read(str(_profile(tmp_path, dict(SCHEDULE, id="mine-1"))))
    assert named.to_satlink_config()["schedule"]["id"] == "mine-1"


def test_agent_round_trip_keeps_what_each_step_names(tmp_path: Path) -> None:
    profile = profiles.read(str(_profile(tmp_path)))
    name, again = roles.parse_link_config(roles.link_config("p", profile))
    assert again == profile
    assert again.to_satlink_config(name=name) == profile.to_satlink_config(name="p")
    assert roles.profile_digest(again) == roles.profile_digest(profile)


def test_unscheduled_profiles_map_without_schedule() -> None:
    for name in ("geo", "leo", "lan", "geo-lossy", "meo"):
        assert "schedule" not in profiles.read(name).to_satlink_config()


def test_shipped_scheduled_profiles_load() -> None:
    leo = profiles.read("leo-starlink")
    assert leo.sources and leo.schedule is not None
    s = leo.schedule
    assert (s.id, s.end.value, s.length_s, s.slot_s) == ("leo-starlink-20230718", "loop", 600, 15)
    assert [st.at_s for st in s.steps] == [15.0 * k for k in range(40)]
    geo = profiles.read("geo-rain-fade")
    assert geo.sources and geo.schedule is not None
    assert all(st.return_ is None for st in geo.schedule.steps)  # the fade is forward only
    assert (
        geo.schedule.slot_s == geo.schedule.length_s == 420
    )  # a load's phase: its place in the fade
    rates = [st.forward.rate_mbps for st in geo.schedule.steps if st.forward]
    assert max(r for r in rates if r) == pytest.approx(3e6 * 3.300184 / 1e6)  # 16APSK 5/6
    assert min(r for r in rates if r) == pytest.approx(3e6 * 0.988858 / 1e6)  # QPSK 1/2 at 2 dB


def test_other_links_refuse_a_scheduled_profile(run_cli) -> None:  # type: ignore[no-untyped-def]
    leo = profiles.read("leo-starlink")
    with pytest.raises(ValidationFailed, match=r"\(netem link\).*schedule: netem"):
        registry.get("link", "netem").check_profile(leo, "link profile 'leo-starlink'")
    fade = profiles.read("geo-rain-fade")
    with pytest.raises(ValidationFailed, match=r"forward\.rate_mbps: OpenSAND follows .* delays"):
        registry.get("link", "opensand").check_profile(fade, "link profile 'geo-rain-fade'")
    registry.get("link", "satlink").check_profile(leo)
    code, _, err = run_cli(
        "load", "--profile", "geo-rain-fade", "--link", "netem", "--http", "2", "--cc", "cubic"
    )
    assert code == 2 and "schedule: netem applies a fixed profile" in err
