"""clarke compare on a recorded campaign (tests/data/recorded-repeats: two cells, 20
repetitions each): an injected slowdown is caught in its cell only, and random splits of
one campaign into halves raise (almost) no false alarms."""

from __future__ import annotations

import random
from pathlib import Path

from clarke.campaign.dimensions import CC, HTTP, MODEL, PROFILE, SIZE
from clarke.results import store
from clarke.results.record import RunRecord
from clarke.run.compare.cells import Verdict, compare_records

RECORDED = Path("tests/data/recorded-repeats")


def _records() -> list[RunRecord]:
    _, journal = store.open_existing(RECORDED)
    return list(journal.records())


def _slower(records: list[RunRecord], http: str, factor: float) -> list[RunRecord]:
    out = []
    for r in records:
        if r.cell[HTTP] == http and "plt_ms" in r.metrics:
            r = r.model_copy(
                update={"metrics": {**r.metrics, "plt_ms": r.metrics["plt_ms"] * factor}}
            )
        out.append(r)
    return out


def test_injected_slowdown_is_caught_in_its_cell_only(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = _records()
    cells = {(r.cell[PROFILE], r.cell[HTTP], r.cell[CC], r.cell[MODEL], r.cell[SIZE]) for r in base}
    assert len(cells) == 2
    c = compare_records(base, _slower(base, "2", 1.2))
    verdicts = c.cells()
    slowed = next(cell for cell in verdicts if cell[HTTP] == "2")
    assert verdicts[slowed] is Verdict.slower
    assert all(v is Verdict.same for cell, v in verdicts.items() if cell != slowed)
    plt = next(m for m in c.metrics if m.cell == slowed and m.metric == "plt_ms")
    assert 1.15 < plt.ratio < 1.25 and plt.ratio_ci[0] < 1.2 < plt.ratio_ci[1]


def test_random_halves_raise_at_most_one_false_alarm() -> None:
    records = _records()
    by_cell: dict[str, list[RunRecord]] = {}
    for r in records:
        by_cell.setdefault(r.cell[HTTP], []).append(r)
    rng = random.Random(20261122)
    alarms = 0
    for _ in range(20):
        a: list[RunRecord] = []
        b: list[RunRecord] = []
        for cell_records in by_cell.values():
            shuffled = cell_records[:]
            rng.shuffle(shuffled)
            half = len(shuffled) // 2
            a += shuffled[:half]
            b += shuffled[half:]
        c = compare_records(a, b)
        alarms += any(v is not Verdict.same for v in c.cells().values())
    assert alarms <= 1, alarms


def test_cli_exit_codes_and_outputs(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli(
        "compare",
        str(RECORDED),
        str(RECORDED),
        "--json",
        str(tmp_path / "c.json"),
        "--markdown",
        str(tmp_path / "c.md"),
    )
    assert code == 0 and "no regression" in out
    assert (tmp_path / "c.json").read_text().count('"verdict": "same"') >= 2
    assert "| cell | metric |" in (tmp_path / "c.md").read_text()
    code, _, err = run_cli("compare", str(RECORDED), "tests/data/recorded-lan")
    assert code == 2 and "different campaigns" in err
