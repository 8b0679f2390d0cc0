"""`clarke run`: a whole campaign on a testbed (netns or compose), from plan to summary.

Order of work: the campaign, read and planned once by the caller; check, before anything
runs, every part it needs (preflight.py); create (or reopen, with --resume) the results
directory; bring the testbed up with the first profile; run the steps (link checks
around each profile's runs, link_checks.py) through the loop; print the summary; tear the
testbed down, also after Ctrl-C or an error."""

from __future__ import annotations

import datetime as dt
import logging
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from clarke import __version__, gitinfo
from clarke.campaign.dimensions import PROFILE
from clarke.campaign.plan import CampaignPlan, Run, ShardBy, expand
from clarke.errors import ClarkeError, InputError
from clarke.json_value import JsonObject
from clarke.results import store
from clarke.results.journal import Journal
from clarke.results.meta import Meta
from clarke.results.record import RunRecord, Status
from clarke.results.store import MetaKeeper, PlanFile
from clarke.results.summary import sequential_of, summarise
from clarke.run.loop.console import ProgressDisplay, print_summary
from clarke.run.loop.link_checks import LinkCheck, with_link_checks
from clarke.run.loop.loop import (
    LoopSettings,
    Outcome,
    RecordContext,
    TestbedGone,
    execute,
    finished,
)
from clarke.run.loop.meta import Both, CampaignMeta
from clarke.run.loop.options import RunOptions
from clarke.run.loop.preflight import preflight, substrate_for
from clarke.run.loop.resume import require_same_campaign
from clarke.run.loop.stopping import Stopping
from clarke.run.session import captures
from clarke.run.session.captures import CapturePolicy
from clarke.run.session.session import Session, Substrate
from clarke.run.session.settings import SessionSettings
from clarke.testbed.substrate import NetnsSubstrate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finished:
    """What a campaign run leaves: its results directory, how the loop ended, every
    record in the journal, and the runs it was to run (the plan, or its shard)."""

    results_dir: Path
    outcome: Outcome
    records: list[RunRecord]
    runs: list[Run]


@dataclass(frozen=True)
class Directory:
    """A results directory the campaign writes to, its lock held by the caller; its
    meta.json, read once, in `meta`'s keeping."""

    path: Path
    campaign_id: str
    journal: Journal
    shard_label: str
    link: str  # the link implementation it runs on
    meta: MetaKeeper


def run_campaign(plan: CampaignPlan, options: RunOptions, console: Console) -> Finished:
    """`plan` (or the shard `options` name) run as `options` say."""
    captures.check_substrate(options.capture, options.substrate)
    # A resume runs the recorded plan (its seed too), checked before anything else.
    recorded = store.read_plan(options.resume) if options.resume else None
    if recorded is not None and recorded.seed != plan.seed:
        plan = replace(expand(plan.campaign, plan.source, recorded.seed), sites=plan.sites)
    c = plan.campaign
    shard = options.shard
    runs: list[Run] = plan.shard(shard.index, shard.count, shard.by) if shard else plan.runs
    # The implementations asked for (options, else the campaign): an attached testbed
    # must have them; unnamed ones take the registry's defaults on a new testbed.
    wanted_link, wanted_server = c.implementations.combinations(options.link, options.server)[0]
    wanted = options.on(wanted_link, wanted_server)
    link, server = preflight(plan, runs, options)
    sub = substrate_for(wanted, firefox=c.browser.binary)
    writer = ExitStack()
    with writer:
        directory = _open(plan, runs, options, writer, (link, server), recorded)
        return _run_in(directory, plan, runs, wanted, sub, console)


