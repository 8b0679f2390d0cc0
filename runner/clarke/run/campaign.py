"""`clarke run`: a whole campaign on a testbed (netns or compose), from plan to summary.

Order of work: validate and expand the campaign; check, before anything runs, every
part it needs (the link and server implementations and whether the link can take
every profile, the browser, the engine, root); create (or reopen, with --resume) the
results directory; bring the testbed up with the first profile; run the schedule (link
checks around each profile's runs, run/schedule.py) through the loop; print the
summary; tear the testbed down, also after Ctrl-C or an error."""

from __future__ import annotations

import datetime as dt
import difflib
import logging
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from clarke import __version__, gitinfo, pep_presets, profiles, registry, schema
from clarke.browser import browsertime_engine
from clarke.browser.client import Firefox
from clarke.campaign.model import Campaign
from clarke.campaign.plan import (
    CampaignPlan,
    Run,
    ShardBy,
    page_registry,
    plan_file,
    positions_per_profile,
)
from clarke.compose.substrate import ComposeSubstrate
from clarke.errors import ClarkeError, InputError, UnknownName
from clarke.pages.models import Units
from clarke.place import netns
from clarke.results import store
from clarke.results.journal import Journal
from clarke.results.record import RunRecord, Status
from clarke.results.summary import summarise
from clarke.run import captures
from clarke.run.captures import DEFAULT_MAX_MB, CaptureMode, CapturePolicy
from clarke.run.console import ProgressDisplay, print_summary
from clarke.run.loop import Outcome, RecordContext, TestbedGone, execute, finished
from clarke.run.schedule import LinkCheck, schedule
from clarke.run.session import Session, Substrate
from clarke.testbed.substrate import NetnsSubstrate
from clarke.vocab import PEP_NONE, SUBSTRATES, Browser, Engine

log = logging.getLogger(__name__)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    i, sep, n = text.partition("/")
    if not sep or not i.isdigit() or not n.isdigit() or not 1 <= int(i) <= int(n):
        raise InputError(f"--shard {text!r}: expected i/N with 1 <= i <= N, e.g. 1/4")
    return int(i), int(n)


def substrate_for(
    name: str,
    testbed_id: int | None = None,
    link: str | None = None,
    server: str | None = None,
    firefox: str | None = None,
) -> Substrate:
    """`firefox`: the client agent's browser binary (its start-up option)."""
    if name == "netns":
        return NetnsSubstrate(testbed_id, link, server, firefox=firefox)
    if name == "compose":
        if testbed_id is not None:
            raise InputError("--testbed names a netns testbed; the compose stack has one")
        return ComposeSubstrate(firefox=firefox)
    raise UnknownName("substrate", name, list(SUBSTRATES))


def preflight(
    c: Campaign,
    source: Path,
    runs: list[Run],
    substrate: str,
    link: str | None,
    server: str | None,
) -> tuple[str, str]:
    """Everything a campaign needs, checked before anything runs: the implementations
    (names, then whether the link can take each profile: exit 2), then what must be
    installed here (exit 3). On compose the link and the server check themselves in
    their containers; the session compares what they are with what was asked."""
    link_impl, server_impl = registry.campaign_choices(c, str(source), link, server)
    names = sorted({r.profile for r in runs})
    registry.check_profiles(link_impl, [(n, profiles.read(n)) for n in names])
    peps = sorted({r.pep for r in runs} - {PEP_NONE})
    if peps and substrate != "netns":
        raise InputError(
            f"{source}: pep {', '.join(peps)}: PEPs run on the netns substrate only (the "
            "compose images carry no PEP; docs/peps.md)"
        )
    if substrate == "netns":
        netns.require_root_and_tun()
        link_impl.check_environment()
        server_impl.check_environment()
        for pep in peps:
            registry.get("pep", pep_presets.read(pep).implementation).check_environment()
    check_browser(c)
    return link_impl.name, server_impl.name


def check_browser(c: Campaign) -> None:
    """The campaign's browsers and engine, installed here (exit 3)."""
    wanted = {b.value for _, _, m in c.matrices() for b in m.browser or [Browser.firefox]}
    if "firefox" in wanted:
        Firefox(c.browser.binary).check_environment()
    if "chromium" in wanted:
        registry.get("client", "chromium").check_environment()
    if c.browser.engine is Engine.browsertime:
        browsertime_engine.find_browsertime()


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


