"""The campaign loop: its steps (runs, and link checks: link_checks.py) in order. A link check
puts its profile on the link and measures it; a run puts its profile and its congestion
control in force (the session applies only what is not), loads the page, and records
every attempt in the journal and InfluxDB, retrying failed loads up to the campaign's
retries. With sequential repetitions, a run whose cell has stopped is skipped
(run/loop/stopping.py). Resumable: the journal says which runs are finished. Whoever
displays progress only observes (Observer)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from clarke.browser.load import LoadResult
from clarke.campaign.plan import Run
from clarke.errors import ClarkeError, SinkError
from clarke.results.details import LoadDetails, Netlog
from clarke.results.journal import Journal
from clarke.results.meta import LinkCheckRecord
from clarke.results.record import RunRecord, Status
from clarke.run.loop.apply import Testbed, put_in_force
from clarke.run.loop.link_checks import LinkCheck, Step
from clarke.run.loop.stopping import Stopping
from clarke.sequential import Decision

log = logging.getLogger(__name__)
MAX_TESTBED_FAILURES = 3


class TestbedGone(ClarkeError):
    kind = "Testbed"


class Session(Testbed, Protocol):
    """What the loop needs of a testbed (run.session.Session; a fake one in tests)."""

    @property
    def implementations(self) -> dict[str, str]: ...
    def load(
        self, run: Run, attempt: int, next_run: Run | None = None
    ) -> tuple[LoadResult, LoadDetails]: ...
    def check_link(self, profile: str, phase: str, level: str) -> LinkCheckRecord: ...
    def versions(self) -> dict[str, str]: ...


class Sink(Protocol):
    def write(self, records: Iterable[RunRecord]) -> int: ...


class Observer(Protocol):
    """Told what happens, in order; changes nothing."""

    def skipped(self, run: Run) -> None: ...
    def checking(self, check: LinkCheck) -> None: ...
    def checked(self, check: LinkCheck, result: LinkCheckRecord) -> None: ...
    def loading(self, run: Run, attempt: int) -> None: ...
    def recorded(self, record: RunRecord, final: bool) -> None: ...
    def stopped(self, run: Run, decision: Decision) -> None:
        """`run` (just recorded) stopped its cell (sequential repetitions)."""

    def dropped(self, run: Run) -> None:
        """`run` is not run: its cell had stopped before it."""


class Quiet:
    """An observer that does nothing."""

    def skipped(self, run: Run) -> None: ...
    def checking(self, check: LinkCheck) -> None: ...
    def checked(self, check: LinkCheck, result: LinkCheckRecord) -> None: ...
    def loading(self, run: Run, attempt: int) -> None: ...
    def recorded(self, record: RunRecord, final: bool) -> None: ...
    def stopped(self, run: Run, decision: Decision) -> None: ...
    def dropped(self, run: Run) -> None: ...


@dataclass(frozen=True)
class RecordContext:
    campaign: str
    campaign_id: str
    engine: str
    git_rev: str
    shard: str = ""
    testbed: str = ""  # run.loop.testbed_label


@dataclass
class Outcome:
    done: list[RunRecord] = field(default_factory=list)
    skipped: int = 0
    dropped: int = 0  # runs not run because their cell had stopped (sequential)
    sink_failures: int = 0
    checks: list[LinkCheckRecord] = field(default_factory=list)
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
        if r.details.infrastructure:
            continue  # the testbed failed, not the load: it does not use up a retry
        spent[r.run_id] = spent.get(r.run_id, 0) + 1
        if r.status is Status.ok or spent[r.run_id] >= 1 + retries:
            done.add(r.run_id)
    return done, attempts, spent


@dataclass(frozen=True)
class Attempt:
    """One load of a run as the loop saw it: the run, its attempt's number (from 1), the
    result, the session's details, when it started and ended, and what the testbed ran
    (its implementations and their versions)."""

    run: Run
    number: int
    result: LoadResult
    details: LoadDetails
    started: dt.datetime
    finished: dt.datetime
    implementations: dict[str, str]
    versions: dict[str, str]


@dataclass(frozen=True)
class LoopSettings:
    """How the loop goes: failed loads retried up to `retries` times; `link_check`'s
    level; where records go besides the journal (`sink`); who is told (`observer`);
    the plan's runs already finished (`skipped`, observed only); with sequential
    repetitions, which cells still take loads (`stopping`) and the runs of cells that
    had stopped before this invocation (`passed_over`, observed only)."""

    retries: int
    link_check: str = "full"
    sink: Sink | None = None
    observer: Observer | None = None
    skipped: Sequence[Run] = ()
    stopping: Stopping | None = None
    passed_over: Sequence[Run] = ()


def to_record(ctx: RecordContext, attempt: Attempt) -> RunRecord:
    run, result, details = attempt.run, attempt.result, attempt.details
    metrics = dict(result.metrics)
    metrics.update(details.counted_metrics())
    status, reason = result.status, result.reason
    if status is Status.ok and details.failure:
        status, reason = Status.failed, details.failure
    return RunRecord(
        campaign=ctx.campaign,
        campaign_id=ctx.campaign_id,
        run_id=run.run_id,
        run_index=run.index,
        attempt=attempt.number,
        scenarios=list(run.scenarios),
        cell=run.cell,
        profile_sha256=details.link.profile_sha256 if details.link else "",
        page=run.page,
        repetition=run.repetition,
        engine=result.engine or ctx.engine,
        browser_version=result.browser_version,
        # The client agent serves every browser: the load's is the client's implementation.
        implementations={**attempt.implementations, "client": result.browser},
        versions=attempt.versions,
        git_rev=ctx.git_rev,
        shard=ctx.shard,
        testbed=ctx.testbed,
        started_at=attempt.started,
        finished_at=attempt.finished,
        status=status,
        reason=reason,
        metrics=metrics,
        details=recorded(details, result),
    )


def recorded(details: LoadDetails, result: LoadResult) -> LoadDetails:
    """The record's details: what the browser said around what the session verified."""
    raw = result.raw or {}
    out = LoadDetails(
        protocols=result.protocols, lcp_element=result.lcp_element, wall_ms=result.wall_ms
    )
    out.take(details)
    out.resources = raw.get("resources", [])
    if raw.get("netlog"):
        # Chromium's NetLog: its own QUIC congestion control (what it sends) and the
        # addresses it reached; the server's congestion control is server_cc.
        out.browser_netlog = Netlog.model_validate(raw["netlog"])
    return out


