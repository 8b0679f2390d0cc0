"""The server's initial congestion window as a campaign dimension (issue 50, [M] Table 5):
its values, run ids, the server that has no such setting refused at plan time, the
agent contract's field, and how a load's connections are judged against it
(campaign/initial_window.py). The loads themselves: tests/integration/test_load.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from clarke import registry
from clarke.campaign.dimensions import INITIAL_WINDOW
from clarke.campaign.initial_window import in_force
from clarke.campaign.plan import CampaignPlan
from clarke.contract import ServerConfig
from clarke.errors import ClarkeError, ValidationFailed
from helpers import plan_of

GEO = {"profiles": "[geo]", "http": "[2, 3]", "cc": "[cubic]"}


def _plan(tmp_path: Path, windows: str) -> CampaignPlan:
    return plan_of(tmp_path, **GEO, initial_window=windows)


def test_a_window_axis_gives_a_cell_each_and_says_so_in_run_ids(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "[default, 3, 32]")
    ids = [r.run_id for r in plan.runs]
    assert ids == [
        "geo-h2-cubic-uniform-100k-iwdefault-r1",
        "geo-h2-cubic-uniform-100k-iw3-r1",
        "geo-h2-cubic-uniform-100k-iw32-r1",
        "geo-h3-cubic-uniform-100k-iwdefault-r1",
        "geo-h3-cubic-uniform-100k-iw3-r1",
        "geo-h3-cubic-uniform-100k-iw32-r1",
    ], ids
    assert [r.cell[INITIAL_WINDOW] for r in plan.runs[:3]] == ["default", "3", "32"]
    # A campaign without the axis keeps its run ids as they were, at the default.
    run = plan_of(tmp_path, **GEO).runs[0]
    assert run.run_id == "geo-h2-cubic-uniform-100k-r1" and run.cell[INITIAL_WINDOW] == "default"


@pytest.mark.parametrize("bad", ["[0]", "[101]", "[ten]", "[3.5]", "[-1]"])
def test_a_window_out_of_range_is_refused_with_the_allowed_values(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ClarkeError) as e:
        _plan(tmp_path, bad)
    assert "initial_window" in str(e.value), str(e.value)


def test_a_server_without_the_setting_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """OpenLiteSpeed has no initial-window setting: a campaign that varies it is refused
    at plan time, naming the field, the value and the server; origin takes it."""
    cells = [r.cell for r in _plan(tmp_path, "[default, 3]").runs]
    ols, origin = registry.get("server", "openlitespeed"), registry.get("server", "origin")
    registry.check_supported(cells, [origin], "c.yaml")
    with pytest.raises(ValidationFailed) as e:
        registry.check_supported(cells, [ols], "c.yaml")
    said = str(e.value)
    assert "initial_window: 3" in said and "openlitespeed" in said, said
    # Its default (the server's own window) runs anywhere.
    default_only = [r.cell for r in _plan(tmp_path, "[default]").runs]
    registry.check_supported(default_only, [ols], "c.yaml")


def test_the_agent_contract_carries_the_window_as_the_server_setting() -> None:
    assert ServerConfig.model_validate({"initial_window": "3"}).body() == {"initial_window": "3"}
    with pytest.raises(ValueError):
        ServerConfig.model_validate({"initial_window": "0"})


def test_each_connection_is_judged_in_its_own_unit() -> None:
    """TCP's window in segments (TCP_INFO at accept), QUIC's in bytes (a full datagram's
    payload each); a connection with no figure fails, as does another figure."""
    h2 = {"id": 4, "protocol": "h2", "initial_cwnd_segments": 3}
    h3 = {"id": 5, "protocol": "h3", "initial_window_bytes": 3 * 1472}
    assert in_force("3", h2) is None and in_force("3", h3) is None
    assert in_force("default", {"id": 6, "protocol": "h2"}) is None
    assert in_force("4", h2) == (
        "initial window: the server's connection 4 started with an initial window of "
        "3 segments, not 4"
    )
    assert in_force("3", {"id": 7, "protocol": "h3", "initial_window_bytes": 14720}) == (
        "initial window: the server's connection 7 started with an initial window of "
        "14720 bytes, not 4416"
    )
    assert "started with no initial window" in (in_force("3", {"id": 8, "protocol": "h2"}) or "")


def test_a_tcp_connection_whose_handshake_was_retransmitted_may_start_with_one_segment() -> None:
    """After two SYN-ACK retransmissions Linux starts with one segment whatever the
    route says (RFC 5681, 3.1): the cell's load, not a failed setting. One retransmission
    leaves the window alone, so one segment then is still a failure."""
    fell_back = {"id": 9, "protocol": "h1", "initial_cwnd_segments": 1, "handshake_retransmits": 2}
    assert in_force("32", fell_back) is None
    once = fell_back | {"handshake_retransmits": 1}
    assert "started with an initial window of 1 segments, not 32" in (in_force("32", once) or "")
    unknown = {"id": 9, "protocol": "h1", "initial_cwnd_segments": 1}
    assert in_force("32", unknown) is not None
    assert in_force("32", fell_back | {"initial_cwnd_segments": 4}) is not None


def test_its_option_tag_journal_field_and_dashboard_variable_come_from_the_declaration(
    run_cli,  # type: ignore[no-untyped-def]
) -> None:
    """Nothing but the declaration names it for `clarke load --help`, the journal, the
    InfluxDB tags and the trends dashboard's variables."""
    import json

    from clarke.results.influx import to_line
    from helpers import record

    code, out, _ = run_cli("load", "--help")
    assert code == 0 and "--initial-window" in out and "[M] Table 5" in " ".join(out.split())
    from clarke.results.record import RunRecord

    written = json.loads(record(0).model_dump_json())
    rec = RunRecord.model_validate(written | {"initial_window": "3", "run_id": "iw3"})
    assert json.loads(rec.model_dump_json())["initial_window"] == "3"
    assert ",initial_window=3," in to_line(rec) or ",initial_window=3 " in to_line(rec)
    trends = Path(__file__).parents[2] / "dashboards" / "json" / "nightly-trends.json"
    names = [v["name"] for v in json.loads(trends.read_text())["templating"]["list"]]
    assert "initial_window" in names, names