def run_campaign(
    campaign_file: Path,
    *,
    influx_url: str | None,
    resume: Path | None,
    shard: str | None,
    results_base: Path,
    campaign_id: str | None,
    testbed_id: int | None,
    console: Console,
    link_check: str = "full",
    substrate: str = "netns",
    link: str | None = None,
    server: str | None = None,
    capture: CaptureMode = CaptureMode.none,
    capture_max_bytes: int = DEFAULT_MAX_MB * 1_000_000,
    shard_by: ShardBy = ShardBy.run_index,
) -> tuple[Path, Outcome, list[RunRecord], list[Run]]:
    captures.check_substrate(capture, substrate)
    plan = plan_file(campaign_file)
    c = plan.campaign
    sharding = parse_shard(shard)
    runs: list[Run] = plan.shard(*sharding, shard_by) if sharding else plan.runs
    shard_label = f"{sharding[0]}/{sharding[1]}" if sharding else ""
    # Recorded only for a sharded plan and only when not the default, so that the files
    # of every other run stay as they were.
    assignment = (
        {"shard_by": shard_by.value} if sharding and shard_by is not ShardBy.run_index else {}
    )
    # The implementations asked for (options, else the campaign): an attached testbed
    # must have them; unnamed ones take the registry's defaults on a new testbed.
    wanted_link, wanted_server = c.implementations.combinations(link, server)[0]
    wanted = {"link": wanted_link, "server": wanted_server}
    link, server = preflight(c, campaign_file, runs, substrate, link, server)
    sub = substrate_for(
        substrate, testbed_id, wanted["link"], wanted["server"], firefox=c.browser.binary
    )
    writer = ExitStack()
    if resume:
        meta, journal = store.open_existing(resume)
        if meta.get("campaign") != c.name or meta.get("shard", "") != shard_label:
            raise InputError(
                f"{resume} holds campaign {meta.get('campaign')!r} shard "
                f"{meta.get('shard') or '-'}, not {c.name!r} shard {shard_label or '-'}"
            )
        if sharding and meta.get("shard_by", ShardBy.run_index.value) != shard_by.value:
            raise InputError(
                f"{resume} was sharded by {meta.get('shard_by', 'index')}, not by "
                f"{shard_by.value} (--shard-by)"
            )
        difference = campaign_difference(resume / store.CAMPAIGN_COPY, campaign_file)
        if difference:
            raise InputError(
                f"{campaign_file} is not the campaign {resume} was started with; a resume "
                f"runs the same campaign (start a new results directory for another):\n"
                f"{difference}"
            )
        writer.enter_context(store.sole_writer(resume))
        results_dir, cid = resume, meta["campaign_id"]
    else:
        cid = campaign_id or store.campaign_id(c.name)
        dirname = cid + (f"-shard{sharding[0]}of{sharding[1]}" if sharding else "")
        results_dir = store.create(
            results_base,
            dirname,
            campaign_file,
            {
                "campaign": c.name,
                "order": c.order.value,
                "seed": plan.seed,
                "count": len(plan.runs),
                "shard": shard_label,
                **assignment,
                "runs": [r.to_dict() for r in runs],
            },
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
            },
        )
        writer.enter_context(store.sole_writer(results_dir))
        journal = Journal.in_dir(results_dir)
    with writer:
        return _run_in(
            results_dir, cid, journal, plan, runs, shard_label, wanted, link, server, sub,
            influx_url=influx_url, console=console, link_check=link_check,
            capture=CapturePolicy(capture, results_dir, capture_max_bytes),
        )  # fmt: skip


