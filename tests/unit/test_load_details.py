"""A record's details as models (results/details.py): a part writes the keys it was given,
in the order given, so a journal line is the one the dicts they replace wrote; records of
every recorded journal read back and write their details as they were; a record written
before a part existed reads it as absent, and a key no part knows is kept."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from clarke.browser.load import LoadResult
from clarke.campaign import dimensions
from clarke.campaign.plan import plan_file
from clarke.contract import ServerStats
from clarke.results.details import IsolationCheck, LinkInForce, LoadDetails, PhasesMs, Timeline
from clarke.results.record import RunRecord, Status
from clarke.results.server_records import ServerConnection
from clarke.run.loop import loop
from helpers import record

DATA = Path("tests/data")


def test_a_part_writes_the_keys_it_was_given_in_the_order_given() -> None:
    built = Timeline(step_index=2, schedule_id="x")
    built.link_time_s = 1.5
    assert built.model_dump_json() == '{"step_index":2,"schedule_id":"x","link_time_s":1.5}'
    built.step_index = 3  # set again: keeps its place, as in a dict
    assert list(built.written()) == ["step_index", "schedule_id", "link_time_s"]
    assert Timeline().model_dump_json() == "{}"  # nothing set, nothing written
    read = Timeline.model_validate_json('{"slot_phase_s":0.5,"schedule_id":null}')
    assert read.model_dump_json() == '{"slot_phase_s":0.5,"schedule_id":null}'
    # Fields given through model_copy: after the others, in field order.
    copied = read.model_copy(update={"link_time_s": 2.0, "step_index": 1})
    assert list(copied.written()) == ["slot_phase_s", "schedule_id", "step_index", "link_time_s"]
    # Equal as dicts are: the same keys and values, in any order.
    assert Timeline(step_index=1, schedule_id="x") == Timeline(schedule_id="x", step_index=1)
    assert Timeline(schedule_id=None) != Timeline()


def test_numbers_stay_as_they_were_given() -> None:
    """A server's integer times and a browser's float ones are written back as given."""
    conn = ServerConnection.model_validate({"start_unix_ms": 5, "end_unix_ms": 7.0, "id": "tcp x"})
    assert conn.model_dump_json() == '{"start_unix_ms":5,"end_unix_ms":7.0,"id":"tcp x"}'
    stats = ServerStats.model_validate({"connections": [{"requests": 2, "extra": [1, 2.5, True]}]})
    assert stats.connections[0].model_dump_json() == '{"requests":2,"extra":[1,2.5,true]}'


def test_every_recorded_journal_writes_its_details_as_they_were() -> None:
    journals = sorted(DATA.glob("recorded-*/journal.jsonl"))
    assert len(journals) >= 6
    for journal in journals:
        for n, line in enumerate(journal.read_text().splitlines(), start=1):
            r = RunRecord.model_validate_json(line)
            written = r.model_dump_json()
            details = json.dumps(json.loads(written)["details"])
            assert details == json.dumps(json.loads(line)["details"]), (journal, n)
            if journal.parent.name == "recorded-sites":  # written by this Clarke: whole
                # but for the dimensions declared since, which it writes at their default
                added = {d.name for d in dimensions.seal()} - set(json.loads(line))
                kept = {k: v for k, v in json.loads(written).items() if k not in added}
                assert json.dumps(kept) == json.dumps(json.loads(line)), (journal, n)
            assert RunRecord.model_validate_json(written) == r


def test_a_record_without_a_part_reads_it_as_absent_and_keeps_keys_it_does_not_know() -> None:
    details = '{"padding":"x","server_connections":[{"id":1,"requests":2,"gone":true}]}'
    line = record(0).model_dump_json().replace('"details":{}', f'"details":{details}')
    r = RunRecord.model_validate_json(line)
    assert r.details.link is None and r.details.timeline is None and r.details.isolation is None
    assert r.details.per_connection == [] and r.details.failure == ""
    assert r.details.server_connections[0].requests == 2
    assert r.model_dump_json() == line


def test_the_record_has_the_browsers_keys_around_the_sessions() -> None:
    session = LoadDetails(substrate="netns", link=LinkInForce(profile="lan", profile_sha256="f"))
    session.failure = ""
    session.metrics = {"wire_bytes": 9.0, "overhead": None}
    session.isolation = IsolationCheck(mode="profile", connections=1)
    session.phases_ms = PhasesMs(runner={"client": 1.5}, client={})
    result = LoadResult(
        status=Status.ok,
        engine="selenium",
        metrics={"plt_ms": 5.0},
        protocols={"https://x/": "h2"},
        wall_ms=7.0,
        raw={"resources": [{"name": "https://x/o", "responseEnd": 3}], "netlog": {"reached": []}},
    )
    run = plan_file(DATA / "recorded-lan.yaml").runs[0]
    start = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    attempt = loop.Attempt(run, 1, result, session, start, start, {}, {})
    r = loop.to_record(loop.RecordContext("c", "c-1", "selenium", "abc"), attempt)
    assert list(r.details.written()) == [
        "protocols", "lcp_element", "wall_ms", "substrate", "link", "failure", "isolation",
        "phases_ms", "resources", "browser_netlog",
    ]  # fmt: skip
    assert r.metrics == {"plt_ms": 5.0, "wire_bytes": 9.0} and r.profile_sha256 == "f"
    assert '"resources":[{"name":"https://x/o","responseEnd":3}]' in r.model_dump_json()
