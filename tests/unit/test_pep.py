"""PEPs without a testbed: the campaign's pep axis, the stations' configuration, and the
verdict that proves (or refutes) a split from what the server and the proxies saw."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from clarke import pep_presets, profiles, registry
from clarke.agent.pep_slot import PepSlot
from clarke.campaign.dimensions import CC, HTTP, PEP, PROFILE, Cell
from clarke.campaign.plan import plan_file
from clarke.contract import PepConfig
from clarke.errors import ClarkeError, InputError, ValidationFailed
from clarke.pep import parse_settings
from clarke.pep.pepsal import parse_log
from clarke.place import Place
from clarke.place.plan import plan
from clarke.run.session.pep import hop_buffer_bytes, pep_body
from clarke.vocab import PepImplementation
from helpers import pep_verdict_of

CAMPAIGN = {
    "name": "t",
    "matrix": {
        "profiles": ["geo"],
        "http": [2, 3],
        "cc": ["cubic"],
        "models": ["uniform"],
        "sizes": ["1m"],
    },
    "repetitions": 1,
}
P = plan(5)
CLIENT, GATEWAY = P.addresses["client"], P.addresses["gateway"]
TERMINAL_SAT = P.sat.address("terminal")


def _write(tmp_path: Path, **matrix: Any) -> Path:
    doc = yaml.safe_load(yaml.safe_dump(CAMPAIGN))
    doc["matrix"].update(matrix)
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


def test_the_pep_axis_names_runs_and_cells(tmp_path: Path) -> None:
    runs = plan_file(_write(tmp_path, pep=["none", "splittcp"])).runs
    assert [r.run_id for r in runs] == [
        "geo-h2-cubic-uniform-1m-none-r1",
        "geo-h2-cubic-uniform-1m-splittcp-r1",
        "geo-h3-cubic-uniform-1m-none-r1",
        "geo-h3-cubic-uniform-1m-splittcp-r1",
    ]
    assert [r.cell[PEP] for r in runs] == ["none", "splittcp", "none", "splittcp"]
    assert len({r.cell for r in runs}) == 4 and runs[1].cell[PEP] == "splittcp"
    # Without the axis, run ids are as they always were, and no run has a PEP.
    runs = plan_file(_write(tmp_path)).runs
    assert [r.run_id for r in runs] == [
        "geo-h2-cubic-uniform-1m-r1",
        "geo-h3-cubic-uniform-1m-r1",
    ]
    assert {r.cell[PEP] for r in runs} == {"none"}


def test_bad_pep_values_exit_2_naming_the_field_and_the_choices(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    f = _write(tmp_path, pep=["none", "squid"])
    code, _, err = run_cli("campaign", "validate", str(f))
    assert code == 2, err
    assert "matrix.pep[1]: unknown PEP 'squid'; allowed: none, accelerated, pepsal, splittcp" in err
    assert "Traceback" not in err
    f = _write(tmp_path, pep=["splittcp", "splittcp"])
    code, _, err = run_cli("campaign", "validate", str(f))
    assert code == 2 and "matrix.pep" in err and "listed more than once" in err, err


def test_the_pep_axis_takes_the_presets_in_peps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pep dimension's values are the preset files' names (like link profiles), not
    the registry's implementations: a preset added to peps/ is a value at once."""
    assert PEP.names is not None and tuple(PEP.names()) == pep_presets.names()
    f = _write(tmp_path, pep=["accelerated", "turbo"])
    with pytest.raises(ValidationFailed, match=r"matrix\.pep\[1\]: unknown PEP 'turbo'"):
        plan_file(f)
    presets = tmp_path / "peps"
    presets.mkdir()
    for name in pep_presets.available():
        (presets / f"{name}.yaml").write_text(
            (pep_presets.preset_dir() / f"{name}.yaml").read_text()
        )
    (presets / "turbo.yaml").write_text((pep_presets.preset_dir() / "accelerated.yaml").read_text())
    monkeypatch.setattr(pep_presets, "preset_dir", lambda: presets)
    assert [r.cell[PEP] for r in plan_file(f).runs][:2] == ["accelerated", "turbo"]


def test_a_preset_names_an_implementation_of_the_registry() -> None:
    assert {i.value for i in PepImplementation} == set(registry.names("pep"))
    for name in pep_presets.available():
        assert pep_presets.read(name).implementation in registry.names("pep")


def test_the_shipped_pep_campaign() -> None:
    runs = plan_file(Path("campaigns/pep-geo.yaml")).runs
    assert {(r.cell[HTTP], r.cell[PEP]) for r in runs} == {
        (h, p) for h in ("1.1", "2", "3") for p in ("none", "splittcp", "accelerated")
    }
    assert {r.cell[PROFILE] for r in runs} == {"geo"}
    assert {r.cell[CC] for r in runs} == {"cubic", "bbr"}
    sizes = ("100k", "500k", "1m", "2m")
    assert {r.page for r in runs} == {f"uniform-{s}" for s in sizes}
    assert len(runs) == 3 * 2 * 4 * 3 * 5


