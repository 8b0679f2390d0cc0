"""meta.json kept current as the loop goes (an observer of the loop that changes
nothing on the testbed): every link check, every change the session applied, and with
sequential repetitions each cell's stop (`sequential`: the rule, and per cell why and
when it stopped)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from clarke.campaign.plan import Run
from clarke.results import store
from clarke.results.record import RunRecord
from clarke.run.campaign.schedule import LinkCheck
from clarke.run.session.session import Session
from clarke.sequential import Decision, StoppingRule


class MetaKeeper:
    """Keeps meta.json current as the loop goes: every link check, and every change the
    session applied (each profile and congestion control once per change)."""

    def __init__(
        self, results_dir: Path, session: Session, rule: StoppingRule | None = None
    ) -> None:
        self.results_dir, self.session = results_dir, session
        meta, _ = store.open_existing(results_dir)
        self.earlier_checks: list[dict[str, Any]] = list(meta.get("link") or [])
        self.earlier_applies: list[dict[str, Any]] = list(meta.get("applies") or [])
        self.checks: list[dict[str, Any]] = []
        self.sequential: dict[str, Any] | None = None
        if rule is not None:
            before = meta.get("sequential") or {}
            self.sequential = {
                "rule": sequential_rule(rule),
                "stopped": dict(before.get("stopped") or {}),
            }

    def save(self, **more: Any) -> None:
        applies = self.earlier_applies + [a.to_dict() for a in self.session.applied]
        counts: dict[str, int] = {}
        for a in applies:
            key = f"{a['what']}:{a['value']}"
            counts[key] = counts.get(key, 0) + 1
        if self.sequential is not None:
            more["sequential"] = self.sequential
        store.update_meta(
            self.results_dir,
            link=self.earlier_checks + self.checks,
            applies=applies,
            apply_counts=counts,
            **more,
        )

    # --- Observer --------------------------------------------------------------------
    def skipped(self, run: Run) -> None: ...
    def checking(self, check: LinkCheck) -> None: ...
    def loading(self, run: Run, attempt: int) -> None: ...
    def recorded(self, record: RunRecord, final: bool) -> None: ...

    def checked(self, check: LinkCheck, result: dict[str, Any]) -> None:
        self.checks.append(result)
        self.save()

    def dropped(self, run: Run) -> None: ...

    def stopped(self, run: Run, decision: Decision) -> None:
        if self.sequential is None:
            return
        self.sequential["stopped"][run.cell.path] = stop_entry(run, decision)
        self.save()


def sequential_rule(rule: StoppingRule) -> dict[str, Any]:
    return {
        "metric": rule.metric,
        "half_width": rule.half_width,
        "min": rule.minimum,
        "max": rule.maximum,
        "confidence": rule.confidence,
    }


def stop_entry(run: Run, decision: Decision) -> dict[str, Any]:
    """meta.json's account of a cell's stop: why, after which run, with what interval."""
    i = decision.interval
    return {
        "stop": decision.stop.value,
        "loads": i.n,
        "runs": decision.tried,
        "last_run": run.run_id,
        "median": i.median,
        "low": i.low if i.bounded else None,
        "high": i.high if i.bounded else None,
        "half_width": i.relative_half_width if i.bounded else None,
        "at": dt.datetime.now(dt.UTC).isoformat(),
    }


class Both:
    """Two observers as one."""

    def __init__(self, *observers: Any) -> None:
        self.observers = observers

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> None:
            for o in self.observers:
                getattr(o, name)(*args)

        return call
