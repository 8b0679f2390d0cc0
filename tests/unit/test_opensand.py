"""The opensand backend's configuration generator (profile -> OpenSAND 8.2 XML), checked
without OpenSAND: the XML parses, the values at the XPaths of docs/opensand.md follow
the profile, and what OpenSAND cannot emulate is refused naming the field."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from clarke import profiles
from clarke.errors import InputError, ValidationFailed
from clarke.link import opensand
from clarke.profiles import LinkProfile
from helpers import dockerfile_args, dockerfile_instructions

ENT = opensand.Entities(gw_emu="198.19.232.3", st_emu="198.19.232.1", sat_emu="198.19.232.2")
REPO = Path(__file__).resolve().parents[2]


def parsed(profile: LinkProfile) -> dict[str, ET.Element]:
    return {rel: ET.fromstring(text) for rel, text in opensand.generate(profile, ENT).items()}


def val(root: ET.Element, path: str) -> str:
    el = root.find(path)
    assert el is not None, path
    return el.text or ""


def with_changes(name: str, **changes: object) -> LinkProfile:
    data = profiles.read(name).model_dump(by_alias=True)
    for key, value in changes.items():
        d = data
        *parents, last = key.split(".")
        for p in parents:
            d = d[p]
        d[last] = value
    return LinkProfile.model_validate(data)


def test_files_per_entity_and_all_parse() -> None:
    files = opensand.generate(profiles.read("geo"), ENT)
    assert set(files) == {
        "gw/infrastructure.xml",
        "gw/topology.xml",
        "gw/profile.xml",
        "st/infrastructure.xml",
        "st/topology.xml",
        "st/profile.xml",
        "sat/infrastructure.xml",
        "sat/topology.xml",
    }
    for rel, text in files.items():
        assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>'), rel
        root = ET.fromstring(text)
        assert root.tag == "model" and root.get("version") == "1.0.0", rel
        assert root.find("root") is not None, rel


@pytest.mark.parametrize("name", ["geo", "meo", "leo"])
def test_values_at_the_documented_paths(name: str) -> None:
    p = profiles.read(name)
    x = parsed(p)
    delay = opensand.delay_value_for(p.idle_rtt_ms)
    for role in ("gw", "st"):
        prof = x[f"{role}/profile.xml"]
        assert val(prof, "root/encap/gse/decap_buffer_len") == "12000"
        assert val(prof, "root/physical_layer/delay/delay_type") == "ConstantDelay"
        assert val(prof, "root/physical_layer/delay/delay_value") == str(delay)
        assert val(prof, "root/physical_layer/error_insertion/error_insertion_type") == "Gate"
        for link in ("uplink", "downlink"):
            att = f"root/physical_layer/{link}_attenuation"
            assert val(prof, f"{att}/attenuation_type") == "Ideal"
            assert float(val(prof, f"{att}/ideal_attenuation_value")) == 0
    for role in ("gw", "st", "sat"):
        infra = x[f"{role}/infrastructure.xml"]
        assert val(infra, "root/storage/enable_collector") == "false"
        assert val(infra, "root/storage/enable_local") == "false"
        assert (
            val(infra, "root/entity/entity_type")
            == {
                "gw": "Gateway",
                "st": "Terminal",
                "sat": "Satellite",
            }[role]
        )
        topo = x[f"{role}/topology.xml"]
        spot = "root/frequency_plan/spots/item"
        assert val(topo, f"{spot}/forward_band/item/bandwidth") == str(
            round(p.forward.rate_mbps * 950)
        )
        assert val(topo, f"{spot}/forward_band/item/type") == "ACM"
        assert val(topo, f"{spot}/forward_band/item/wave_form") == "7"
        assert val(topo, f"{spot}/return_band/item/bandwidth") == "48000"
        assert val(topo, f"{spot}/return_band/item/type") == "DAMA"
        assert val(topo, f"{spot}/return_band/item/wave_form") == "22"
        assert val(topo, "root/advanced_settings/schedulers/burst_length") == "1616 sym"
        # The return wave form must exist with the scheduler's burst length.
        rcs2 = {
            val(i, "id"): val(i, "burst_length")
            for i in topo.findall("root/wave_forms/dvb_rcs2/item")
        }
        assert rcs2["22"] == "1616 sym"
        s2 = [int(val(i, "id")) for i in topo.findall("root/wave_forms/dvb_s2/item")]
        assert 7 in s2 and max(s2) <= 27
    st = x["st/profile.xml"]
    cra = int(val(st, "root/access/dama/cra"))
    assert cra == round(p.return_.rate_mbps * 1000)
    assert 0 < cra <= opensand.RETURN_CAPACITY_KBPS
    assert val(st, "root/access/settings/dama_enabled") == "true"
    assert x["gw/profile.xml"].find("root/access/dama") is None
    # The sat takes no profile.
    assert "sat/profile.xml" not in x


def test_geo_matches_the_measured_settings() -> None:
    """opensand.md: 9500 kHz forward, CRA 10000, delay_value 127 -> 530-531 ms."""
    x = parsed(profiles.read("geo"))
    topo = x["gw/topology.xml"]
    assert val(topo, "root/frequency_plan/spots/item/forward_band/item/bandwidth") == "9500"
    assert val(x["st/profile.xml"], "root/access/dama/cra") == "10000"
    assert val(x["gw/profile.xml"], "root/physical_layer/delay/delay_value") == "127"
    # 662500-byte queue -> 442 packets of 1500 bytes in the BE FIFO each way.
    be = "root/network/{}/item[name='BE']/capacity"
    assert val(x["gw/profile.xml"], be.format("gw_fifos")) == "442"
    assert val(x["st/profile.xml"], be.format("st_fifos")) == "442"


@pytest.mark.parametrize(
    ("rtt", "delay"), [(530, 127), (522, 125), (140, 29), (40, 4), (25, 0), (1000, 244)]
)
def test_delay_value_formula(rtt: float, delay: int) -> None:
    assert opensand.delay_value_for(rtt) == delay
    # Documented formula: RTT = 4 x delay_value + 23.5; rounding costs at most 2 ms.
    assert abs(opensand.expected_rtt_ms(delay) - rtt) <= 2 or delay == 0


def test_delay_value_reaches_the_profile_rtt_within_tolerance() -> None:
    for name in ("geo", "meo", "leo"):
        p = profiles.read(name)
        m = opensand.derive(p)
        assert abs(m.expected_rtt_ms - p.idle_rtt_ms) <= 2.0, name


def test_entities_and_macs_in_infrastructure() -> None:
    x = parsed(profiles.read("geo"))
    gw = x["gw/infrastructure.xml"]
    assert val(gw, "root/entity/entity_gw/entity_id") == "0"
    assert val(gw, "root/entity/entity_gw/emu_address") == "198.19.232.3"
    assert val(gw, "root/entity/entity_gw/tap_iface") == "opensand_tap"
    assert val(gw, "root/entity/entity_gw/mac_address") == "00:00:00:00:00:01"
    st = x["st/infrastructure.xml"]
    assert val(st, "root/entity/entity_st/entity_id") == "1"
    assert val(st, "root/entity/entity_st/mac_address") == "00:00:00:00:00:02"
    sat = x["sat/infrastructure.xml"]
    assert val(sat, "root/entity/entity_sat/entity_id") == "2"
    assert val(sat, "root/infrastructure/terminals/item/emu_address") == "198.19.232.1"
    assert val(sat, "root/infrastructure/default_gw") == "0"
    # Schema order: every entity block, sat first.
    entity = sat.find("root/entity")
    assert entity is not None
    tags = [c.tag for c in entity]
    assert tags == [
        "entity_type",
        "entity_sat",
        "entity_gw",
        "entity_gw_net_acc",
        "entity_gw_phy",
        "entity_st",
    ]


def test_lan_is_refused_naming_fields() -> None:
    with pytest.raises(ValidationFailed) as e:
        opensand.derive(profiles.read("lan"), "link profile 'lan'")
    text = str(e.value)
    assert isinstance(e.value, InputError)
    assert "forward.rate_mbps" in text and "return.rate_mbps" in text
    assert "unlimited" in text and "idle RTT 1 ms" in text
    assert "link profile 'lan' (opensand link)" in text


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("bit_error_rate", 1e-5, "forward.loss.bit_error_rate: 1e-05 cannot be mapped"),
        ("packet_rate", 0.01, "forward.loss.packet_rate: 0.01 cannot be mapped"),
    ],
)
def test_loss_is_refused_naming_the_field(field: str, value: float, expected: str) -> None:
    p = with_changes("geo", **{"forward.loss": {field: value}})
    with pytest.raises(ValidationFailed) as e:
        opensand.generate(p, ENT)
    assert expected in str(e.value)
    assert "return.loss" not in str(e.value)


def test_geo_lossy_refused_both_directions() -> None:
    with pytest.raises(ValidationFailed) as e:
        opensand.derive(profiles.read("geo-lossy"))
    assert len(e.value.problems) == 2
    assert "forward.loss.bit_error_rate" in e.value.problems[0]
    assert "return.loss.bit_error_rate" in e.value.problems[1]


def test_zero_loss_maps_to_clear_sky() -> None:
    p = with_changes("geo", **{"forward.loss": {"bit_error_rate": 0.0}})
    x = parsed(p)
    att = "root/physical_layer/downlink_attenuation"
    assert float(val(x["gw/profile.xml"], f"{att}/clear_sky")) == 20.0


def test_return_rate_above_carrier_capacity_refused() -> None:
    p = with_changes("geo", **{"return.rate_mbps": 200})
    with pytest.raises(ValidationFailed, match=r"return\.rate_mbps: 200 exceeds"):
        opensand.derive(p)


def test_too_small_forward_rate_refused() -> None:
    p = with_changes("geo", **{"forward.rate_mbps": 0.5})
    with pytest.raises(ValidationFailed, match=r"forward\.rate_mbps: 0\.5 is below"):
        opensand.derive(p)


def test_queue_in_ms_and_clamped() -> None:
    p = with_changes("geo", **{"forward.queue": {"ms": 100}})
    assert opensand.derive(p).forward_fifo_packets == 84  # 10 Mb/s x 100 ms = 125000 B
    p = with_changes("geo", **{"forward.queue": {"bytes": 10**9}})
    assert opensand.derive(p).forward_fifo_packets == 65535


def test_notes_for_asymmetric_delay_and_cpu_bound_rates() -> None:
    leo = opensand.derive(profiles.read("leo"))
    assert any("forward.rate_mbps 100" in n for n in leo.notes)
    meo = opensand.derive(profiles.read("meo"))
    assert any("return.rate_mbps 20" in n for n in meo.notes)
    assert any("70-80 %" in n for n in meo.notes)
    p = with_changes("geo", **{"forward.uplink_delay_ms": 200})
    assert any("One-way delays differ" in n for n in opensand.derive(p).notes)


def test_mapping_table_is_readable() -> None:
    table = opensand.mapping_table(profiles.read("geo"))
    assert table.startswith("| profile field |")
    assert "physical_layer/delay/delay_value | 127 |" in table
    assert "access/dama/cra | 10000 (kb/s)" in table
    assert "70-80 %" in table


def test_write_creates_directories(tmp_path: Path) -> None:
    written = opensand.write(profiles.read("geo"), ENT, tmp_path)
    assert (tmp_path / "gw" / "profile.xml").is_file()
    assert (tmp_path / "sat" / "topology.xml").is_file()
    assert not (tmp_path / "sat" / "profile.xml").exists()
    assert (tmp_path / "MAPPING.md").is_file()
    assert len(written) == 9


def test_entities_are_checked() -> None:
    with pytest.raises(InputError, match="gw_emu"):
        opensand.Entities(gw_emu="gw", st_emu="198.19.232.1", sat_emu="198.19.232.2")
    with pytest.raises(InputError, match="distinct"):
        opensand.Entities("198.19.232.3", "198.19.232.1", "198.19.232.2", st_id=0)


def test_cli_writes_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        opensand.main(["geo", str(tmp_path), "198.19.232.3", "198.19.232.1", "198.19.232.2"]) == 0
    )
    assert "gw/profile.xml" in capsys.readouterr().out
    assert opensand.main(["geo"]) == 2
    assert "PROFILE OUT_DIR" in capsys.readouterr().err
    assert (
        opensand.main(
            ["lan", str(tmp_path / "lan"), "198.19.232.3", "198.19.232.1", "198.19.232.2"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("Invalid input: link profile 'lan' (opensand link)")
    assert "forward.rate_mbps" in err
    assert not (tmp_path / "lan").exists()


# --- the image and its entrypoint, checked statically ------------------------------------


def test_dockerfile_from_args_healthcheck_and_cmd() -> None:
    ins = dockerfile_instructions(REPO / "images" / "opensand" / "Dockerfile")
    assert ins[0] == ("FROM", "debian:bookworm-slim")
    args = dockerfile_args(ins)
    # OpenSAND's own repository by default (test_compose_files checks the script agrees).
    assert args["OPENSAND_REPO_URL"].endswith("/CNES/net4sat-packages/master")
    assert args["OPENSAND_VERSION"] == "8.2.0"
    assert args["OPENSAND_SUITE"] == "bookworm"
    run = " ".join(a for kind, a in ins if kind == "RUN")
    # One install for the image and a host: the script checks the key's fingerprint.
    assert "opensand-install" in run
    assert "http://" not in run and "https://" not in run
    script = (REPO / "opensand" / "install.sh").read_text()
    assert "opensand=$version" in script and 'gpg --show-keys --with-colons "$key"' in script
    # The role agent is the container's main process; the entrypoint is its child.
    assert not [a for kind, a in ins if kind == "ENTRYPOINT"]
    (cmd,) = [json.loads(a) for kind, a in ins if kind == "CMD"]
    assert cmd[:2] == ["/bin/sh", "-c"]
    assert cmd[2].startswith('exec clarke serve "${CLARKE_ROLE:?')
    assert cmd[2].endswith("--implementation opensand")
    health = [a for kind, a in ins if kind == "HEALTHCHECK"]
    assert len(health) == 1 and 'CMD ["/usr/local/bin/opensand-entrypoint", "health"]' in health[0]
    copies = [a for kind, a in ins if kind == "COPY"]
    assert any("opensand/entrypoint.sh /usr/local/bin/opensand-entrypoint" in c for c in copies)
    assert (REPO / "opensand" / "entrypoint.sh").is_file()
    env = " ".join(a for kind, a in ins if kind == "ENV")
    for setting in (
        "PATH=/opt/clarke/.venv/bin:$PATH",
        "CLARKE_IMPLEMENTATION=opensand",
        "OPENSAND_ENTRYPOINT=/usr/local/bin/opensand-entrypoint",
        "OPENSAND_CONFIG_DIR=/etc/opensand",
        "OPENSAND_RUN_DIR=/run/opensand",
    ):
        assert setting in env, setting


def test_entrypoint_is_valid_bash_and_executable() -> None:
    script = REPO / "opensand" / "entrypoint.sh"
    assert script.stat().st_mode & 0o111
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert opensand.GLIBC_TUNABLES in text
    assert opensand.MAC_GW in text and opensand.MAC_ST in text
    assert opensand.TAP_IFACE in text and opensand.BRIDGE_IFACE in text


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "OPENSAND_ROLE is not set"),
        ({"OPENSAND_ROLE": "gateway"}, "must be gw, st or sat"),
        ({"OPENSAND_ROLE": "gw", "OPENSAND_CONFIG_DIR": "/nonexistent"}, "missing /nonexistent"),
    ],
)
def test_entrypoint_refuses_bad_environment(env: dict[str, str], message: str) -> None:
    proc = subprocess.run(
        [str(REPO / "opensand" / "entrypoint.sh")],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert proc.returncode == 2
    assert message in proc.stderr


def test_entrypoint_health_without_opensand(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(REPO / "opensand" / "entrypoint.sh"), "health"],
        env={"PATH": os.environ["PATH"], "OPENSAND_ROLE": "sat", "OPENSAND_RUN_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert proc.returncode == 1 and "no pid file" in proc.stderr


def test_entrypoint_health_takes_the_recorded_role(tmp_path: Path) -> None:
    """In the image the HEALTHCHECK's environment does not name the entity: `health`
    reads the role the agent's last start recorded next to the pid file."""
    script = str(REPO / "opensand" / "entrypoint.sh")
    env = {"PATH": os.environ["PATH"], "OPENSAND_RUN_DIR": str(tmp_path)}
    proc = subprocess.run([script, "health"], env=env, capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2 and "OPENSAND_ROLE is not set" in proc.stderr
    (tmp_path / "opensand.role").write_text("sat\n")
    (tmp_path / "opensand.pid").write_text(f"{os.getpid()}\n")  # a PID that is not OpenSAND
    proc = subprocess.run([script, "health"], env=env, capture_output=True, text=True, timeout=10)
    assert proc.returncode == 1 and "is not running" in proc.stderr


# --- the registry entry and the role, without OpenSAND ------------------------------------


@pytest.fixture
def no_opensand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A PATH with only a directory where tests put a fake `opensand` (none at first)."""
    from clarke.link.opensand import entity

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    entity._installed_version.cache_clear()
    yield bin_dir
    entity._installed_version.cache_clear()


def fake_opensand(bin_dir: Path, version: str) -> None:
    script = bin_dir / "opensand"
    script.write_text(f"#!/bin/sh\necho 'OpenSAND version {version}'\n")
    script.chmod(0o755)


def test_environment_check_says_how_to_get_opensand(no_opensand: Path) -> None:
    from clarke import registry
    from clarke.errors import EnvironmentProblem
    from clarke.link.opensand import entity

    link = registry.get("link", "opensand")
    with pytest.raises(EnvironmentProblem, match="OpenSAND is not installed") as e:
        link.check_environment()
    assert "Debian 12" in str(e.value) and "--link satlink" in str(e.value)
    fake_opensand(no_opensand, "8.1.0")
    entity._installed_version.cache_clear()
    with pytest.raises(EnvironmentProblem, match=r"OpenSAND 8\.1\.0 is installed"):
        link.check_environment()
    fake_opensand(no_opensand, "8.2.0")
    entity._installed_version.cache_clear()
    link.check_environment()
    assert entity.entrypoint_path() == REPO / "opensand" / "entrypoint.sh"


def test_up_refuses_lan_on_opensand_before_creating_anything(tmp_path: Path) -> None:
    """The generator's refusal, naming the fields, comes before root, OpenSAND or any
    namespace is needed (exit 2, not 3)."""
    from clarke.testbed import lifecycle
    from clarke.testbed.state import Store

    store = Store(tmp_path / "state")
    with pytest.raises(ValidationFailed) as e:
        lifecycle.up("lan", 40, "opensand", store=store)
    assert "link profile 'lan' (opensand link)" in str(e.value)
    assert any(p.startswith("forward.rate_mbps") for p in e.value.problems)
    assert not (tmp_path / "state").exists()


def test_the_entity_gets_the_plan_addresses(tmp_path: Path) -> None:
    from clarke.link.opensand.entity import OpenSandRole
    from clarke.place import Place
    from clarke.place.plan import plan

    p = plan(40)

    class NamedPlace(Place):
        """The netns testbed's interface names, without a testbed to look them up in."""

        def iface(self, network: str) -> str:
            if network == "emu":
                return "br-emu" if self.role == "satellite" else "emu"
            return "lan"

    def env_of(role: str) -> dict[str, str]:
        place = NamedPlace("netns", role, p, tmp_path / role, tmp_path / "pg", tmp_path / "pki")
        return OpenSandRole.for_place(place, REPO / "opensand" / "entrypoint.sh")._env()

    gw = env_of("gateway")
    assert gw == {
        "OPENSAND_ROLE": "gw",
        "OPENSAND_CONFIG_DIR": str(tmp_path / "gateway" / "xml"),
        "OPENSAND_RUN_DIR": str(tmp_path / "gateway" / "opensand"),
        "OPENSAND_EMU_IFACE": "emu",
        "OPENSAND_VERBOSE": "1",
        "OPENSAND_BR_ADDRESS": p.sat.cidr("gateway"),
        "OPENSAND_PEER_BR_ADDRESS": p.sat.address("terminal"),
        # the client LAN and the cross-traffic LAN behind the terminal
        "OPENSAND_REMOTE_LAN": f"{p.st_lan.prefix},{p.cross_lans['xclient'].prefix}",
        "OPENSAND_LAN_IFACE": "lan",
    }
    st = env_of("terminal")
    assert st["OPENSAND_ROLE"] == "st"
    assert st["OPENSAND_REMOTE_LAN"] == f"{p.gw_lan.prefix},{p.cross_lans['xserver'].prefix}"
    assert st["OPENSAND_PEER_BR_ADDRESS"] == p.sat.address("gateway")
    sat = env_of("satellite")
    assert sat["OPENSAND_EMU_IFACE"] == "br-emu" and "OPENSAND_BR_ADDRESS" not in sat
    # Every variable passed is one the entrypoint documents.
    header = (REPO / "opensand" / "entrypoint.sh").read_text().split("set -euo")[0]
    for name in {**gw, **st, **sat}:
        assert f"#   {name} " in header, name


def test_tap_counters_lose_the_ethernet_header() -> None:
    from clarke.link.opensand import entity

    tap = {"rx_bytes": 10420, "rx_packets": 10, "tx_bytes": 0, "tx_packets": 0}
    assert entity.ip_bytes(tap, "rx") == 10280  # ten 1028-byte IP packets
    base = {"rx_bytes": 420, "rx_packets": 5}
    assert entity.since(tap, base) == {
        "rx_bytes": 10000,
        "rx_packets": 5,
        "tx_bytes": 0,
        "tx_packets": 0,
    }
    # A device made anew since the baseline: its own counters.
    assert entity.since(tap, {"rx_bytes": 99999}) == tap
    assert entity.since(None, base) is None


def role(tmp_path: Path, name: str = "satellite", **kwargs: object):  # type: ignore[no-untyped-def]
    from clarke.link.opensand.entity import EntitySetup, LinkEnd, OpenSandRole

    end = None if name == "satellite" else LinkEnd("198.18.171.2/24", "198.18.171.1", ("a",))
    args: dict[str, object] = {
        "emu_iface": "emu",
        "config_dir": tmp_path / "etc",
        "run_dir": tmp_path / "run",
        "link_end": end,
        **kwargs,
    }
    return OpenSandRole(name, ENT, EntitySetup(**args))  # type: ignore[arg-type]


def test_role_refuses_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="must be one of terminal, satellite, gateway"):
        role(tmp_path, "gw")
    with pytest.raises(InputError, match="needs its bridge addresses"):
        role(tmp_path, "gateway", link_end=None)


