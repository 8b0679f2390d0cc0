"""Sequential repetitions in the campaign loop, with a fake session: a tight cell stops
as soon as its interval is within ±2 % and its other runs are skipped, a noisy one runs
to max; a resume reaches the same stops without repeating a run; shards decide on their
own loads; meta.json, the summary and a merge say how each cell ended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clarke.campaign.dimensions import HTTP
from clarke.campaign.plan import CampaignPlan, Run, ShardBy, plan_file
from clarke.results import store
from clarke.results.journal import Journal
from clarke.results.merge import merge
from clarke.results.meta import Meta, SequentialRecord
from clarke.results.record import RunRecord, Status
from clarke.results.summary import Sequential, sequential_of, summarise
from clarke.run.loop import loop
from clarke.run.loop.link_checks import with_link_checks
from clarke.run.loop.loop import LoopSettings, Quiet, RecordContext, execute, finished
from clarke.run.loop.meta import stop_entry
from clarke.run.loop.stopping import Stopping
from clarke.sequential import Decision, Stop
from helpers import FakeSession

CAMPAIGN = """\
name: seq
matrix: {profiles: [lan], http: [2, 3], cc: [bbr], models: [uniform], sizes: [100k]}
repetitions: {min: 3, max: 20, until: {metric: plt, half_width: 2%}}
order: shuffled
seed: 3
retries: 1
"""


def plt(run: Run) -> float:
    """HTTP/2 within ±0.4 %, HTTP/3 spread over ±15 %: the first stops, the second not."""
    k = run.repetition
    if run.cell[HTTP].value == "2":
        return 1000.0 + 4 * ((k * 3) % 5 - 2)
    return 1000.0 * (1 + 0.3 * (((k * 7) % 11) / 10 - 0.5))


def plan_of(tmp_path: Path) -> CampaignPlan:
    f = tmp_path / "seq.yaml"
    f.write_text(CAMPAIGN)
    return plan_file(f)


class Stops(Quiet):
    def __init__(self) -> None:
        self.stops: list[tuple[Run, Decision]] = []
        self.drops: list[str] = []

    def stopped(self, run: Run, decision: Decision) -> None:
        self.stops.append((run, decision))

    def dropped(self, run: Run) -> None:
        self.drops.append(run.run_id)


def run_dir(plan: CampaignPlan, d: Path, runs: list[Run], session: FakeSession) -> Stops:
    """One invocation over `runs` into the results directory `d`, as run_campaign does."""
    journal = Journal.in_dir(d)
    rule = plan.campaign.stopping
    assert rule is not None
    done, _, _ = finished(journal, plan.campaign.retries)
    stopping = Stopping.of_journal(rule, runs, journal.records(), done)
    unneeded = {r.run_id for r in stopping.unneeded(runs)} - done
    seen = Stops()
    passed_over = [r for r in runs if r.run_id in unneeded]
    settings = LoopSettings(
        plan.campaign.retries, observer=seen, stopping=stopping, passed_over=passed_over
    )
    with journal:
        execute(with_link_checks(runs, done | unneeded), session, journal, CTX, settings)
    return seen


CTX = RecordContext("seq", "seq-1", "selenium", "abc")


def new_dir(tmp_path: Path, plan: CampaignPlan, name: str, runs: list[Run]) -> Path:
    return store.create(
        tmp_path, name, plan.source, {"campaign": "seq", "seed": plan.seed,
                                      "count": len(plan.runs), "runs": [r.to_dict() for r in runs]},
        Meta(campaign="seq"),
    )  # fmt: skip


def loads(records: list[RunRecord]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        if r.status is Status.ok:
            out[r.cell[HTTP].value] = out.get(r.cell[HTTP].value, 0) + 1
    return out


def test_a_tight_cell_stops_and_a_noisy_one_runs_to_max(tmp_path: Path) -> None:
    plan = plan_of(tmp_path)
    assert len(plan.runs) == 40  # the plan holds max runs per cell
    d = new_dir(tmp_path, plan, "seq-1", plan.runs)
    seen = run_dir(plan, d, plan.runs, FakeSession(plt=plt))
    records = list(Journal.in_dir(d).records())
    assert loads(records) == {"2": 7, "3": 20}  # 7: the first count with an interval
    assert len(seen.drops) == 13 and all("-h2-" in r for r in seen.drops)
    (h2, first), (h3, last) = seen.stops
    assert "-h2-" in h2.run_id and first.stop is Stop.precise and first.interval.n == 7
    assert first.interval.relative_half_width <= 0.02
    assert "-h3-" in h3.run_id and last.stop is Stop.exhausted and last.tried == 20
    # The loads stay interleaved: HTTP/3's runs went on between HTTP/2's.
    order = [r.cell[HTTP].value for r in records]
    assert order.index("3") < max(i for i, h in enumerate(order) if h == "2")
    # The summary judges the same from the records and the campaign file.
    sequential = sequential_of(d)
    assert sequential is not None and sequential.planned[records[0].cell] == 20
    by_http = {c.cell[HTTP].value: c for c in summarise(records, sequential=sequential)}
    stop2, stop3 = by_http["2"].stop, by_http["3"].stop
    assert stop2 is not None and (stop2.stop, stop2.interval.n) == (Stop.precise, 7)
    assert stop3 is not None and (stop3.stop, stop3.interval.n) == (Stop.exhausted, 20)


def test_failed_runs_count_as_tried_not_as_loads(tmp_path: Path) -> None:
    plan = plan_of(tmp_path)
    h2 = [r for r in plan.runs if r.cell[HTTP].value == "2"]
    script = {r.run_id: ["fail", "fail"] for r in h2[:3]}  # retries 1: both attempts fail
    d = new_dir(tmp_path, plan, "seq-1", plan.runs)
    run_dir(plan, d, plan.runs, FakeSession(script, plt=plt))
    records = list(Journal.in_dir(d).records())
    assert loads(records)["2"] == 7
    assert len({r.run_id for r in records if r.cell[HTTP].value == "2"}) == 10


def test_a_resume_reaches_the_same_stops(tmp_path: Path) -> None:
    plan = plan_of(tmp_path)
    whole = new_dir(tmp_path, plan, "whole", plan.runs)
    run_dir(plan, whole, plan.runs, FakeSession(plt=plt))
    expected = [r.run_id for r in Journal.in_dir(whole).records()]

    d = new_dir(tmp_path, plan, "seq-1", plan.runs)
    h2 = [r for r in plan.runs if r.cell[HTTP].value == "2"]
    broken = FakeSession({h2[4].run_id: ["down"] * 3}, plt=plt)
    with pytest.raises(loop.TestbedGone):
        run_dir(plan, d, plan.runs, broken)
    seen = run_dir(plan, d, plan.runs, FakeSession(plt=plt))
    records = list(Journal.in_dir(d).records())
    ok = [r.run_id for r in records if r.status is Status.ok]
    assert ok == expected and len(set(ok)) == len(ok)
    # A third invocation has nothing left: the stopped cell's runs are passed over.
    again = FakeSession(plt=plt)
    third = run_dir(plan, d, plan.runs, again)
    assert not again.events  # not even a link check
    assert len(third.drops) == 13
    assert seen.stops  # the resumed invocation saw both cells stop


@pytest.mark.parametrize("by", [ShardBy.run_index, ShardBy.repetition])
def test_shards_decide_on_their_own_loads_and_merge(tmp_path: Path, by: ShardBy) -> None:
    """By index (`--shard`) and by repetition (`--shard-by repetition`, as the lanes of
    `--parallel` are sliced)."""
    plan = plan_of(tmp_path)
    dirs = []
    assignment = {} if by is ShardBy.run_index else {"shard_by": by.value}
    for i in (1, 2):
        runs = plan.shard(i, 2, by)
        d = store.create(
            tmp_path, f"seq-1-shard{i}of2", plan.source,
            {"campaign": "seq", "seed": plan.seed, "count": len(plan.runs),
             "shard": f"{i}/2", **assignment,
             "runs": [r.to_dict() for r in runs]},
            Meta.model_validate(
                {"campaign": "seq", "campaign_id": "seq-1", "shard": f"{i}/2", **assignment}
            ),
        )  # fmt: skip
        seen = run_dir(plan, d, runs, FakeSession(plt=plt))
        stopped = {run.cell.path: stop_entry(run, dec) for run, dec in seen.stops}
        kept = store.MetaKeeper.open(d)
        kept.meta.sequential = SequentialRecord(stopped=stopped)
        kept.save()
        dirs.append(d)
    per_shard = [loads(list(Journal.in_dir(d).records())) for d in dirs]
    assert [s["2"] for s in per_shard] == [7, 7]  # each shard stopped on its own 7
    assert sum(s["3"] for s in per_shard) == 20
    m = merge(dirs, tmp_path / "merged")
    assert m.missing_runs == []  # the runs the stopped cells skipped are not missing
    assert m.not_needed == 6
    merged = list(Journal.in_dir(m.out).records())
    assert loads(merged) == {"2": 14, "3": 20}
    sequential = sequential_of(m.out)
    assert isinstance(sequential, Sequential)
    by_http = {c.cell[HTTP].value: c.stop for c in summarise(merged, sequential=sequential)}
    assert by_http["2"] is not None and by_http["2"].stop is Stop.precise
    meta = json.loads((m.out / store.META).read_text())
    assert [len(s["sequential"]["stopped"]) for s in meta["merged_from"]] == [2, 2]


def test_the_console_report_and_export_say_how_each_cell_ended(tmp_path: Path) -> None:
    import csv

    from click.testing import CliRunner
    from rich.console import Console

    from clarke.cli import cli
    from clarke.report import html
    from clarke.run.loop.console import SUMMARY_WIDTH, table

    plan = plan_of(tmp_path)
    d = new_dir(tmp_path, plan, "seq-1", plan.runs)
    run_dir(plan, d, plan.runs, FakeSession(plt=plt))
    cells = summarise(list(Journal.in_dir(d).records()), sequential=sequential_of(d))
    console = Console(width=400, record=True)
    console.print(table(cells, "seq-1"))
    text = console.export_text()
    assert "Sequential repetitions: 95% interval for the median" in text
    rows = {
        line.split()[0]: line for line in text.splitlines() if "precise" in line or "runs" in line
    }
    assert "7" in rows["2"].split() and "precise enough" in rows["2"]
    assert "20" in rows["3"].split() and "all 20 runs" in rows["3"]
    # The tables fit; the line of what every cell shares is prose, wrapped by the terminal.
    tables = [line for line in text.splitlines() if not line.startswith("every cell:")]
    assert max(len(line.rstrip()) for line in tables) <= SUMMARY_WIDTH
    page = html.build(d)
    assert "<p>Sequential repetitions: each cell took loads" in page
    assert "precise enough" in page and "all 20 runs" in page
    out = CliRunner().invoke(cli, ["results", "export", str(d), "--cells"])
    assert out.exit_code == 0, out.output
    with (d / "cells.csv").open() as f:
        by_http = {r["http"]: r for r in csv.DictReader(f)}
    assert (by_http["2"]["stop"], by_http["2"]["stop_loads"]) == ("precise", "7")
    assert (by_http["3"]["stop"], by_http["3"]["stop_runs"]) == ("max", "20")
    assert float(by_http["2"]["stop_half_width"]) <= 0.02