def _run_in(
    results_dir: Path,
    cid: str,
    journal: Journal,
    plan: CampaignPlan,
    runs: list[Run],
    shard_label: str,
    wanted: dict[str, str | None],
    link: str,
    server: str,
    sub: Substrate,
    *,
    influx_url: str | None,
    console: Console,
    link_check: str,
    capture: CapturePolicy,
) -> tuple[Path, Outcome, list[RunRecord], list[Run]]:
    """The campaign's work in its results directory, whose lock the caller holds."""
    c = plan.campaign
    console.print(f"[bold]{c.name}[/]: {len(runs)} runs on the {link} link -> {results_dir}")

    sink = None
    if influx_url:
        from clarke.results.influx import InfluxSink  # influxdb_client: slow to import

        sink = InfluxSink.from_url(influx_url)
        try:
            sink.ensure_database()
        except ClarkeError as e:
            console.print(f"[yellow]InfluxDB not reachable ({e}); the journal keeps everything[/]")

    done, _, _ = finished(journal, c.retries)
    meta, _ = store.open_existing(results_dir)
    earlier = {
        (k.get("profile"), k.get("phase")) for k in meta.get("link") or [] if "error" not in k
    }
    steps = schedule(runs, done, earlier)
    first = next((s.profile for s in steps if isinstance(s, LinkCheck)), None)
    session = Session(
        sub,
        sorted({r.page for r in runs}),
        engine=c.browser.engine.value,
        registry=page_registry(c, plan.source),
        units=Units(c.pages.units),
        firefox=c.browser.binary,
        window=c.browser.window,
        capture=capture,
        slot_phase=c.slot_phase,
        repetitions=c.repetitions,
        positions=positions_per_profile(plan.runs),
    )
    session.start_ahead = c.browser.start_ahead
    outcome = Outcome()
    keeper: MetaKeeper | None = None
    try:
        session.start(first or (runs[0].profile if runs else c.matrices()[0][2].profiles[0]))
        testbed = testbed_label(sub)
        ctx = RecordContext(
            c.name, cid, c.browser.engine.value, gitinfo.revision(), shard_label, testbed
        )
        # Every testbed this directory was run on, one per invocation (a resume may get
        # another one): `clarke run --parallel` tears down a child's testbed from here
        # when the child could not.
        store.update_meta(results_dir, testbeds=[*(meta.get("testbeds") or []), testbed])
        for kind, name in wanted.items():
            if name is not None and session.implementations[kind] != name:
                raise InputError(
                    f"the testbed's {kind} is {session.implementations[kind]}, not {name}"
                )
        keeper = MetaKeeper(results_dir, session)
        with journal, ProgressDisplay(console, len(runs)) as display:
            outcome = execute(
                steps,
                session,
                journal,
                ctx,
                c.retries,
                sink,
                observer=Both(display, keeper),
                skipped=[r for r in runs if r.run_id in done],
                link_check=link_check,
            )
        keeper.save(finished_at=dt.datetime.now(dt.UTC).isoformat())
    except KeyboardInterrupt:
        outcome.interrupted = True
    except TestbedGone as e:
        outcome.aborted = str(e)
    finally:
        if keeper is not None:
            keeper.save()
        session.close()
    records = list(Journal.in_dir(results_dir).records())
    if sink is not None and not (outcome.interrupted or outcome.aborted):
        from clarke.results.influx import campaign_points  # as above

        meta, _ = store.open_existing(results_dir)
        try:
            sink.write_points(campaign_points(meta, records))
        except ClarkeError as e:
            outcome.sink_failures += 1
            console.print(f"[yellow]summary points not written: {e}[/]")
        sink.close()
    return results_dir, outcome, records, runs


def testbed_label(sub: Substrate) -> str:
    """What each record names as the testbed that ran it: `netns-<id>` (its namespaces
    are clk<id>-*), or the substrate's name (compose: there is one)."""
    if isinstance(sub, NetnsSubstrate) and sub.plan is not None:
        return f"netns-{sub.plan.id}"
    return sub.name


def campaign_difference(stored: Path, given: Path) -> str:
    """Where the campaign file given to a resume differs from the one the results
    directory was started with, as a unified diff of both campaigns' values (comments
    and layout do not count); empty when they are the same campaign."""
    try:
        before = schema.read(Campaign, stored).model_dump(mode="json")
    except ClarkeError as e:
        raise InputError(f"{stored}: the stored campaign cannot be read: {e}") from e
    after = schema.read(Campaign, given).model_dump(mode="json")
    if before == after:
        return ""
    lines = difflib.unified_diff(
        yaml.safe_dump(before, sort_keys=True).splitlines(),
        yaml.safe_dump(after, sort_keys=True).splitlines(),
        fromfile=str(stored),
        tofile=str(given),
        lineterm="",
        n=1,
    )
    return "\n".join(lines)


def print_outcome(
    results_dir: Path, outcome: Outcome, records: list[RunRecord], console: Console
) -> None:
    print_summary(
        summarise(records), f"{results_dir.name}: per cell (successful loads only)", console
    )
    failed_runs = {r.run_id for r in records} - {r.run_id for r in records if r.status is Status.ok}
    console.print(
        f"results: {results_dir}  ({len(records)} attempts, {len(failed_runs)} runs without a "
        f"successful load, {outcome.skipped} skipped as already done)"
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
