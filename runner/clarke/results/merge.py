"""Merging the results directories of the shards of one campaign into one directory.

`clarke run --shard i/N --campaign-id ID` writes `ID-shardIofN/` on each machine. The
merged directory looks like an unsharded run's: the campaign file, the whole plan, one
meta.json and one journal, so `compare`, `report`, `results export` and `results push`
take it as they take any results directory.

Refused (InputError, exit 2), naming the directories: shards of different campaigns
(campaign id, campaign file hash, plan seed or size differ), the same directory or shard
twice, shards of different shard counts, a run id in two shards, a shard whose plan is
not its slice of the campaign's plan. Accepted, and reported: runs of the plan without a
successful load (a shard that failed or never ran). With sequential repetitions, the runs
a shard passed over because their cell had stopped there are not missing: each shard's
stops are judged again from its records and the campaign's rule (clarke.sequential), and
kept in `merged_from` as the shard's meta.json had them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clarke import schema
from clarke.campaign.dimensions import Cell
from clarke.campaign.model import Campaign
from clarke.campaign.plan import ShardBy, expand
from clarke.errors import InputError
from clarke.json_value import JsonObject
from clarke.results import store
from clarke.results.journal import Journal
from clarke.results.meta import LinkCheckRecord, MergedShard, Meta
from clarke.results.record import RunRecord, Status
from clarke.results.summary import final_attempts
from clarke.sequential import StoppingRule


@dataclass
class Shard:
    path: Path
    meta: Meta
    plan: store.PlanFile
    campaign_sha256: str
    records: list[RunRecord]

    @property
    def label(self) -> str:
        return self.meta.shard or ""

    @property
    def shard_by(self) -> str:
        """How the plan was sliced (campaign.plan.ShardBy); index when not recorded."""
        return str(self.meta.shard_by or ShardBy.run_index.value)


@dataclass
class Merged:
    out: Path
    shards: list[Shard]
    planned: int
    records: int
    missing_runs: list[str] = field(default_factory=list)
    missing_shards: list[str] = field(default_factory=list)
    not_needed: int = 0  # runs of cells that had stopped (sequential repetitions)


def _read(d: Path) -> Shard:
    meta, journal = store.open_existing(d)
    plan_path, campaign_path = d / store.PLAN, d / store.CAMPAIGN_COPY
    for p in (plan_path, campaign_path):
        if not p.is_file():
            raise InputError(f"{d}: not a complete results directory (no {p.name})")
    return Shard(
        d,
        meta,
        store.read_plan(d),
        hashlib.sha256(campaign_path.read_bytes()).hexdigest(),
        list(journal.records()),
    )


def _same(shards: list[Shard], what: str, key: Callable[[Shard], object]) -> None:
    values: dict[str, list[str]] = {}
    for s in shards:
        values.setdefault(str(key(s)), []).append(str(s.path))
    if len(values) > 1:
        detail = "; ".join(f"{v!r} in {', '.join(ds)}" for v, ds in values.items())
        raise InputError(f"not shards of one campaign: different {what}: {detail}")


def _parse_label(s: Shard) -> tuple[int, int] | None:
    if not s.label:
        return None
    i, _, n = s.label.partition("/")
    return int(i), int(n)


def check(shards: list[Shard]) -> None:
    """Raise InputError unless the shards are disjoint parts of one campaign's plan."""
    paths = [s.path.resolve() for s in shards]
    twice = sorted({str(p) for p in paths if paths.count(p) > 1})
    if twice:
        raise InputError(f"the same results directory given twice: {', '.join(twice)}")
    _same(
        shards, "campaign ids", lambda s: s.meta.campaign_id if s.meta.has("campaign_id") else None
    )
    _same(shards, "campaign files (sha256 of campaign.yaml)", lambda s: s.campaign_sha256)
    _same(shards, "plan seeds", lambda s: s.plan.seed)
    _same(shards, "plan sizes", lambda s: s.plan.count)
    _same(shards, "shard counts", lambda s: (_parse_label(s) or (0, 1))[1])
    _same(shards, "shard assignments (--shard-by)", lambda s: s.shard_by)
    known = [b.value for b in ShardBy]
    for s in shards:
        if s.shard_by not in known:
            raise InputError(
                f"{s.path}: meta.json shard_by {s.shard_by!r}: expected one of {', '.join(known)}"
            )
    for s in shards:
        cid = s.meta.campaign_id if s.meta.has("campaign_id") else None
        bad = {r.campaign_id for r in s.records} - {cid}
        if bad:
            raise InputError(
                f"{s.path}: journal holds records of campaign ids {', '.join(sorted(bad))}, "
                f"not {cid}"
            )
    by_label: dict[str, list[str]] = {}
    for s in shards:
        by_label.setdefault(s.label or "(unsharded)", []).append(str(s.path))
    dup = {k: v for k, v in by_label.items() if len(v) > 1}
    if dup:
        raise InputError(
            "overlapping shards: "
            + "; ".join(f"shard {k} in {', '.join(v)}" for k, v in dup.items())
        )
    owner: dict[str, str] = {}
    clashes: dict[tuple[str, str], list[str]] = {}
    for s in shards:
        ids = {str(r["run_id"]) for r in s.plan.runs} | {r.run_id for r in s.records}
        for rid in sorted(ids):
            if rid in owner and owner[rid] != str(s.path):
                clashes.setdefault((owner[rid], str(s.path)), []).append(rid)
            owner.setdefault(rid, str(s.path))
    if clashes:
        raise InputError(
            "duplicate run ids: "
            + "; ".join(
                f"{len(ids)} runs in both {a} and {b} (e.g. {', '.join(ids[:3])})"
                for (a, b), ids in clashes.items()
            )
        )


