"""Sequential repetitions in the campaign loop: which cells still need loads.

The plan holds every cell's `max` runs (run ids -r1..-r<max>), in the campaign's order,
so run ids, shards, resumes and `--parallel` work as for fixed repetitions. A cell's
runs are skipped once its stopping rule (clarke.sequential) says it has stopped: its
interval for the median is tight enough, or all its runs in this results directory were
tried. The decision is a pure function of the directory's journal, so a resume reaches
the same one; a shard (or a `--parallel` lane) decides on its own loads only.

Why a shard may decide alone: its loads of a cell are an i.i.d. stream and its stop a
stopping time of that stream; the shards' streams are independent, so their loads put
one after the other are one i.i.d. stream, and the merged count (the sum of the shards'
stops) a stopping time of it, never above the plan's max. The merged cell's interval
is therefore as valid as one directory's; it only has more loads than one directory
would have taken."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from clarke.campaign.dimensions import Cell
from clarke.campaign.plan import Run
from clarke.results.record import RunRecord, Status
from clarke.sequential import Decision, StoppingRule


@dataclass
class Stopping:
    """The cells' state under `rule` for the runs of this directory (`runs`: the plan,
    or its shard); told every final record, in journal order."""

    rule: StoppingRule
    runs: Sequence[Run]
    values: dict[Cell, list[float]] = field(default_factory=dict)
    tried: dict[Cell, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.planned: dict[Cell, int] = {}
        for r in self.runs:
            self.planned[r.cell] = self.planned.get(r.cell, 0) + 1
        self._stopped: dict[Cell, Decision] = {}

    @classmethod
    def of_journal(
        cls, rule: StoppingRule, runs: Sequence[Run], records: Iterable[RunRecord], done: set[str]
    ) -> Stopping:
        """From the records already in the journal, replayed as the loop saw them: each
        finished run (`done`, loop.finished) once, at its final attempt (its success, or
        its last failure), in journal order."""
        in_order = list(records)
        final: dict[str, int] = {}
        for i, r in enumerate(in_order):
            if r.run_id not in done:
                continue
            earlier = final.get(r.run_id)
            if earlier is None or in_order[earlier].status is not Status.ok:
                final[r.run_id] = i
        s = cls(rule, runs)
        for i in sorted(final.values()):
            s.add(in_order[i])
        return s

    def decision(self, cell: Cell) -> Decision:
        if cell in self._stopped:
            return self._stopped[cell]
        planned = min(self.planned.get(cell, 0), self.rule.maximum)
        return self.rule.decide(
            self.values.get(cell, []), len(self.tried.get(cell, ())), planned=planned
        )

    def needed(self, run: Run) -> bool:
        """Whether the run's cell still takes loads."""
        return not self.decision(run.cell).stopped

    def add(self, record: RunRecord) -> Decision | None:
        """A run's final record: the cell's decision when this record stopped it."""
        cell = record.cell
        was = self.decision(cell)
        if was.stopped:
            return None
        tried = self.tried.setdefault(cell, set())
        if record.run_id in tried:
            return None
        tried.add(record.run_id)
        value = record.metrics.get(self.rule.metric)
        if record.status is Status.ok and value is not None:
            self.values.setdefault(cell, []).append(float(value))
        now = self.decision(cell)
        if now.stopped:
            self._stopped[cell] = now
            return now
        return None

    def unneeded(self, runs: Iterable[Run]) -> list[Run]:
        """The runs whose cell has stopped (a resume skips them like finished ones)."""
        return [r for r in runs if not self.needed(r)]

    def stopped(self) -> dict[Cell, Decision]:
        return dict(self._stopped)