def _open(
    plan: CampaignPlan,
    runs: list[Run],
    options: RunOptions,
    writer: ExitStack,
    implementations: tuple[str, str],
    recorded: PlanFile | None,
) -> Directory:
    """The results directory: `options.resume` checked to hold this campaign and shard
    (its plan.json, `recorded`, too), or a new one; its sole-writer lock entered on
    `writer`."""
    c, shard = plan.campaign, options.shard
    shard_label = shard.label if shard else ""
    # Recorded only for a sharded plan and only when not the default, so that the files
    # of every other run stay as they were.
    assignment = {"shard_by": shard.by.value} if shard and shard.by is not ShardBy.run_index else {}
    resume = options.resume
    if resume:
        meta, journal = store.open_existing(resume)
        if meta.campaign != c.name or meta.shard != shard_label:
            raise InputError(
                f"{resume} holds campaign {meta.campaign!r} shard "
                f"{meta.shard or '-'}, not {c.name!r} shard {shard_label or '-'}"
            )
        by = meta.shard_by if meta.has("shard_by") else ShardBy.run_index.value
        if shard and by != shard.by.value:
            raise InputError(f"{resume} was sharded by {by}, not by {shard.by.value} (--shard-by)")
        require_same_campaign(resume, plan)
        assert recorded is not None
        store.check_plan(resume, recorded, c.name, len(plan.runs), [r.to_dict() for r in runs])
        _check_sites(resume, recorded, plan)
        writer.enter_context(store.sole_writer(resume))
        kept = MetaKeeper(resume, meta)
        return Directory(resume, meta.campaign_id, journal, shard_label, implementations[0], kept)
    cid = options.campaign_id or store.campaign_id(c.name)
    dirname = cid + (f"-shard{shard.index}of{shard.count}" if shard else "")
    link, server = implementations
    results_dir = store.create(
        options.results_base,
        dirname,
        plan.source,
        {
            "campaign": c.name,
            "order": c.order.value,
            "seed": plan.seed,
            "count": len(plan.runs),
            "shard": shard_label,
            **assignment,
            **_sites(plan),
            "runs": [r.to_dict() for r in runs],
        },
        Meta.model_validate(
            {
                "campaign": c.name,
                "campaign_id": cid,
                "shard": shard_label,
                **assignment,
                "started_at": dt.datetime.now(dt.UTC).isoformat(),
                "git_rev": gitinfo.revision(),
                "clarke": __version__,
                "seed": plan.seed,
                "implementations": {"link": link, "server": server},
                "link": [],
            }
        ),
    )
    writer.enter_context(store.sole_writer(results_dir))
    kept = MetaKeeper.open(results_dir)
    return Directory(results_dir, cid, Journal.in_dir(results_dir), shard_label, link, kept)


def _sites(plan: CampaignPlan) -> JsonObject:
    """plan.json's `sites`: each recorded site the plan replays, with its digests (none:
    nothing, so that a campaign without sites writes the plan it always did)."""
    if not plan.sites:
        return {}
    return {"sites": {given: s.describe() for given, s in plan.sites.items()}}


def _check_sites(d: Path, recorded: PlanFile, plan: CampaignPlan) -> None:
    """A resume replays the archives the campaign started with (by site.json's digest)."""
    then = (recorded.model_extra or {}).get("sites") or {}
    changed = [
        f"{given} (site.json {str((then.get(given) or {}).get('digest', 'none'))[:12]} then, "
        f"{s.digest[:12]} now)"
        for given, s in plan.sites.items()
        if (then.get(given) or {}).get("digest") != s.digest
    ]
    if changed:
        raise InputError(
            f"{d}: a recorded site changed since the campaign started: {'; '.join(changed)}; "
            "a resume replays the same archives (start a new results directory)"
        )


