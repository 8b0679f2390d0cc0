"""`clarke run`: a whole campaign on a testbed (netns or compose), from plan to summary.

Order of work: validate and expand the campaign; create (or reopen, with --resume) the
results directory; bring the testbed up with the first run's link profile; verify the
link before each profile's first run and after its last run; run the loop; print the
summary; tear the testbed down, also after Ctrl-C or an error."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from clarke import __version__, gitinfo
from clarke.campaign.plan import Plan, Run, page_registry, plan_file
from clarke.errors import ClarkeError, InputError, UnknownName
from clarke.pages.models import Units
from clarke.results import store
from clarke.results.journal import Journal
from clarke.results.record import RunRecord, Status
from clarke.run.driver import AgentSession
from clarke.run.loop import Outcome, RecordContext, TestbedGone, execute
from clarke.run.report import print_summary
from clarke.run.session import NetnsSession
from clarke.run.summary import summarise

log = logging.getLogger(__name__)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    i, sep, n = text.partition("/")
    if not sep or not i.isdigit() or not n.isdigit() or not 1 <= int(i) <= int(n):
        raise InputError(f"--shard {text!r}: expected i/N with 1 <= i <= N, e.g. 1/4")
    return int(i), int(n)


SUBSTRATES = ("netns", "compose")


def open_session(substrate: str, profile: str, pages: list[str], **kw: Any) -> AgentSession:
    """The session for a substrate; both drive the roles through their agents."""
    if substrate == "netns":
        return NetnsSession(profile, pages, **kw)
    if substrate == "compose":
        from clarke.compose.session import ComposeSession

        if kw.pop("testbed_id", None) is not None:
            raise InputError("--testbed names a netns testbed; the compose stack has one")
        return ComposeSession(profile, pages, **kw)
    raise UnknownName("substrate", substrate, list(SUBSTRATES))


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
) -> tuple[Path, Outcome, list[RunRecord]]:
    plan: Plan = plan_file(campaign_file)
    c = plan.campaign
    sharding = parse_shard(shard)
    runs: list[Run] = plan.shard(*sharding) if sharding else plan.runs
    shard_label = f"{sharding[0]}/{sharding[1]}" if sharding else ""
    if resume:
        meta, journal = store.open_existing(resume)
        if meta.get("campaign") != c.name or meta.get("shard", "") != shard_label:
            raise InputError(
                f"{resume} holds campaign {meta.get('campaign')!r} shard "
                f"{meta.get('shard') or '-'}, not {c.name!r} shard {shard_label or '-'}"
            )
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
                "runs": [r.to_dict() for r in runs],
            },
            {
                "campaign": c.name,
                "campaign_id": cid,
                "shard": shard_label,
                "started_at": dt.datetime.now(dt.UTC).isoformat(),
                "git_rev": gitinfo.revision(),
                "clarke": __version__,
                "seed": plan.seed,
                "link": [],
            },
        )
        journal = Journal.in_dir(results_dir)
    console.print(f"[bold]{c.name}[/]: {len(runs)} runs -> {results_dir}")

    sink = None
    if influx_url:
        from clarke.results.influx import InfluxSink

        sink = InfluxSink.from_url(influx_url)
        try:
            sink.ensure_database()
        except ClarkeError as e:
            console.print(f"[yellow]InfluxDB not reachable ({e}); the journal keeps everything[/]")

    pages = sorted({r.page for r in runs})
    registry = page_registry(c, campaign_file)
    session = open_session(
        substrate,
        runs[0].profile if runs else c.matrices()[0][2].profiles[0],
        pages,
        engine=c.browser.engine.value,
        registry=registry,
        units=Units(c.pages.units),
        firefox=c.browser.binary,
        window=c.browser.window,
        testbed_id=testbed_id,
    )
    ctx = RecordContext(c.name, cid, c.browser.engine.value, gitinfo.revision(), shard_label)
    outcome = Outcome()
    checks: list[dict[str, Any]] = []
    try:
        session.start()
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        with journal, Progress(*columns, console=console, transient=False) as progress:
            task = progress.add_task("runs", total=len(runs))
            verified: set[str] = set()
            checked_after: set[str] = set()
            # A profile's link is checked again right after its last run, before another
            # profile replaces it, so every profile has a before and an after check.
            last_run_of = {run.profile: run.run_id for run in runs}

            def check_after(profile: str) -> None:
                progress.update(task, description=f"verifying link {profile}")
                try:
                    if session.current_profile != profile:
                        session.apply_profile(profile)
                    checks.append(session.verify_link(profile, "after", link_check))
                except ClarkeError as e:
                    checks.append({"phase": "after", "profile": profile, "error": f"{e.kind}: {e}"})
                store.update_meta(results_dir, link=checks)
                checked_after.add(profile)

            def before(run: Run) -> None:
                if run.profile not in verified:
                    progress.update(task, description=f"verifying link {run.profile}")
                    session.apply_profile(run.profile)
                    try:
                        checks.append(session.verify_link(run.profile, "before", link_check))
                    except ClarkeError as e:
                        # Recorded, not fatal: the loads themselves show whether the
                        # link carries pages.
                        checks.append(
                            {"phase": "before", "profile": run.profile, "error": f"{e.kind}: {e}"}
                        )
                        progress.console.print(f"[yellow]link check failed: {e}[/]")
                    store.update_meta(results_dir, link=checks)
                    verified.add(run.profile)
                progress.update(task, description=run.run_id)

            def after(record: RunRecord) -> None:
                final = record.status is Status.ok or record.attempt >= 1 + c.retries
                if final:
                    progress.advance(task)
                    if not console.is_terminal:
                        # No live bar in a log (docker compose logs, CI): a line per run.
                        t = progress.tasks[0]
                        eta = t.time_remaining
                        plt = record.metrics.get("plt_ms")
                        console.print(
                            f"[{int(t.completed)}/{len(runs)}] {record.run_id} "
                            f"{record.status.value}"
                            + (f" PLT {plt:.0f} ms" if plt is not None else "")
                            + (f", ETA {eta / 60:.0f} min" if eta is not None else "")
                        )
                if record.status is Status.failed:
                    progress.console.print(
                        f"[red]{record.run_id} attempt {record.attempt}: {record.reason}[/]"
                    )
                last = last_run_of.get(record.profile) == record.run_id
                if final and last and record.profile in verified - checked_after:
                    check_after(record.profile)

            outcome = execute(
                runs,
                session,
                journal,
                ctx,
                c.retries,
                sink,
                on_record=after,
                on_skip=lambda _r: progress.advance(task),
                before_run=before,
            )
            for profile in sorted(verified - checked_after):  # e.g. its last run was resumed
                check_after(profile)
            if runs:
                store.update_meta(
                    results_dir, link=checks, finished_at=dt.datetime.now(dt.UTC).isoformat()
                )
    except KeyboardInterrupt:
        outcome.interrupted = True
    except TestbedGone as e:
        outcome.aborted = str(e)
    finally:
        session.close()
    records = list(Journal.in_dir(results_dir).records())
    if sink is not None and not (outcome.interrupted or outcome.aborted):
        from clarke.results.influx import campaign_points

        meta, _ = store.open_existing(results_dir)
        try:
            sink.write_points(campaign_points(meta, records))
        except ClarkeError as e:
            outcome.sink_failures += 1
            console.print(f"[yellow]summary points not written: {e}[/]")
        sink.close()
    return results_dir, outcome, records


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
