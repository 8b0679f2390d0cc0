"""`clarke run --parallel N`: one campaign on N netns testbeds at once, merged as one.

The campaign's runs are sliced by repetition (campaign.plan.ShardBy.repetition: every
cell with N or more repetitions runs on every testbed), and each slice runs in a child
`clarke run --shard i/N --shard-by repetition` that brings up its own testbed (the
lowest free testbed id, picked under the state store's lock, so the children never
collide) on its own CPU set: the child's affinity, which every process it starts (the
role agents, their emulators and servers, the browser) inherits. With fewer cores than
testbeds the testbeds share all cores, and say so.

Layout, under the results base:
  <id>.testbeds/              the parts: parallel.json, the campaign file, each child's
                              results directory (<id>-shard<i>of<N>) and log
                              (testbed<i>.log)
  <id>/                       the merged campaign (results/merge.py), which compare,
                              report and export take; meta.json's `parallel` says how it
                              ran, `testbed_check` how the testbeds compare
                              (run/parallel/check.py)

Ctrl-C or SIGTERM: every child is sent one SIGTERM (each abandons its load, tears its
testbed down and exits); a child that has not ended after STOP_TIMEOUT_S is killed and
its testbed torn down from here. `--resume <id>.testbeds` (or the merged directory)
resumes every child's directory and merges again."""

from __future__ import annotations

import ctypes
import datetime as dt
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from pydantic import BaseModel, ConfigDict
from rich.console import Console

from clarke import schema
from clarke.campaign.model import Order
from clarke.campaign.plan import CampaignPlan, ShardBy
from clarke.errors import ClarkeError, InputError
from clarke.ids import Id
from clarke.json_value import JsonObject
from clarke.results import store
from clarke.results.journal import Journal
from clarke.results.merge import merge
from clarke.results.meta import LaneRecord, Meta, ParallelRecord
from clarke.results.summary import sequential_of, summarise
from clarke.run.compare.cells import MIN_SAMPLES
from clarke.run.loop.console import print_summary
from clarke.run.loop.options import RunOptions, Shard
from clarke.run.loop.preflight import preflight
from clarke.run.loop.resume import require_same_campaign
from clarke.run.parallel.check import TestbedCheck, check_testbeds, warnings
from clarke.testbed import lifecycle
from clarke.testbed.state import Store

STATE_FILE = "parallel.json"
PARTS_SUFFIX = ".testbeds"
STOP_TIMEOUT_S = 180.0  # a child's teardown: five roles' processes and namespaces
PROGRESS_EVERY_S = 30.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class ParallelState(BaseModel):
    """parallel.json: what a resume must match and what the merge records."""

    model_config = ConfigDict(extra="forbid")

    campaign: str
    campaign_id: Id  # names the shards' directories
    testbeds: int
    shard_by: ShardBy = ShardBy.repetition
    cpus: list[list[int]]
    shared_cpus: bool
    merged: Id  # the merged directory's name, beside the parts directory
    # Each `clarke run --parallel` of these parts: start, end, wall time, interrupted.
    invocations: list[JsonObject] = []


def cpu_sets(count: int, available: list[int]) -> tuple[list[list[int]], bool]:
    """`count` disjoint CPU sets from `available` (contiguous, sizes differing by at most
    one), or, with fewer CPUs than testbeds, every CPU for every testbed (shared: True)."""
    cpus = sorted(available)
    if len(cpus) < count:
        return [list(cpus) for _ in range(count)], True
    size, extra = divmod(len(cpus), count)
    sets, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        sets.append(cpus[start:end])
        start = end
    return sets, False


def shard_dir_name(campaign_id: str, lane: int, count: int) -> str:
    """What run.loop names a shard's directory."""
    return f"{campaign_id}-shard{lane}of{count}"


def child_argv(
    campaign_file: Path, shard: Shard, parts: Path, campaign_id: str, options: RunOptions
) -> list[str]:
    """One testbed's `clarke run`: its shard of the plan, by repetition, into `parts`;
    `options.resume`: its own directory, when it has one already."""
    argv = [sys.executable, "-m", "clarke", "run", str(campaign_file)]
    argv += ["--shard", shard.label, "--shard-by", ShardBy.repetition.value]
    argv += ["--resume", str(options.resume)] if options.resume else ["--campaign-id", campaign_id]
    argv += ["--results", str(parts), "--link-check", options.link_check, "--substrate", "netns"]
    argv += ["--link", options.link] if options.link else []
    argv += ["--server", options.server] if options.server else []
    argv += ["--influx", options.influx_url] if options.influx_url else []
    return argv


def _pin_and_follow_parent(cpus: list[int]) -> None:
    """In the child before it runs: its CPU set, and a SIGTERM should the parent die
    without stopping it (the child then tears its testbed down as on Ctrl-C)."""
    os.sched_setaffinity(0, cpus)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass
