"""The campaign loop, where it checks the link and the load verdicts, with a fake session:
no root, no browser. The fake keeps what a real testbed keeps (the profile and the
congestion control in force) and applies only what differs, as the agents do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clarke.campaign.dimensions import Cell
from clarke.campaign.plan import Run
from clarke.contract import LinkState, ServerStats
from clarke.errors import ClarkeError
from clarke.results.journal import Journal
from clarke.results.meta import LinkCheckRecord
from clarke.results.record import RunRecord, Status
from clarke.results.station_records import LinkRoleStats
from clarke.run.loop import loop
from clarke.run.loop.link_checks import LinkCheck, with_link_checks
from clarke.run.loop.loop import LoopSettings, RecordContext, execute, finished
from clarke.run.session.verdicts import ServerVerdict, link_overhead, link_verdict, server_verdict
from helpers import FakeSession

CTX = RecordContext("t", "t-1", "selenium", "abc")


def runs(*profiles: str, reps: int = 1) -> list[Run]:
    out = []
    for profile in profiles:
        for rep in range(1, reps + 1):
            i = len(out)
            cell = Cell.parse({"profile": profile, "http": "2", "cc": "bbr", "model": "uniform",
                               "size": "100k", "connections": 6})  # fmt: skip
            out.append(Run(i, f"{profile}-h2-bbr-uniform-100k-r{rep}", cell, rep))
    return out


class Seen:
    """An observer that notes which runs finished (the progress counter) or were
    skipped."""

    def __init__(self) -> None:
        self.final: list[str] = []
        self.skips: list[str] = []

    def skipped(self, run: Run) -> None:
        self.skips.append(run.run_id)

    def checking(self, check: LinkCheck) -> None: ...
    def checked(self, check: LinkCheck, result: LinkCheckRecord) -> None: ...
    def loading(self, run: Run, attempt: int) -> None: ...

    def recorded(self, record: RunRecord, final: bool) -> None:
        if final:
            self.final.append(record.run_id)


def run_all(tmp_path: Path, plan: list[Run], session: FakeSession, retries: int = 2):  # type: ignore[no-untyped-def]
    journal = Journal.in_dir(tmp_path)
    done, _, _ = finished(journal, retries)
    seen = Seen()
    with journal:
        skipped = [r for r in plan if r.run_id in done]
        settings = LoopSettings(retries, observer=seen, skipped=skipped)
        out = execute(with_link_checks(plan, done), session, journal, CTX, settings)
    return out, seen, list(Journal.in_dir(tmp_path).records())


# --- the link checks --------------------------------------------------------------------------


def test_every_profile_is_checked_before_its_first_and_after_its_last_run() -> None:
    plan = runs("lan", "geo", reps=2)
    steps = with_link_checks(plan, done=set())
    assert steps == [
        LinkCheck("lan", "before"), plan[0], plan[1], LinkCheck("lan", "after"),
        LinkCheck("geo", "before"), plan[2], plan[3], LinkCheck("geo", "after"),
    ]  # fmt: skip


def test_resume_checks_only_what_is_left() -> None:
    plan = runs("lan", "geo", reps=2)
    # lan done; geo half done: checked again around what is left.
    steps = with_link_checks(plan, done={plan[0].run_id, plan[1].run_id, plan[2].run_id})
    assert steps == [LinkCheck("geo", "before"), plan[3], LinkCheck("geo", "after")]
    # Everything done, and stopped before lan's after check: that check alone.
    all_done = {r.run_id for r in plan}
    checked = {("lan", "before"), ("geo", "before"), ("geo", "after")}
    assert with_link_checks(plan, all_done, checked) == [LinkCheck("lan", "after")]
    assert with_link_checks(plan, all_done) == []
    # A profile that comes back later in the plan gets a pair for each stretch.
    back = runs("lan", "geo", "lan")
    assert [str(s) for s in with_link_checks(back, set()) if isinstance(s, LinkCheck)] == [
        str(LinkCheck(p, ph)) for p in ("lan", "geo", "lan") for ph in ("before", "after")
    ]


# --- the loop --------------------------------------------------------------------------


def test_each_change_is_applied_once(tmp_path: Path) -> None:
    plan = runs("lan", "geo", reps=3)
    session = FakeSession()
    out, seen, records = run_all(tmp_path, plan, session)
    assert session.applied == [("profile", "lan"), ("cc", "bbr"), ("profile", "geo")]
    assert session.events[0] == "before lan" and session.events[4] == "after lan"
    assert [c.phase for c in out.checks] == ["before", "after", "before", "after"]
    assert seen.final == [r.run_id for r in plan]
    assert all(r.status is Status.ok and r.profile_sha256 == "f" * 64 for r in records)


def test_a_failed_load_is_retried_and_counted_once(tmp_path: Path) -> None:
    plan = runs("lan", reps=2)
    session = FakeSession({plan[0].run_id: ["fail", "fail", "ok"], plan[1].run_id: ["fail"] * 3})
    out, seen, records = run_all(tmp_path, plan, session, retries=2)
    assert [(r.run_id, r.attempt, r.status.value) for r in records] == [
        (plan[0].run_id, 1, "failed"), (plan[0].run_id, 2, "failed"), (plan[0].run_id, 3, "ok"),
        (plan[1].run_id, 1, "failed"), (plan[1].run_id, 2, "failed"), (plan[1].run_id, 3, "failed"),
    ]  # fmt: skip
    assert seen.final == [plan[0].run_id, plan[1].run_id]  # the progress counts each run once
    assert records[0].reason == "asked for h2, fell back to http/1.1"


def test_infrastructure_failures_do_not_use_up_retries(tmp_path: Path) -> None:
    plan = runs("lan")
    session = FakeSession({plan[0].run_id: ["down", "down", "fail", "ok"]})
    out, seen, records = run_all(tmp_path, plan, session, retries=1)
    assert [r.status.value for r in records] == ["failed", "failed", "failed", "ok"]
    assert [r.details.infrastructure for r in records] == [True, True, False, False]
    assert "ConnectError" in records[0].reason
    assert seen.final == [plan[0].run_id]


def test_a_vanished_testbed_stops_the_campaign_and_resume_finishes_it(tmp_path: Path) -> None:
    plan = runs("lan", reps=3)
    session = FakeSession({plan[1].run_id: ["down", "down", "down"]})
    with pytest.raises(loop.TestbedGone, match="failed 3 times in a row"):
        run_all(tmp_path, plan, session)
    records = list(Journal.in_dir(tmp_path).records())
    assert [r.run_id for r in records] == [plan[0].run_id] + [plan[1].run_id] * 3
    # Resumed on a working testbed: the finished run is skipped, the others run once,
    # the attempt numbers continue.
    again = FakeSession()
    out, seen, records = run_all(tmp_path, plan, again)
    assert out.skipped == 1 and seen.skips == [plan[0].run_id]
    assert [(r.run_id, r.attempt) for r in out.done] == [(plan[1].run_id, 4), (plan[2].run_id, 1)]
    assert again.events == [
        "before lan",
        f"load {plan[1].run_id} ok",
        f"load {plan[2].run_id} ok",
        "after lan",
    ]
    done, _, _ = finished(Journal.in_dir(tmp_path), retries=2)
    assert done == {r.run_id for r in plan}


def test_a_failed_link_check_is_recorded_not_fatal(tmp_path: Path) -> None:
    class BadLink(FakeSession):
        def check_link(self, profile: str, phase: str, level: str) -> LinkCheckRecord:
            raise ClarkeError("iperf3 printed no JSON")

    out, seen, records = run_all(tmp_path, runs("lan"), BadLink())
    assert [c.error for c in out.checks] == ["Error: iperf3 printed no JSON"] * 2
    assert [r.status for r in records] == [Status.ok]


# --- the verdicts ----------------------------------------------------------------------


def test_link_verdict_names_what_the_link_runs() -> None:
    lan = LinkState(profile="lan", profile_sha256="a" * 64)
    good = {r: lan for r in ("satellite", "terminal")}
    assert link_verdict("lan", "a" * 64, good) == ""
    bad = good | {"terminal": LinkState(profile="geo", profile_sha256="b" * 64)}
    reason = link_verdict("lan", "a" * 64, bad)
    assert reason.startswith("the link does not run profile lan") and "terminal geo" in reason
    # Same name, other content (an edited profile file): also refused.
    assert link_verdict("lan", "c" * 64, good)


def verdict(stats: dict[str, Any], *asked: Any) -> ServerVerdict:
    """server_verdict of the server's /stats `stats`."""
    return server_verdict(ServerStats.model_validate(stats), *asked)


