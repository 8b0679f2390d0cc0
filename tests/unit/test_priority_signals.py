"""The browser's priority signals as a setting (issue 32): the campaign's
`browser.priority_signals`, what each value sets in Firefox, what Chromium and the HTTP
versions refuse, and the verdict on what the server saw."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from clarke.browser import prefs
from clarke.browser.load import BrowserSettings
from clarke.campaign.plan import CampaignPlan
from clarke.errors import ClarkeError
from clarke.results.objects import signals_received, signals_verdict
from clarke.vocab import Browser, HttpVersion
from helpers import plan_of, server_connections


def _plan(tmp_path: Path, http: str, browsers: str, signals: str) -> CampaignPlan:
    return plan_of(
        tmp_path,
        f"browser:\n  priority_signals: {signals}\n",
        http=http,
        models="[triangular]",
        browser=browsers,
    )


def test_each_setting_sets_firefoxs_preferences() -> None:
    def layered(signals: str) -> dict[str, object]:
        return prefs.layered("2", "h", 443, 6, signals=signals)

    default, none, tree = layered("default"), layered("none"), layered("rfc7540-tree")
    assert "network.http.priority_header.enabled" not in default
    assert none["network.http.priority_header.enabled"] is False
    assert none["network.http.http3.priority"] is False
    assert none["network.http.http2.enabled.deps"] is False
    assert tree["network.http.priority_header.enabled"] is False
    assert tree["network.http.http2.enabled.deps"] is True
    # A user's override still wins (the last layer).
    over = prefs.layered(
        "2", "h", 443, 6, {"network.http.http2.enabled.deps": False}, signals="rfc7540-tree"
    )
    assert over["network.http.http2.enabled.deps"] is False
    with pytest.raises(ValueError, match="unknown priority signals"):
        prefs.priority_signals("loud")


def test_a_campaign_refuses_what_the_browsers_cannot_send(tmp_path: Path) -> None:
    _plan(tmp_path, "[2, 3]", "[firefox]", "none")
    _plan(tmp_path, "[2]", "[firefox]", "rfc7540-tree")
    with pytest.raises(ClarkeError, match=r"rfc7540-tree is an HTTP/2 dependency tree.*HTTP/3"):
        _plan(tmp_path, "[2, 3]", "[firefox]", "rfc7540-tree")
    with pytest.raises(ClarkeError, match="Chromium has no switch for the priority signals"):
        _plan(tmp_path, "[2]", "[firefox, chromium]", "none")
    with pytest.raises(ClarkeError, match=r"'default', 'none' or 'rfc7540-tree' \(got 'quiet'\)"):
        _plan(tmp_path, "[2]", "[firefox]", "quiet")


def test_a_load_request_refuses_them_too() -> None:
    BrowserSettings(http=HttpVersion.h3, priority_signals="none")
    with pytest.raises(ValidationError, match="not for HTTP/3"):
        BrowserSettings(http=HttpVersion.h3, priority_signals="rfc7540-tree")
    with pytest.raises(ValidationError, match="Chromium has no switch"):
        BrowserSettings(http=HttpVersion.h2, browser=Browser.chromium, priority_signals="none")


def _conn(priorities: list[str | None], frames: int = 0, updates: int = 0) -> dict[str, object]:
    return {
        "signals": {"rfc7540_headers": 9, "rfc7540_frames": frames, "priority_updates": updates},
        "exchanges": [{"priority": p} for p in priorities],
    }


def test_the_verdict_names_what_the_server_saw_against_the_setting() -> None:
    def verdict(asked: str, conn: dict[str, object]) -> str:
        return signals_verdict(asked, signals_received(server_connections([conn]), asked))

    assert verdict("none", _conn([None, None])) == ""
    assert "Priority headers {'u=4, i': 1}" in verdict("none", _conn([None, "u=4, i"]))
    assert "2 PRIORITY_UPDATE frames" in verdict("none", _conn([None], updates=2))
    assert verdict("rfc7540-tree", _conn([None], frames=6)) == ""
    assert "no RFC 7540 PRIORITY frame" in verdict("rfc7540-tree", _conn([None]))
    assert verdict("default", _conn(["u=0, i"], updates=3)) == ""
    # A server that records no signals (OpenLiteSpeed): nothing to judge, and it says so.
    unobserved = signals_received(server_connections([{"exchanges": []}]), "none")
    assert unobserved.observed is False and signals_verdict("none", unobserved) == ""


def test_the_browsers_settings_are_tags_and_export_columns_not_dimensions() -> None:
    """Loads made with other isolation or signals are never grouped together: each load's
    point is tagged with them (as with its engine), and the export has their columns; a
    record from before they were kept has neither tag."""
    from clarke.results.details import ConnectionRow, IsolationCheck, PrioritySignals
    from clarke.results.export import rows
    from clarke.results.influx import connection_points, tags_of, to_line
    from helpers import record

    old = record(0)
    assert "isolation=" not in to_line(old) and "priority_signals=" not in to_line(old)
    new = record(1)
    new.details.isolation = IsolationCheck(mode="context")
    new.details.priority_signals = PrioritySignals(asked="rfc7540-tree")
    tags = tags_of(new)
    assert (tags["engine"], tags["isolation"], tags["priority_signals"]) == (
        "selenium",
        "context",
        "rfc7540-tree",
    )
    assert ",isolation=context," in to_line(new), to_line(new)
    assert ",priority_signals=rfc7540-tree," in to_line(new), to_line(new)
    assert "run_id=lan-h2-bbr-uniform-100k-r2," in to_line(new)  # not in the run id
    new.details.per_connection = [ConnectionRow(id=1, protocol="h2", requests=3)]
    (conn,) = connection_points([new])
    assert ",isolation=context," in conn.to_line_protocol(), conn.to_line_protocol()
    columns, table = rows([old, new])
    assert {"isolation", "priority_signals"} <= set(columns)
    assert [(r["isolation"], r["priority_signals"]) for r in table] == [
        ("", ""),
        ("context", "rfc7540-tree"),
    ]
