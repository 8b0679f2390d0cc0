"""meta.json kept current as the loop goes (an observer of the loop that changes
nothing on the testbed): every link check, every change the session applied, and with
sequential repetitions each cell's stop (`sequential`: the rule, and per cell why and
when it stopped)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from clarke.campaign.plan import Run
from clarke.results.meta import (
    AppliedRecord,
    CellStop,
    LinkCheckRecord,
    SequentialRecord,
    StoppingRuleRecord,
)
from clarke.results.record import RunRecord
from clarke.results.store import MetaKeeper
from clarke.run.loop.link_checks import LinkCheck
from clarke.run.session.session import Session
from clarke.sequential import Decision, StoppingRule


class CampaignMeta:
    """Keeps meta.json current as the loop goes, through the results directory's keeper
    (results/store.py MetaKeeper): every link check, and every change the session
    applied (each profile and congestion control once per change), after those of the
    invocations before it."""

    def __init__(
        self, keeper: MetaKeeper, session: Session, rule: StoppingRule | None = None
    ) -> None:
        self.keeper, self.session = keeper, session
        meta = keeper.meta
        self.earlier_checks = list(meta.link)
        self.earlier_applies = list(meta.applies)
        self.checks: list[LinkCheckRecord] = []
        self.sequential: SequentialRecord | None = None
        if rule is not None:
            before = meta.sequential.stopped if meta.sequential else {}
            self.sequential = SequentialRecord(rule=sequential_rule(rule), stopped=dict(before))

    def save(self, finished_at: str | None = None) -> None:
        meta = self.keeper.meta
        applies = self.earlier_applies + [
            AppliedRecord.model_validate(a.to_dict()) for a in self.session.applied
        ]
        counts: dict[str, int] = {}
        for a in applies:
            key = f"{a.what}:{a.value}"
            counts[key] = counts.get(key, 0) + 1
        meta.link = self.earlier_checks + self.checks
        meta.applies, meta.apply_counts = applies, counts
        if finished_at is not None:
            meta.finished_at = finished_at
        if self.sequential is not None:
            meta.sequential = self.sequential
        self.keeper.save()

    # --- Observer --------------------------------------------------------------------
    def skipped(self, run: Run) -> None: ...
    def checking(self, check: LinkCheck) -> None: ...
    def loading(self, run: Run, attempt: int) -> None: ...
    def recorded(self, record: RunRecord, final: bool) -> None: ...

    def checked(self, check: LinkCheck, result: LinkCheckRecord) -> None:
        self.checks.append(result)
        self.save()

    def dropped(self, run: Run) -> None: ...

    def stopped(self, run: Run, decision: Decision) -> None:
        if self.sequential is None:
            return
        self.sequential.stopped[run.cell.path] = stop_entry(run, decision)
        self.save()


def sequential_rule(rule: StoppingRule) -> StoppingRuleRecord:
    return StoppingRuleRecord(
        metric=rule.metric,
        half_width=rule.half_width,
        min=rule.minimum,
        max=rule.maximum,
        confidence=rule.confidence,
    )


def stop_entry(run: Run, decision: Decision) -> CellStop:
    """meta.json's account of a cell's stop: why, after which run, with what interval."""
    i = decision.interval
    return CellStop(
        stop=decision.stop.value,
        loads=i.n,
        runs=decision.tried,
        last_run=run.run_id,
        median=i.median,
        low=i.low if i.bounded else None,
        high=i.high if i.bounded else None,
        half_width=i.relative_half_width if i.bounded else None,
        at=dt.datetime.now(dt.UTC).isoformat(),
    )


class Both:
    """Two observers as one."""

    def __init__(self, *observers: Any) -> None:
        self.observers = observers

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> None:
            for o in self.observers:
                getattr(o, name)(*args)

        return call