class Lane:
    number: int
    cpus: list[int]
    dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    log: TextIO | None = None
    exit_code: int | None = None
    killed: bool = False
    torn_down_here: list[int] = field(default_factory=list)

    def runs_recorded(self) -> int:
        if not (self.dir / "journal.jsonl").is_file():
            return 0
        return len({r.run_id for r in Journal.in_dir(self.dir).records()})


@dataclass
class ParallelOutcome:
    campaign_file: Path
    parts: Path
    merged: Path | None
    lanes: list[Lane]
    interrupted: bool = False
    check: TestbedCheck | None = None
    started: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    finished: dt.datetime | None = None

    @property
    def failed_lanes(self) -> list[Lane]:
        return [lane for lane in self.lanes if lane.exit_code not in (0, 130)]


def resolve_resume(resume: Path) -> Path:
    """The parts directory of a parallel campaign, given it or its merged directory."""
    if (resume / STATE_FILE).is_file():
        return resume
    if (resume / store.META).is_file():
        parallel = store.read_meta(resume).parallel
        parts = parallel.parts if parallel else None
        if parts and (resume.parent / parts / STATE_FILE).is_file():
            return resume.parent / parts
    raise InputError(
        f"--resume {resume}: not a campaign run with --parallel (no {STATE_FILE}; resume "
        "it without --parallel)"
    )


def is_parallel_dir(d: Path) -> bool:
    try:
        resolve_resume(d)
    except InputError:
        return False
    return True


def run_parallel(
    plan: CampaignPlan, count: int, options: RunOptions, console: Console
) -> ParallelOutcome:
    """`plan` on `count` testbeds at once, each a child `clarke run` of one shard (by
    repetition) on its own CPU set, merged once they all ended."""
    c, campaign_file, resume = plan.campaign, plan.source, options.resume
    if c.order is Order.shuffled and c.seed is None:
        raise InputError(
            f"--parallel {count}: {campaign_file} is shuffled without a seed, so each testbed "
            "would draw its own order; give the campaign a seed"
        )
    if resume is not None:
        parts = resolve_resume(resume)
        state = schema.read(ParallelState, parts / STATE_FILE)
        if state.testbeds != count:
            raise InputError(
                f"--parallel {count}: {parts} was run with --parallel {state.testbeds}; "
                f"resume it with --parallel {state.testbeds}"
            )
        require_same_campaign(parts, plan)
        cid = state.campaign_id
    else:
        cid = options.campaign_id or store.campaign_id(c.name)
        results_base = options.results_base
        parts = results_base / f"{cid}{PARTS_SUFFIX}"
        if parts.exists() or (results_base / cid).exists():
            raise InputError(f"{results_base / cid} or {parts} exists: give another --campaign-id")
        sets, shared = cpu_sets(count, sorted(os.sched_getaffinity(0)))
        state = ParallelState(
            campaign=c.name,
            campaign_id=cid,
            testbeds=count,
            cpus=sets,
            shared_cpus=shared,
            merged=cid,
        )
    # Everything the children would check, here once, before any of them starts.
    preflight(plan, plan.runs, replace(options, substrate="netns"))
    if not parts.exists():
        parts.mkdir(parents=True)
        shutil.copyfile(campaign_file, parts / store.CAMPAIGN_COPY)
        store.write_json(parts / STATE_FILE, state.model_dump(mode="json"))
    if state.shared_cpus:
        console.print(
            f"[yellow]--parallel {count} on {len(state.cpus[0])} CPUs: fewer CPUs than "
            "testbeds, so the testbeds share every CPU (their loads compete)[/]"
        )
    elif min(len(cpus) for cpus in state.cpus) < 2:
        console.print(
            f"[yellow]--parallel {count}: a testbed gets one CPU; on a 2-core host some loads "
            "were measurably slower than on one testbed (docs/running.md): compare with a run "
            "on one testbed before trusting the figures[/]"
        )
    console.print(
        f"[bold]{c.name}[/]: {len(plan.runs)} runs on {count} testbeds in parallel -> "
        f"{parts.parent / state.merged} (each testbed's log: {parts}/testbed<i>.log)"
    )
    lanes = [
        Lane(i, state.cpus[i - 1], parts / shard_dir_name(cid, i, count), parts / f"testbed{i}.log")
        for i in range(1, count + 1)
    ]
    # One parent per parts directory (each child also locks its own directory).
    with store.sole_writer(parts):

        def argv_of(lane: Lane) -> list[str]:
            own = replace(options, resume=lane.dir if lane.dir.is_dir() else None)
            shard = Shard(lane.number, count, ShardBy.repetition)
            return child_argv(campaign_file, shard, parts, cid, own)

        outcome = _run_lanes(campaign_file, parts, lanes, argv_of, len(plan.runs), console)
        finished = outcome.finished or dt.datetime.now(dt.UTC)
        state.invocations.append(
            {
                "started_at": outcome.started.isoformat(),
                "finished_at": finished.isoformat(),
                "wall_s": round((finished - outcome.started).total_seconds(), 1),
                "interrupted": outcome.interrupted,
                "exit_codes": [lane.exit_code for lane in lanes],
            }
        )
        store.write_json(parts / STATE_FILE, state.model_dump(mode="json"))
        if not outcome.interrupted:
            outcome.merged, outcome.check = _merge(parts, parts.parent / state.merged, state, lanes)
    return outcome


