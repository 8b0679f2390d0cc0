"""meta.json kept current as the loop goes (an observer of the loop that changes
nothing on the testbed): every link check, and every change the session applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clarke.campaign.plan import Run
from clarke.results import store
from clarke.results.record import RunRecord
from clarke.run.campaign.schedule import LinkCheck
from clarke.run.session.session import Session


class MetaKeeper:
    """Keeps meta.json current as the loop goes: every link check, and every change the
    session applied (each profile and congestion control once per change)."""

    def __init__(self, results_dir: Path, session: Session) -> None:
        self.results_dir, self.session = results_dir, session
        meta, _ = store.open_existing(results_dir)
        self.earlier_checks: list[dict[str, Any]] = list(meta.get("link") or [])
        self.earlier_applies: list[dict[str, Any]] = list(meta.get("applies") or [])
        self.checks: list[dict[str, Any]] = []

    def save(self, **more: Any) -> None:
        applies = self.earlier_applies + [a.to_dict() for a in self.session.applied]
        counts: dict[str, int] = {}
        for a in applies:
            key = f"{a['what']}:{a['value']}"
            counts[key] = counts.get(key, 0) + 1
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


class Both:
    """Two observers as one."""

    def __init__(self, *observers: Any) -> None:
        self.observers = observers

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> None:
            for o in self.observers:
                getattr(o, name)(*args)

        return call