def test_server_verdict() -> None:
    conn = {"requests": 9, "cc": "bbr", "protocol": "h2", "wire_bytes_sent": 110_000,
            "ip_bytes_estimate": 120_000, "app_bytes_sent": 105_000}  # fmt: skip
    ok = verdict({"connections": [conn]}, "2", "bbr", 100_000, 9, 6)
    assert ok.failure == "" and ok.metrics["overhead"] == pytest.approx(0.1)
    assert verdict({"connections": [conn]}, "3", "bbr", 100_000, 9, 6).failure == (
        "server saw h2 on 1 of 1 connections, asked for h3"
    )
    assert (
        "asked for newreno"
        in verdict(
            {"connections": [conn | {"protocol": "h3", "cc": "cubic"}]}, "3", "reno", 100_000, 9, 6
        ).failure
    )
    assert verdict({"connections": [conn]}, "2", "bbr", 100_000, 8, 6).failure == (
        "server answered 9 requests, the page has 8"
    )
    assert verdict({}, "2", "bbr", 1, 1, 6).failure == "the server saw no request for the page"
    # OpenLiteSpeed says where a connection's cc came from: "configured" is no measurement
    measured = conn | {"cc_source": "kernel"}
    guessed = conn | {"cc_source": "configured"}
    assert verdict({"connections": [measured]}, "2", "bbr", 100_000, 9, 6).failure == ""
    assert verdict(
        {"connections": [measured, guessed | {"requests": 0}]}, "2", "bbr", 100_000, 9, 6
    ).failure == ""  # fmt: skip
    assert verdict(
        {"connections": [measured | {"requests": 4}, guessed | {"requests": 5}]},
        "2", "bbr", 100_000, 9, 6,
    ).failure == (
        "the server could not measure the congestion control of 1 of 2 connections "
        "(only configured: bbr)"
    )  # fmt: skip
    # A browser that opened more connections than the limit (Firefox's backup connection
    # on a slow handshake) measured another configuration.
    h1 = {"cc": "cubic", "protocol": "h1", "app_bytes_sent": 1}
    two = {"connections": [h1 | {"requests": 5}, h1 | {"requests": 4}]}
    assert verdict(two, "1.1", "cubic", 100_000, 9, 2).failure == ""
    assert verdict(two, "1.1", "cubic", 100_000, 9, 1).failure == (
        "requests came on 2 connections, the limit was 1 per server"
    )
    idle_backup = {"connections": [h1 | {"requests": 9}, h1 | {"requests": 0}]}
    assert verdict(idle_backup, "1.1", "cubic", 100_000, 9, 1).failure == ""


def test_link_overhead_from_the_links_own_counters() -> None:
    # satlink: the gateway counts what it puts on the link towards the client, the
    # terminal what it puts on towards the server; the satellite counts nothing.
    stats = {
        "gateway": {"bytes_onto_link": {"forward": 110_000}},
        "satellite": {},
        "terminal": {"bytes_onto_link": {"return": 5_000}},
    }
    got = link_overhead(links(stats), 100_000)
    assert got == pytest.approx({
        "link_bytes_forward": 110_000, "link_bytes_return": 5_000,
        "link_overhead": 0.15, "link_overhead_forward": 0.10, "link_overhead_return": 0.05,
    })  # fmt: skip
    # One direction uncounted (a stopped role), or no page bytes: no figure at all.
    assert link_overhead(links({"gateway": stats["gateway"], "terminal": {}}), 100_000) == {}
    assert link_overhead(links(stats), 0) == {}


def links(stats: dict[str, dict[str, Any]]) -> dict[str, LinkRoleStats]:
    return {role: LinkRoleStats.model_validate(s) for role, s in stats.items()}