def test_role_configure_refuses_before_touching_anything(tmp_path: Path) -> None:
    r = role(tmp_path)
    lan = profiles.read("lan").model_dump(by_alias=True, mode="json")
    with pytest.raises(ValidationFailed) as e:
        r.configure({"name": "lan", "profile": lan})
    assert "link profile 'lan' (opensand link)" in str(e.value)
    assert any(p.startswith("forward.rate_mbps") for p in e.value.problems)
    with pytest.raises(InputError, match='"profile"'):
        r.configure({"name": "geo"})
    bad = profiles.read("geo").model_dump(by_alias=True, mode="json")
    bad["forward"]["rate_mbps"] = -1
    with pytest.raises(ValidationFailed, match=r"forward\.rate_mbps"):
        r.configure({"name": "geo", "profile": bad})
    geo = profiles.read("geo").model_dump(by_alias=True, mode="json")
    with pytest.raises(InputError, match='"name"'):
        r.configure({"profile": geo})
    # Nothing was written or started.
    assert not (tmp_path / "etc").exists() and not (tmp_path / "run").exists()
    assert not r.alive() and r.restarts == 0
    assert r.state() == {"profile": None, "profile_sha256": None, "running": False}
    assert r.problem() is None  # nothing started, nothing died


def test_role_health_and_stats_when_not_running(tmp_path: Path) -> None:
    from clarke import __version__

    r = role(tmp_path)
    h = r.health()
    assert h["role"] == "satellite" and h["implementation"] == "opensand"
    assert h["clarke"] == __version__
    assert h["opensand"]["running"] is False and h["opensand"]["profile"] is None
    s = r.stats()
    assert s["running"] is False and s["restarts"] == 0 and s["profile"] is None
    assert "bytes_onto_link" not in s  # the satellite has no TAP