def execute(
    steps: Sequence[Step],
    session: Session,
    journal: Journal,
    ctx: RecordContext,
    settings: LoopSettings,
) -> Outcome:
    """Run the steps as `settings` say."""
    retries, sink, skipped = settings.retries, settings.sink, settings.skipped
    watch = settings.observer or Quiet()
    out = Outcome()
    for run in skipped:
        out.skipped += 1
        watch.skipped(run)
    for run in settings.passed_over:
        out.dropped += 1
        watch.dropped(run)
    _, attempts, spent = finished(journal, retries)
    versions = session.versions()
    testbed_failures = 0
    for index, step in enumerate(steps):
        if isinstance(step, LinkCheck):
            watch.checking(step)
            try:
                check = session.check_link(step.profile, step.phase, settings.link_check)
            except ClarkeError as e:
                # Recorded, not fatal: the loads themselves show whether the link
                # carries pages.
                check = LinkCheckRecord(
                    phase=step.phase, profile=step.profile, error=f"{e.kind}: {e}"
                )
            out.checks.append(check)
            watch.checked(step, check)
            continue
        run = step
        stopping = settings.stopping
        if stopping is not None and not stopping.needed(run):
            out.dropped += 1
            watch.dropped(run)
            continue
        next_run = _next_load(steps, index, stopping)
        while True:
            attempt = attempts.get(run.run_id, 0) + 1
            attempts[run.run_id] = attempt
            watch.loading(run, attempt)
            started = dt.datetime.now(dt.UTC)
            try:
                put_in_force(session, run.cell)
                result, details = session.load(run, attempt, next_run)
            except ClarkeError as e:
                # The testbed itself failed: record it; it does not use up a retry.
                result = LoadResult.failed(ctx.engine, f"{e.kind}: {e}")
                details = LoadDetails(infrastructure=True)
                testbed_failures += 1
            else:
                testbed_failures = 0
            infrastructure = details.infrastructure
            ended = dt.datetime.now(dt.UTC)
            done = Attempt(
                run, attempt, result, details, started, ended, session.implementations, versions
            )
            record = to_record(ctx, done)
            journal.append(record)
            _sink(sink, record, out)
            out.done.append(record)
            final = False
            if not infrastructure:
                spent[run.run_id] = spent.get(run.run_id, 0) + 1
                final = record.status is Status.ok or spent[run.run_id] >= 1 + retries
            watch.recorded(record, final)
            if final and stopping is not None:
                decision = stopping.add(record)
                if decision is not None:
                    watch.stopped(run, decision)
            if testbed_failures >= MAX_TESTBED_FAILURES:
                raise TestbedGone(
                    f"the testbed failed {testbed_failures} times in a row ({record.reason}); "
                    "every finished run is in the journal: fix the testbed and resume"
                )
            if final:
                break
    return out


def _next_load(steps: Sequence[Step], index: int, stopping: Stopping | None) -> Run | None:
    """The load after step `index`, whose browser may start while this one ends: the
    next step if it is a run (not before a link check, which measures the link with the
    client quiet), passing over runs of cells that have stopped."""
    for step in steps[index + 1 :]:
        if not isinstance(step, Run):
            return None
        if stopping is None or stopping.needed(step):
            return step
    return None


def _sink(sink: Sink | None, record: RunRecord, out: Outcome) -> None:
    if sink is None:
        return
    try:
        sink.write([record])
    except SinkError as e:
        out.sink_failures += 1
        if out.sink_failures == 1:
            log.warning(
                "%s; the journal keeps every record: push them later with `clarke results push`",
                e,
            )