def _run_lanes(
    campaign_file: Path,
    parts: Path,
    lanes: list[Lane],
    argv_of: Callable[[Lane], list[str]],
    total: int,
    console: Console,
) -> ParallelOutcome:
    """Every lane's child started on its CPU set and waited for; on Ctrl-C or SIGTERM
    each stopped; every testbed a dead child left behind torn down."""
    outcome = ParallelOutcome(campaign_file, parts, None, lanes)
    count = len(lanes)
    try:
        for lane in lanes:
            argv = argv_of(lane)
            lane.log = lane.log_path.open("a")
            lane.log.write(f"==> {dt.datetime.now(dt.UTC).isoformat()} {' '.join(argv)}\n")
            lane.log.flush()
            lane.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=lane.log,
                stderr=subprocess.STDOUT,
                # Its own session: a Ctrl-C in the terminal reaches the parent only, which
                # then stops each child exactly once.
                start_new_session=True,
                preexec_fn=functools.partial(_pin_and_follow_parent, lane.cpus),
            )
            console.print(
                f"testbed {lane.number}/{count}: pid {lane.proc.pid}, "
                f"cpus {','.join(map(str, lane.cpus))}"
            )
        _wait(lanes, total, console)
    except KeyboardInterrupt:
        outcome.interrupted = True
        _stop(lanes, console)
    finally:
        for lane in lanes:
            _tear_down_leftovers(lane)
            if lane.log is not None:
                lane.log.close()
    if any(lane.exit_code == 130 for lane in lanes):
        outcome.interrupted = True
    outcome.finished = dt.datetime.now(dt.UTC)
    return outcome


def _wait(lanes: list[Lane], total: int, console: Console) -> None:
    last = time.monotonic()
    while True:
        running = False
        for lane in lanes:
            if lane.proc is not None and lane.exit_code is None:
                code = lane.proc.poll()
                if code is None:
                    running = True
                else:
                    lane.exit_code = code
                    console.print(f"testbed {lane.number}: ended, exit code {code}")
        if not running:
            return
        if time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            done = [lane.runs_recorded() for lane in lanes]
            console.print(
                f"{sum(done)}/{total} runs with a record: "
                + ", ".join(
                    f"testbed {lane.number} {n}" for lane, n in zip(lanes, done, strict=True)
                )
            )
        time.sleep(1.0)


def _stop(lanes: list[Lane], console: Console) -> None:
    """One SIGTERM to every running child, then wait for their teardown; a child still
    running after STOP_TIMEOUT_S is killed (its testbed is then torn down here)."""
    # A second Ctrl-C must not cut the wait for the children's teardown short.
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        running = [lane for lane in lanes if lane.proc is not None and lane.proc.poll() is None]
        console.print(f"[yellow]stopping {len(running)} testbed(s): each tears its testbed down[/]")
        for lane in running:
            assert lane.proc is not None
            lane.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for lane in lanes:
            if lane.proc is None:
                continue
            try:
                lane.exit_code = lane.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                lane.proc.kill()
                lane.killed = True
                lane.exit_code = lane.proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _tear_down_leftovers(lane: Lane) -> None:
    """A testbed its child brought up and did not remove (the child was killed, or died):
    torn down here. Only testbeds whose state names that child as owner."""
    if lane.proc is None or lane.proc.poll() is None or not (lane.dir / store.META).is_file():
        return
    owned = Store()
    for label in store.read_meta(lane.dir).testbeds:
        head, _, number = str(label).partition("-")
        if head != "netns" or not number.isdigit():
            continue
        state = owned.read(int(number))
        if state is not None and state.owner_pid == lane.proc.pid:
            lifecycle.down(int(number), owned)
            lane.torn_down_here.append(int(number))


