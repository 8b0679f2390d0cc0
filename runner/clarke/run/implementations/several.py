"""One campaign on several implementations: every combination of the links and servers
its `implementations:` lists (or `--link`/`--server` pin), one after the other on new
netns testbeds, each in a results directory of its own under one top directory:

    results/<campaign id>/
        campaign.yaml             the campaign file, as given
        implementations.json      every combination: complete, partial, not installed …
        <campaign id>-satlink-origin/          an ordinary results directory
        <campaign id>-opensand-openlitespeed/  …

A combination whose link or server is not installed here is recorded as `not installed`
with the reason and the others run: nothing is dropped silently. `clarke run --resume`
on the top directory skips the complete combinations, resumes a partial one and starts
the rest (and tries the not installed ones again). `clarke report --by implementation`
makes the cross-implementation table from it (clarke.run.implementations.table)."""

from __future__ import annotations

import datetime as dt
import shutil
from contextlib import ExitStack
from dataclasses import replace
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console

from clarke import profiles, registry, schema
from clarke.campaign.plan import CampaignPlan
from clarke.errors import ClarkeError, EnvironmentProblem, InputError
from clarke.ids import Id
from clarke.place import netns
from clarke.results import store
from clarke.results.record import Status
from clarke.run.loop.loop import Outcome
from clarke.run.loop.options import RunOptions
from clarke.run.loop.preflight import check_browser
from clarke.run.loop.resume import require_same_campaign
from clarke.run.loop.run import print_outcome, run_campaign

INDEX = "implementations.json"
BASELINE = ("satlink", "origin")


class State(StrEnum):
    not_started = "not started"
    not_installed = "not installed"
    partial = "partial"  # started, interrupted or stopped before its last run
    complete = "complete"  # every run tried (a run may still have failed its loads)


class Combination(BaseModel):
    link: str
    server: str
    state: State = State.not_started
    reason: str = ""  # why not installed, or why it stopped
    results: Id | None = None  # its results directory, relative to the top directory
    runs: int = 0  # runs of the plan
    runs_ok: int = 0  # runs with a successful load

    @property
    def label(self) -> str:
        return f"{self.link} + {self.server}"


class Index(BaseModel):
    campaign: str
    campaign_id: Id  # names the combinations' directories
    started_at: str
    combinations: list[Combination]

    def find(self, link: str, server: str) -> Combination | None:
        return next((c for c in self.combinations if (c.link, c.server) == (link, server)), None)


def is_top_directory(d: Path) -> bool:
    return (d / INDEX).is_file()


def read_index(top: Path) -> Index:
    return schema.read(Index, top / INDEX)


def _save(top: Path, index: Index) -> None:
    store.write_json(top / INDEX, index.model_dump(mode="json"))


def wanted_combinations(plan: CampaignPlan, options: RunOptions) -> list[tuple[str, str]]:
    """The (link, server) names a campaign asks for, defaults filled in."""
    c = plan.campaign
    registry.check_names(c, str(plan.source))
    return [
        (registry.get("link", lk).name, registry.get("server", sv).name)
        for lk, sv in c.implementations.combinations(options.link, options.server)
    ]


def run_implementations(
    plan: CampaignPlan, options: RunOptions, console: Console
) -> tuple[Path, Index, bool]:
    """Every combination in turn. Returns the top directory, its index and whether
    Ctrl-C (or SIGTERM) ended it."""
    c = plan.campaign
    combos = wanted_combinations(plan, options)
    # What every combination needs, checked once before anything runs (exit 2 or 3).
    for lk, _ in combos:
        registry.check_profiles(
            registry.get("link", lk),
            [(n, profiles.read(n)) for n in sorted({r.cell.link for r in plan.runs})],
        )
    for lk, sv in combos:
        chosen = [registry.get("link", lk), registry.get("server", sv)]
        source = f"{plan.source} ({lk} link, {sv} server)"
        registry.check_supported([r.cell for r in plan.runs], chosen, source, plan.held_pages)
    netns.require_root_and_tun()
    check_browser(c)

    lock = ExitStack()
    resume = options.resume
    if resume:
        top = resume
        index = read_index(top)
        if index.campaign != c.name:
            raise InputError(f"{top} holds campaign {index.campaign!r}, not {c.name!r}")
        require_same_campaign(top, plan)
        lock.enter_context(store.sole_writer(top))
        for lk, sv in combos:
            if index.find(lk, sv) is None:
                index.combinations.append(Combination(link=lk, server=sv))
    else:
        cid = options.campaign_id or store.campaign_id(c.name)
        top = options.results_base / cid
        top.mkdir(parents=True, exist_ok=False)
        shutil.copyfile(plan.source, top / store.CAMPAIGN_COPY)
        index = Index(
            campaign=c.name,
            campaign_id=cid,
            started_at=dt.datetime.now(dt.UTC).isoformat(),
            combinations=[Combination(link=lk, server=sv) for lk, sv in combos],
        )
        lock.enter_context(store.sole_writer(top))
    with lock:
        _save(top, index)
        interrupted = _run_each(top, index, plan, combos, replace(options, resume=None), console)
    return top, index, interrupted


def _run_each(
    top: Path,
    index: Index,
    plan: CampaignPlan,
    combos: list[tuple[str, str]],
    options: RunOptions,
    console: Console,
) -> bool:
    for n, (lk, sv) in enumerate(combos, 1):
        combo = index.find(lk, sv)
        assert combo is not None
        head = f"[bold]combination {n}/{len(combos)}: {combo.label}[/]"
        if combo.state is State.complete:
            console.print(f"{head}: complete in {combo.results}, not run again")
            continue
        try:
            registry.get("link", lk).check_environment()
            registry.get("server", sv).check_environment()
        except EnvironmentProblem as e:
            combo.state, combo.reason = State.not_installed, str(e)
            _save(top, index)
            console.print(f"{head}: [yellow]not installed here[/]: {e}")
            continue
        combo.results = combo.results or f"{index.campaign_id}-{lk}-{sv}"
        existing = top / combo.results
        combo.state, combo.reason, combo.runs = State.partial, "", len(plan.runs)
        _save(top, index)
        console.print(f"{head} -> {existing}")
        one = replace(
            options.on(lk, sv),
            resume=existing if existing.exists() else None,
            results_base=top,
            campaign_id=combo.results,
        )
        try:
            done = run_campaign(plan, one, console)
        except ClarkeError as e:
            # One combination's failure (its testbed did not come up, …) is recorded and
            # the others still run; the exit status says that something failed.
            combo.reason = f"{e.kind}: {e}"
            _save(top, index)
            console.print(f"[red]{combo.label}: {combo.reason}[/]")
            continue
        print_outcome(done.results_dir, done.outcome, done.records, console)
        combo.runs_ok = len({r.run_id for r in done.records if r.status is Status.ok})
        combo.state, combo.reason = _state_after(done.outcome)
        _save(top, index)
        if done.outcome.interrupted:
            return True
    return False


def _state_after(outcome: Outcome) -> tuple[State, str]:
    if outcome.interrupted:
        return State.partial, "interrupted"
    if outcome.aborted:
        return State.partial, f"stopped: {outcome.aborted}"
    return State.complete, ""