def merge(dirs: list[Path], out: Path) -> Merged:
    if not dirs:
        raise InputError("no shard directories given")
    if out.exists():
        raise InputError(f"{out} exists; merge writes a new directory")
    shards = [_read(d) for d in dirs]
    check(shards)
    first = shards[0]
    campaign_file = first.path / store.CAMPAIGN_COPY
    plan = expand(schema.read(Campaign, campaign_file), campaign_file, first.plan.seed)
    full = [r.to_dict() for r in plan.runs]
    if len(full) != first.plan.count:
        raise InputError(
            f"{first.path}: plan.json counts {first.plan.count} runs but its "
            f"campaign file expands to {len(full)}"
        )
    full_by_id = {r["run_id"]: r for r in full}
    for s in shards:
        label = _parse_label(s)
        want = [
            r.to_dict() for r in (plan.shard(*label, ShardBy(s.shard_by)) if label else plan.runs)
        ]
        if not store.same_runs(s.plan.runs, want):
            raise InputError(
                f"{s.path}: its plan is not shard {s.label or '-'} of the campaign's plan "
                "(run with another Clarke version or plan order?)"
            )
        strangers = sorted({r.run_id for r in s.records} - set(full_by_id))
        if strangers:
            raise InputError(f"{s.path}: records of runs not in the plan: {', '.join(strangers)}")
    labels = [lbl for s in shards if (lbl := _parse_label(s))]
    count = labels[0][1] if labels else 1
    missing_shards = (
        [f"{i}/{count}" for i in range(1, count + 1) if (i, count) not in labels] if labels else []
    )
    ok = {r.run_id for s in shards for r in s.records if r.status is Status.ok}
    rule = plan.campaign.stopping
    unneeded = set() if rule is None else {rid for s in shards for rid in _not_needed(s, rule)}
    missing = [str(r["run_id"]) for r in full if r["run_id"] not in ok | unneeded]

    records = sorted(
        (r for s in shards for r in s.records),
        key=lambda r: (r.started_at, r.run_index, r.attempt),
    )
    link = [_in_shard(c, s.label) for s in shards for c in s.meta.link]
    started = [str(s.meta.started_at) for s in shards if s.meta.started_at]
    finished = [str(s.meta.finished_at) for s in shards if s.meta.finished_at]
    revs = sorted({s.meta.git_rev for s in shards})
    meta = Meta(
        campaign=first.meta.campaign,
        campaign_id=first.meta.campaign_id,
        shard="",
        started_at=min(started) if started else None,
        git_rev=revs[0] if len(revs) == 1 else ",".join(revs),
        clarke=first.meta.clarke,
        seed=first.plan.seed,
    )
    if first.shard_by != ShardBy.run_index.value:
        meta.shard_by = first.shard_by
    meta.link = link
    meta.merged_from = [
        _merged_shard(s) for s in sorted(shards, key=lambda s: _parse_label(s) or (0, 0))
    ]
    meta.missing_shards, meta.missing_runs = missing_shards, missing
    if len(finished) == len(shards):
        meta.finished_at = max(finished)
    recorded = {r["index"]: r for s in shards for r in s.plan.runs}
    merged_plan: JsonObject = {
        "campaign": first.plan.campaign,
        "order": first.plan.order,
        "seed": first.plan.seed,
        "count": len(full),
        "shard": "",
        # The runs as the shards recorded them (the expansion only for a missing shard's).
        "runs": [recorded.get(r["index"], r) for r in full],
    }
    d = store.create(out.parent, out.name, campaign_file, merged_plan, meta)
    with Journal.in_dir(d) as journal:
        for r in records:
            journal.append(r)
    return Merged(d, shards, len(full), len(records), missing, missing_shards, len(unneeded))


def _in_shard(check: LinkCheckRecord, label: str) -> LinkCheckRecord:
    """A shard's link check as the merged directory lists it: with its shard."""
    out = check.model_copy()
    out.shard = label
    return out


def _merged_shard(s: Shard) -> MergedShard:
    """A shard as the merged directory's meta.json lists it."""
    out = MergedShard(
        dir=s.path.name,
        shard=s.label,
        started_at=s.meta.started_at,
        finished_at=s.meta.finished_at,
        git_rev=s.meta.git_rev if s.meta.has("git_rev") else None,
        testbeds=s.meta.testbeds,
        runs=len(s.plan.runs),
        records=len(s.records),
    )
    if s.meta.sequential:
        out.sequential = s.meta.sequential
    return out


def _not_needed(s: Shard, rule: StoppingRule) -> set[str]:
    """The shard's runs without a record whose cell had stopped there."""
    final = final_attempts(s.records)
    planned: dict[Cell, list[str]] = {}
    for run in s.plan.runs:
        planned.setdefault(Cell.parse(run), []).append(str(run["run_id"]))
    out: set[str] = set()
    for run_ids in planned.values():
        tried = [final[rid] for rid in run_ids if rid in final]
        values = [
            r.metrics[rule.metric]
            for r in tried
            if r.status is Status.ok and rule.metric in r.metrics
        ]
        if rule.decide(values, len(tried), len(run_ids)).stopped:
            out |= {rid for rid in run_ids if rid not in final}
    return out