def _merge(
    parts: Path,
    merged: Path,
    state: ParallelState,
    lanes: list[Lane],
) -> tuple[Path, TestbedCheck]:
    """The lanes' directories merged into `merged` (a new directory; a resume replaces
    the one it made before), with how they ran and how their testbeds compare."""
    dirs = [lane.dir for lane in lanes if lane.dir.is_dir()]
    if not dirs:
        raise ClarkeError(f"no testbed made its results directory: see {parts}/testbed<i>.log")
    building = merged.with_name(merged.name + ".merging")
    shutil.rmtree(building, ignore_errors=True)
    merge(dirs, building)
    records = list(Journal.in_dir(building).records())
    check = check_testbeds(records)
    lane_meta: list[LaneRecord] = []
    for lane in lanes:
        meta = store.read_meta(lane.dir) if (lane.dir / store.META).is_file() else Meta()
        lane_meta.append(
            LaneRecord(
                shard=f"{lane.number}/{state.testbeds}",
                dir=lane.dir.name,
                cpus=lane.cpus,
                testbeds=meta.testbeds,
                exit_code=lane.exit_code,
                torn_down_by_parent=lane.torn_down_here,
            )
        )
    kept = store.MetaKeeper.open(building)
    kept.meta.parallel = ParallelRecord.model_validate(
        {
            "testbeds": state.testbeds,
            "shard_by": state.shard_by.value,
            "parts": parts.name,
            "shared_cpus": state.shared_cpus,
            "lanes": lane_meta,
            "invocations": state.invocations,
        }
    )
    kept.meta.testbed_check = check.to_json()
    kept.save()
    if merged.exists():
        parallel = store.read_meta(merged).parallel
        if (parallel.parts if parallel else None) != parts.name:
            raise InputError(f"{merged} exists and is not this parallel campaign's merge")
        shutil.rmtree(merged)
    building.rename(merged)
    return merged, check


def print_parallel_outcome(outcome: ParallelOutcome, console: Console) -> None:
    count = len(outcome.lanes)
    for lane in outcome.lanes:
        extra = (
            f", its testbed torn down here: {lane.torn_down_here}" if lane.torn_down_here else ""
        )
        if lane.exit_code not in (0, None):
            console.print(
                f"[yellow]testbed {lane.number}: exit code {lane.exit_code}"
                f"{' (killed)' if lane.killed else ''}{extra}; its log: {lane.log_path}[/]"
            )
    if outcome.interrupted:
        console.print(
            "[yellow]interrupted: every testbed torn down; continue with clarke run "
            f"{outcome.campaign_file} --parallel {count} --resume {outcome.parts}[/]",
            soft_wrap=True,  # one line, whatever the width: it is copied to resume
        )
        return
    if outcome.merged is None:
        return
    meta, journal = store.open_existing(outcome.merged)
    records = list(journal.records())
    lanes = meta.parallel.lanes if meta.parallel else []
    print_summary(
        summarise(records, sequential=sequential_of(outcome.merged)),
        f"{outcome.merged.name}: per cell (successful loads only), on {count} testbeds in parallel",
        console,
    )
    console.print(
        f"ran on {count} testbeds in parallel: "
        + "; ".join(
            f"{lane.shard} {','.join(lane.testbeds) or '-'} on cpus {','.join(map(str, lane.cpus))}"
            for lane in lanes
        )
    )
    if outcome.check is not None:
        print_check(outcome.check, console)
    missing = meta.missing_runs
    console.print(
        f"results: {outcome.merged}  ({len(records)} attempts, {len(missing)} runs without a "
        f"successful load; each testbed's directory and log in {outcome.parts})"
    )
    if outcome.failed_lanes:
        console.print(
            f"[red]a testbed did not finish: clarke run {outcome.campaign_file} --parallel "
            f"{count} --resume {outcome.parts}[/]",
            soft_wrap=True,
        )


def print_check(check: TestbedCheck, console: Console) -> None:
    from rich.table import Table

    t = Table(title=f"testbeds compared with testbed {check.reference}, per cell (medians, ms)")
    for col in ("cell", "metric", "testbed", "n", "median", f"n {check.reference}",
                f"median {check.reference}", "ratio", "p (Holm)", "verdict"):  # fmt: skip
        t.add_column(col)
    for r in check.rows:
        t.add_row(
            r.cell.path, r.metric, r.testbed, str(r.n_testbed), _ms(r.median_testbed),
            str(r.n_reference), _ms(r.median_reference),
            "-" if r.ratio != r.ratio else f"{r.ratio:.3f}",
            "-" if r.p_holm != r.p_holm else f"{r.p_holm:.4f}", r.verdict,
            style="yellow" if r.disagrees else "",
        )  # fmt: skip
    console.print(t)
    lines = warnings(check)
    for line in lines:
        console.print(f"[yellow]warning: the testbeds disagree: {line}[/]")
    if not check.judged:
        console.print(
            f"no cell has {MIN_SAMPLES} or more successful loads on every testbed: the "
            "testbeds' medians are shown, not judged"
        )
    elif not lines:
        console.print(
            f"the testbeds agree within noise on the {check.judged} (cell, metric) pairs with "
            f"{MIN_SAMPLES} or more successful loads on each testbed"
        )


def _ms(v: float) -> str:
    return "-" if v != v else f"{v:,.1f}"