def _run_in(
    d: Directory,
    plan: CampaignPlan,
    runs: list[Run],
    wanted: RunOptions,
    sub: Substrate,
    console: Console,
) -> Finished:
    """The campaign's work in its results directory, whose lock the caller holds;
    `wanted`: the options with the implementations asked for."""
    c = plan.campaign
    console.print(f"[bold]{c.name}[/]: {len(runs)} runs on the {d.link} link -> {d.path}")

    sink = None
    if wanted.influx_url:
        from clarke.results.influx import InfluxSink  # influxdb_client: slow to import

        sink = InfluxSink.from_url(wanted.influx_url)
        try:
            sink.ensure_database()
        except ClarkeError as e:
            console.print(f"[yellow]InfluxDB not reachable ({e}); the journal keeps everything[/]")

    done, _, _ = finished(d.journal, c.retries)
    meta = d.meta.meta
    earlier = {(k.profile or "", k.phase or "") for k in meta.measured_links()}
    rule = c.stopping
    stopping = None if rule is None else Stopping.of_journal(rule, runs, d.journal.records(), done)
    # Runs of cells that stopped in an earlier invocation are passed over like finished
    # ones (no link check around a stretch of them).
    unneeded = {r.run_id for r in stopping.unneeded(runs)} - done if stopping else set()
    steps = with_link_checks(runs, done | unneeded, earlier)
    first = next((s.profile for s in steps if isinstance(s, LinkCheck)), None)
    capture = CapturePolicy(wanted.capture, d.path, wanted.capture_max_bytes)
    pages = sorted({r.page for r in runs if r.cell.site is None})  # a site is its own page
    session = Session(sub, pages, SessionSettings.of_plan(plan, capture))
    outcome = Outcome()
    keeper: CampaignMeta | None = None
    try:
        session.start(first or (runs[0].cell.link if runs else c.values(PROFILE)[0]))
        testbed = testbed_label(sub)
        ctx = RecordContext(
            c.name, d.campaign_id, c.browser.engine.value, gitinfo.revision(), d.shard_label,
            testbed,
        )  # fmt: skip
        # Every testbed this directory was run on, one per invocation (a resume may get
        # another one): `clarke run --parallel` tears down a child's testbed from here
        # when the child could not.
        meta.testbeds = [*meta.testbeds, testbed]
        d.meta.save()
        for kind, name in (("link", wanted.link), ("server", wanted.server)):
            if name is not None and session.implementations[kind] != name:
                raise InputError(
                    f"the testbed's {kind} is {session.implementations[kind]}, not {name}"
                )
        keeper = CampaignMeta(d.meta, session, rule)
        checks = sum(isinstance(s, LinkCheck) for s in steps)
        with d.journal, ProgressDisplay(console, len(runs), checks) as display:
            settings = LoopSettings(
                c.retries,
                wanted.link_check,
                sink,
                observer=Both(display, keeper),
                skipped=[r for r in runs if r.run_id in done],
                stopping=stopping,
                passed_over=[r for r in runs if r.run_id in unneeded],
            )
            outcome = execute(steps, session, d.journal, ctx, settings)
        keeper.save(finished_at=dt.datetime.now(dt.UTC).isoformat())
    except KeyboardInterrupt:
        outcome.interrupted = True
    except TestbedGone as e:
        outcome.aborted = str(e)
    finally:
        if keeper is not None:
            keeper.save()
        session.close()
    records = list(Journal.in_dir(d.path).records())
    if sink is not None and not (outcome.interrupted or outcome.aborted):
        from clarke.results.influx import campaign_points  # as above

        try:
            sink.write_points(campaign_points(meta, records, sequential_of(d.path)))
        except ClarkeError as e:
            outcome.sink_failures += 1
            console.print(f"[yellow]summary points not written: {e}[/]")
        sink.close()
    return Finished(d.path, outcome, records, runs)


def testbed_label(sub: Substrate) -> str:
    """What each record names as the testbed that ran it: `netns-<id>` (its namespaces
    are clk<id>-*), or the substrate's name (compose: there is one)."""
    if isinstance(sub, NetnsSubstrate) and sub.plan is not None:
        return f"netns-{sub.plan.id}"
    return sub.name


def print_outcome(
    results_dir: Path, outcome: Outcome, records: list[RunRecord], console: Console
) -> None:
    cells = summarise(records, sequential=sequential_of(results_dir))
    print_summary(cells, f"{results_dir.name}: per cell (successful loads only)", console)
    failed_runs = {r.run_id for r in records} - {r.run_id for r in records if r.status is Status.ok}
    not_needed = (
        f", {outcome.dropped} not needed (their cells had stopped)" if outcome.dropped else ""
    )
    console.print(
        f"results: {results_dir}  ({len(records)} attempts, {len(failed_runs)} runs without a "
        f"successful load, {outcome.skipped} skipped as already done{not_needed})"
    )
    if outcome.sink_failures:
        console.print(
            f"[yellow]InfluxDB writes failed {outcome.sink_failures} times: "
            f"clarke results push {results_dir} --influx URL[/]"
        )
    if outcome.interrupted:
        console.print(
            f"[yellow]interrupted: continue with clarke run --resume {results_dir} ...[/]"
        )
    if outcome.aborted:
        console.print(f"[red]stopped: {outcome.aborted}: clarke run --resume {results_dir}[/]")


def none_succeeded(runs: list[Run], records: list[RunRecord]) -> bool:
    """No run of the plan (this shard) has a successful load."""
    ok = {r.run_id for r in records if r.status is Status.ok}
    return bool(runs) and not any(r.run_id in ok for r in runs)