def test_load_refuses_an_unknown_pep(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli("load", "--pep", "squid")
    assert code == 2 and "none" in err and "splittcp" in err and "accelerated" in err, err


def test_settings_are_checked() -> None:
    """The contract's PepSettings (clarke.contract), as a station's PEP reads them."""
    zero = {"forward": 0, "return": 0}
    assert parse_settings({}).body() == {
        "preset": "", "mode": "split", "hop_cc": "cubic", "hop_buffer_bytes": 0,
        "hop_initial_window": zero, "hop_max_pacing_rate": zero,
        "pool_size": 0, "pool_max_opening": 1, "pool_spare": 0,
    }  # fmt: skip
    assert parse_settings({"hop_cc": "bbr", "hop_buffer_bytes": 1 << 20}).hop_cc == "bbr"
    # A direction not given keeps the kernel's window.
    window = parse_settings({"hop_initial_window": {"forward": 10}}).hop_initial_window
    assert (window.of("forward"), window.of("return")) == (10, 0)
    with pytest.raises(InputError, match="mode: Input should be 'split' or 'accelerated'"):
        parse_settings({"mode": "turbo"})
    with pytest.raises(InputError, match=r"hop_initial_window\.forward: .* greater than or equal"):
        parse_settings({"hop_initial_window": {"forward": -1, "return": 0}})
    with pytest.raises(InputError, match=r"hop_initial_window\.return: .* less than or equal"):
        parse_settings({"hop_initial_window": {"forward": 0, "return": 70_000}})
    with pytest.raises(InputError, match="pool_size"):
        parse_settings({"pool_size": 1000})
    with pytest.raises(InputError, match="hop_cc: Input should be 'cubic', 'bbr' or 'reno'"):
        parse_settings({"hop_cc": "vegas"})
    with pytest.raises(InputError, match="hop_buffer_bytes"):
        parse_settings({"hop_buffer_bytes": -1})
    with pytest.raises(InputError, match="hop_buffer_bytes"):
        parse_settings({"hop_buffer_bytes": True})
    with pytest.raises(InputError, match="window: unknown field"):
        parse_settings({"window": 3})


def test_the_hop_buffers_cover_the_bdp() -> None:
    geo = profiles.read("geo")
    # 10 Mb/s over ~550 ms is ~690 kB in flight; twice that, so no window caps the hop.
    assert 1_300_000 < hop_buffer_bytes(geo) < 1_500_000
    assert pep_body("none", "bbr", geo).body() == {"name": "none"}
    assert pep_body("splittcp", "bbr", geo).hop_cc == "bbr"


def _place(role: str, substrate: str = "netns") -> Place:
    return Place(substrate, role, P, Path("/nonexistent"), Path("/nonexistent"), Path("/x"))


def test_a_station_refuses_unknown_peps_and_peps_on_compose() -> None:
    slot = PepSlot(_place("terminal"))
    with pytest.raises(InputError, match="unknown PEP 'squid'; allowed: none, splittcp, pepsal"):
        slot.configure(PepConfig(name="squid"))
    assert slot.configure(PepConfig(name="none"))["applied"] is False
    assert slot.stats() == {"pep": "none"}
    with pytest.raises(InputError, match="netns substrate only"):
        PepSlot(_place("gateway", "compose")).configure(PepConfig(name="splittcp"))
    with pytest.raises(ClarkeError, match="not at the server"):
        PepSlot(_place("server"))


def _conn(peer: str) -> dict[str, Any]:
    return {"peer": f"{peer}:40000", "requests": 3}


def _station(pep: str, accepted: int, from_: str, relayed_from: str) -> dict[str, Any]:
    conns = [
        {"accepted_from": f"{from_}:{5000 + i}", "relayed_from": f"{relayed_from}:{6000 + i}"}
        for i in range(accepted)
    ]
    return {
        "pep": pep,
        "accepted": accepted,
        "relayed": accepted,
        "failed": 0,
        "connections": conns,
    }


def _split(n: int = 1) -> dict[str, dict[str, Any]]:
    return {
        "terminal": _station("splittcp", n, CLIENT, TERMINAL_SAT),
        "gateway": _station("splittcp", n, TERMINAL_SAT, GATEWAY),
    }


def test_a_split_load_passes() -> None:
    assert pep_verdict_of("splittcp", "2", [_conn(GATEWAY)], _split(), P) == ""
    assert pep_verdict_of("splittcp", "1.1", [_conn(GATEWAY)] * 2, _split(2), P) == ""


def test_tcp_that_reached_the_server_from_the_client_was_not_split() -> None:
    why = pep_verdict_of("splittcp", "2", [_conn(CLIENT)], _split(), P)
    assert "TCP was not split" in why and CLIENT in why and GATEWAY in why


def test_too_few_intercepted_connections_fail() -> None:
    stations = _split()
    stations["terminal"] = _station("splittcp", 0, CLIENT, TERMINAL_SAT)
    why = pep_verdict_of("splittcp", "2", [_conn(GATEWAY)], stations, P)
    assert "intercepted 0 at the terminal and 1 at the gateway" in why


def test_failed_relays_and_the_wrong_pep_fail() -> None:
    stations = _split()
    stations["gateway"]["failed"] = 2
    assert "failed to relay" in pep_verdict_of("splittcp", "2", [_conn(GATEWAY)], stations, P)
    stations = _split()
    stations["gateway"]["pep"] = "none"
    why = pep_verdict_of("splittcp", "2", [_conn(GATEWAY)], stations, P)
    assert why == "asked for PEP splittcp, but gateway runs none"


def test_quic_must_pass_untouched() -> None:
    none = {r: {"pep": "none"} for r in ("terminal", "gateway")}
    assert pep_verdict_of("splittcp", "3", [_conn(CLIENT)], _split(0), P) == ""
    assert "QUIC passed a PEP" in pep_verdict_of("splittcp", "3", [_conn(GATEWAY)], _split(0), P)
    assert pep_verdict_of("none", "2", [_conn(CLIENT)], none, P) == ""
    assert "no PEP was asked for" in pep_verdict_of("none", "2", [_conn(GATEWAY)], none, P)


def test_a_transparent_pep_is_judged_by_its_own_counts() -> None:
    """pepsal connects from the client's address: the server sees the client, and the
    interception at each station must have handed it the connections (its syn table
    may already have dropped them)."""
    stations = {
        r: {"pep": "pepsal", "accepted": 2, "connections": []} for r in ("terminal", "gateway")
    }
    assert pep_verdict_of("pepsal", "2", [_conn(CLIENT)] * 2, stations, P) == ""
    stations["gateway"]["accepted"] = 1
    why = pep_verdict_of("pepsal", "2", [_conn(CLIENT)] * 2, stations, P)
    assert "TCP was not split" in why and "1 at the gateway" in why


def test_pepsal_syn_table_dump() -> None:
    text = (
        "=== [Tue Nov 25 05:00:00 2026 ===\n"
        "[1] Proxy 0:0:0:0:0:ffff:c612:1402:40000 <-> 0:0:0:0:0:ffff:c612:1602:443\n"
        "    Status: PST_CLOSED\n=== [Tue Nov 25 05:00:10 2026 ===\n"
        "[1] Proxy 0:0:0:0:0:ffff:c612:1402:40002 <-> 0:0:0:0:0:ffff:c612:1602:443\n"
        "    Status: PST_OPEN\n    SYN received: Tue Nov 25 05:00:09 2026\n"
        "[2] Proxy 0:0:0:0:0:ffff:c612:1402:40004 <-> 0:0:0:0:0:ffff:c612:1602:443\n"
        "    Status: PST_PENDING\n"
    )
    assert parse_log(text) == [
        {
            "accepted_from": "198.18.20.2:40002",
            "destination": "198.18.22.2:443",
            "status": "PST_OPEN",
        },
        {
            "accepted_from": "198.18.20.2:40004",
            "destination": "198.18.22.2:443",
            "status": "PST_PENDING",
        },
    ]


def test_a_pep_campaign_on_compose_is_refused_before_anything_runs(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli(
        "run", "campaigns/pep-geo.yaml", "--substrate", "compose", "--results", str(tmp_path / "r")
    )
    assert code == 2 and "PEPs run on the netns substrate only" in err, err
    assert not (tmp_path / "r").exists()


def test_the_console_summary_shows_the_pep() -> None:
    from rich.console import Console

    from clarke.results.summary import CellSummary, MetricStats
    from clarke.run.loop.console import print_summary

    key = Cell.parse({"profile": "geo", "http": "2", "cc": "cubic", "model": "uniform",
                      "size": "1m", "connections": 6, "pep": "splittcp"})  # fmt: skip
    cell = CellSummary(key, 3, 0, {"plt_ms": MetricStats(3, 5000.0, 5000.0, 4900.0, 5100.0)})
    console = Console(width=200, record=True)
    print_summary([cell], "t", console)
    assert "splittcp" in console.export_text()


def test_a_server_that_names_no_peers_leaves_the_peps_own_counts() -> None:
    anonymous = [{"requests": 3}]
    none = {r: {"pep": "none"} for r in ("terminal", "gateway")}
    assert pep_verdict_of("none", "2", anonymous, none, P) == ""
    assert pep_verdict_of("splittcp", "2", anonymous, _split(), P) == ""
    stations = _split()
    stations["terminal"] = _station("splittcp", 0, CLIENT, TERMINAL_SAT)
    assert "TCP was not split" in pep_verdict_of("splittcp", "2", anonymous, stations, P)
