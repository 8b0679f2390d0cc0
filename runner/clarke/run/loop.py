"""The campaign loop: for each run of the plan (or of one shard), apply the link profile
and the server's congestion control, load the page, verify, and record the attempt in
the journal and InfluxDB. Resumable: runs whose outcome is in the journal are skipped."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from clarke.browser.load import LoadResult
from clarke.campaign.plan import Run
from clarke.errors import ClarkeError, SinkError
from clarke.results.journal import Journal
from clarke.results.record import RunRecord, Status

log = logging.getLogger(__name__)
MAX_TESTBED_FAILURES = 3


class TestbedGone(ClarkeError):
    kind = "Testbed"


class Session(Protocol):
    """A testbed the loop can drive (netns or compose, through the role agents)."""

    implementations: dict[str, str]

    def apply_profile(self, name: str) -> None: ...
    def apply_cc(self, cc: str) -> None: ...
    def load(self, run: Run) -> tuple[LoadResult, dict[str, Any]]: ...
    def versions(self) -> dict[str, str]: ...


class Sink(Protocol):
    def write(self, records: Iterable[RunRecord]) -> int: ...


@dataclass(frozen=True)
class RecordContext:
    campaign: str
    campaign_id: str
    engine: str
    git_rev: str
    shard: str = ""


@dataclass
class Outcome:
    done: list[RunRecord] = field(default_factory=list)
    skipped: int = 0
    sink_failures: int = 0
    interrupted: bool = False
    aborted: str = ""


def finished(journal: Journal, retries: int) -> tuple[set[str], dict[str, int], dict[str, int]]:
    """Run ids whose outcome is final (ok, or failed on every allowed attempt), the
    number of attempts already made per run id, and how many of them count as tries:
    attempts that failed because the testbed itself failed (an agent not answering) are
    not counted against the retries."""
    attempts: dict[str, int] = {}
    done: set[str] = set()
    spent: dict[str, int] = {}
    for r in journal.records():
        attempts[r.run_id] = max(attempts.get(r.run_id, 0), r.attempt)
        if r.details.get("infrastructure"):
            continue  # the testbed failed, not the load: it does not use up a retry
        spent[r.run_id] = spent.get(r.run_id, 0) + 1
        if r.status is Status.ok or spent[r.run_id] >= 1 + retries:
            done.add(r.run_id)
    return done, attempts, spent


def to_record(
    ctx: RecordContext,
    run: Run,
    attempt: int,
    result: LoadResult,
    details: dict[str, Any],
    implementations: dict[str, str],
    versions: dict[str, str],
    started: dt.datetime,
    finished_at: dt.datetime,
) -> RunRecord:
    metrics = dict(result.metrics)
    metrics.update({k: v for k, v in details.pop("metrics", {}).items() if v is not None})
    status, reason = result.status, result.reason
    if status is Status.ok and details.get("failure"):
        status, reason = Status.failed, str(details["failure"])
    return RunRecord(
        campaign=ctx.campaign,
        campaign_id=ctx.campaign_id,
        run_id=run.run_id,
        run_index=run.index,
        attempt=attempt,
        scenarios=list(run.scenarios),
        profile=run.profile,
        http=run.http,
        cc=run.cc,
        model=run.model,
        size=run.size,
        page=run.page,
        repetition=run.repetition,
        connections=run.connections,
        engine=result.engine or ctx.engine,
        browser=result.browser,
        browser_version=result.browser_version,
        implementations=implementations,
        versions=versions,
        git_rev=ctx.git_rev,
        shard=ctx.shard,
        started_at=started,
        finished_at=finished_at,
        status=status,
        reason=reason,
        metrics=metrics,
        details={
            "protocols": result.protocols,
            "lcp_element": result.lcp_element,
            "wall_ms": result.wall_ms,
            **details,
            "resources": (result.raw or {}).get("resources", []),
        },
    )


def execute(
    runs: list[Run],
    session: Session,
    journal: Journal,
    ctx: RecordContext,
    retries: int,
    sink: Sink | None = None,
    on_record: Callable[[RunRecord], None] = lambda _r: None,
    on_skip: Callable[[Run], None] = lambda _r: None,
    before_run: Callable[[Run], None] = lambda _r: None,
) -> Outcome:
    out = Outcome()
    done, attempts, spent = finished(journal, retries)
    versions = session.versions()
    testbed_failures = 0
    current_profile: str | None = None
    current_cc: str | None = None
    for run in runs:
        if run.run_id in done:
            out.skipped += 1
            on_skip(run)
            continue
        before_run(run)
        while True:
            attempt = attempts.get(run.run_id, 0) + 1
            attempts[run.run_id] = attempt
            started = dt.datetime.now(dt.UTC)
            try:
                if run.profile != current_profile:
                    session.apply_profile(run.profile)
                    current_profile = run.profile
                if run.cc != current_cc:
                    session.apply_cc(run.cc)
                    current_cc = run.cc
                result, details = session.load(run)
            except ClarkeError as e:
                # The testbed itself failed: record it, and re-apply everything next time.
                result = LoadResult.failed(ctx.engine, f"{e.kind}: {e}")
                details = {"infrastructure": True}
                current_profile = current_cc = None
                testbed_failures += 1
            else:
                testbed_failures = 0
            record = to_record(
                ctx,
                run,
                attempt,
                result,
                details,
                session.implementations,
                versions,
                started,
                dt.datetime.now(dt.UTC),
            )
            journal.append(record)
            if sink is not None:
                try:
                    sink.write([record])
                except SinkError as e:
                    out.sink_failures += 1
                    if out.sink_failures == 1:
                        log.warning(
                            "%s; the journal keeps every record: push them later "
                            "with `clarke results push`",
                            e,
                        )
            out.done.append(record)
            on_record(record)
            if testbed_failures >= MAX_TESTBED_FAILURES:
                raise TestbedGone(
                    f"the testbed failed {testbed_failures} times in a row ({record.reason}); "
                    "every finished run is in the journal: fix the testbed and resume"
                )
            if details.get("infrastructure"):
                continue
            spent[run.run_id] = spent.get(run.run_id, 0) + 1
            if record.status is Status.ok or spent[run.run_id] >= 1 + retries:
                break
    return out
