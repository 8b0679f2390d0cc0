"""Builders for result records in tests (the journal and sinks are tested with records
shaped like the ones page loads produce)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from clarke import schema
from clarke.browser.load import LoadResult
from clarke.campaign import dimensions
from clarke.campaign.cross import CrossTraffic
from clarke.campaign.dimensions import CC, PROFILE, SITE_NONE, Cell
from clarke.campaign.model import Campaign
from clarke.campaign.plan import CampaignPlan, Run, ShardBy, expand, plan_file, shard_numbers
from clarke.contract import PepConfig
from clarke.errors import ClarkeError
from clarke.place.plan import Addresses
from clarke.results import store
from clarke.results.details import LinkInForce, LoadDetails
from clarke.results.journal import Journal
from clarke.results.meta import LinkCheckRecord, Meta
from clarke.results.record import RunRecord, Status
from clarke.results.server_records import ServerConnection
from clarke.results.station_records import LinkRoleStats, PepStationStats
from clarke.run.session.pep import pep_verdict
from clarke.vocab import PEP_NONE, DnsCache

BASE = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.UTC)
# Recorded campaigns: recorded-lan predates per-connection rows; recorded-connections has them.
RECORDED_LAN = Path("tests/data/recorded-lan")
RECORDED_CONNECTIONS = Path("tests/data/recorded-connections")
# recorded-schedule: loads on a scheduled profile, each with its navigation's wall time.
RECORDED_SCHEDULE = Path("tests/data/recorded-schedule")
RECORDED_SITES = Path("tests/data/recorded-sites")


def reads_connections(query: str) -> bool:
    """Whether a dashboard query reads what loads have had since per-connection rows:
    the `connection` measurement or the per-load concurrency metrics."""
    return 'FROM "connection"' in query or '"max_concurrent_connections"' in query


def record(
    i: int, *, status: Status = Status.ok, campaign_id: str = "t-20261122T120000Z"
) -> RunRecord:
    start = BASE + dt.timedelta(seconds=10 * i, microseconds=i)
    return RunRecord(
        campaign="t",
        campaign_id=campaign_id,
        run_id=f"lan-h2-bbr-uniform-100k-r{i + 1}",
        run_index=i,
        attempt=1,
        scenarios=["main"],
        profile="lan",
        http="2",
        cc="bbr",
        model="uniform",
        size="100k",
        page="uniform-100k",
        repetition=i + 1,
        connections=6,
        engine="selenium",
        browser="firefox",
        browser_version="153.0esr",
        implementations={"link": "satlink", "server": "origin"},
        versions={"clarke": "0.1.0"},
        git_rev="abc1234",
        started_at=start,
        finished_at=start + dt.timedelta(seconds=2),
        status=status,
        reason="" if status is Status.ok else "fell back to h2: 3 of 9 resources",
        metrics={"plt_ms": 100.0 + i, "fcp_ms": 50.5 + i, "lcp_ms": 80.25 + i}
        if status is Status.ok
        else {},
    )


def link_stats(stats: dict[str, Any]) -> dict[str, LinkRoleStats]:
    """The link roles' /stats (role -> what it said) as a load's `link_stats`."""
    return {role: LinkRoleStats.model_validate(said) for role, said in stats.items()}


def server_connections(conns: list[dict[str, Any]]) -> list[ServerConnection]:
    """Connection records as the server's /stats gives them."""
    return [ServerConnection.model_validate(c) for c in conns]


def pep_stations(stations: dict[str, dict[str, Any]]) -> dict[str, PepStationStats]:
    """The stations' /pep/stats (role -> what it said) as a load's `pep.stations`."""
    return {role: PepStationStats.model_validate(said) for role, said in stations.items()}


def pep_verdict_of(
    pep: str,
    http: str,
    conns: list[dict[str, Any]],
    stations: dict[str, dict[str, Any]],
    plan: Addresses,
    asked: PepConfig | None = None,
) -> str:
    """run.session.pep.pep_verdict of what the server and the stations said."""
    return pep_verdict(pep, http, server_connections(conns), pep_stations(stations), plan, asked)


def split_results(src: Path, base: Path, count: int, by: str = "index") -> list[Path]:
    """Shard directories of `src` as `clarke run --shard i/count --shard-by BY` writes
    them; with `by` repetition each record also names a testbed (netns-<i>), as the
    lanes of `clarke run --parallel` do."""
    meta, journal = store.open_existing(src)
    plan = json.loads((src / store.PLAN).read_text())
    records = list(journal.records())
    cid = meta.campaign_id
    campaign_file = src / store.CAMPAIGN_COPY
    runs = expand(schema.read(Campaign, campaign_file), campaign_file, plan.get("seed")).runs
    number = shard_numbers(runs, count, ShardBy(by))
    assignment = {} if by == "index" else {"shard_by": by}
    out = []
    for i in range(1, count + 1):
        label = f"{i}/{count}"
        d = store.create(
            base,
            f"{cid}-shard{i}of{count}",
            campaign_file,
            {
                **plan,
                "shard": label,
                **assignment,
                "runs": [r for r in plan["runs"] if number[r["index"]] == i],
            },
            _shard_meta(meta, label, by),
        )
        testbed = {"testbed": f"netns-{i}"} if by != "index" else {}
        with Journal.in_dir(d) as j:
            for r in records:
                if number[r.run_index] == i:
                    j.append(r.model_copy(update={"shard": label, **testbed}))
        out.append(d)
    return out


def _shard_meta(meta: Meta, label: str, by: str) -> Meta:
    """`meta` as a shard's: its label, and how the plan was sliced unless by index."""
    out = meta.model_copy(deep=True)
    out.shard = label
    if by != "index":
        out.shard_by = by
    return out


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined and comments
    dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        word, _, rest = (pending + line).strip().partition(" ")
        pending = ""
        out.append((word.upper(), rest.strip()))
    assert not pending, f"{path} ends in a continuation"
    return out


def dockerfile_args(instructions: list[tuple[str, str]]) -> dict[str, str | None]:
    """A Dockerfile's build arguments and their defaults (None: it has none)."""
    args: dict[str, str | None] = {}
    for kind, text in instructions:
        if kind == "ARG":
            name, equals, default = text.partition("=")
            args[name] = default if equals else None
    return args


def moved(r: RunRecord, **values: object) -> RunRecord:
    """`r` in another cell: the dimensions named (by record field) take these values."""
    return r.model_copy(update={"cell": Cell.parse({**r.cell.record(), **values})})


# Each server setting's default: what a server runs before anything is put in force.
DEFAULTS = {d.setting.field: d.default_text() for d in dimensions.seal() if d.setting is not None}


class FakeSession:
    """A testbed as the loop sees it. `script`: per run id, what each attempt does: "ok",
    "fail" (a failed load), "down" (the testbed does not answer); `plt`: a successful
    load's PLT in ms for a run (100 without it)."""

    def __init__(
        self,
        script: dict[str, list[str]] | None = None,
        plt: Callable[[Run], float] | None = None,
    ) -> None:
        self.implementations = {"link": "satlink", "server": "origin", "client": "firefox"}
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.plt = plt
        self.profile: str | None = None
        self.cc: str | None = None
        self.server_settings: dict[str, object] = {}
        self.site: tuple[str, DnsCache] = (SITE_NONE, DnsCache.none)
        self.applied: list[tuple[str, str]] = []
        self.events: list[str] = []

    def versions(self) -> dict[str, str]:
        return {"clarke": "test"}

    def ensure_profile(self, name: str) -> object:
        if name != self.profile:
            self.profile = name
            self.applied.append(("profile", name))
        return None

    def ensure_cross(self, spec: CrossTraffic, page: str = "") -> None:
        assert not spec.active

    def ensure_pep(self, name: str, cc: str) -> object:
        assert name == PEP_NONE
        return None

    def ensure_cc(self, cc: str) -> object:
        if cc != self.cc:
            self.cc = cc
            self.applied.append(("cc", cc))
        return None

    def ensure_server(self, settings: Mapping[str, object]) -> object:
        for field, value in settings.items():
            if self.server_settings.get(field, DEFAULTS.get(field)) != value:
                self.server_settings[field] = value
                self.applied.append((field, str(value)))
        return None

    def ensure_site(self, site: str, cache: DnsCache = DnsCache.none) -> object:
        if (site, cache) != self.site:
            self.site = (site, cache)
            self.applied.append(("site", f"{site} {cache.value}"))
        return None

    def check_link(self, profile: str, phase: str, level: str) -> LinkCheckRecord:
        self.ensure_profile(profile)
        self.events.append(f"{phase} {profile}")
        return LinkCheckRecord(phase=phase, profile=profile, passed=True)

    def load(
        self, run: Run, attempt: int, next_run: Run | None = None
    ) -> tuple[LoadResult, LoadDetails]:
        assert self.profile == run.cell[PROFILE] and self.cc == run.cell[CC]
        what = (self.script.get(run.run_id) or ["ok"]).pop(0)
        self.events.append(f"load {run.run_id} {what}")
        if what == "down":
            raise ClarkeError("client agent at http://x: ConnectError")
        if what == "fail":
            failed = LoadResult.failed("selenium", "asked for h2, fell back to http/1.1")
            return failed, LoadDetails()
        plt = self.plt(run) if self.plt else 100.0
        ok = LoadResult(status=Status.ok, engine="selenium", metrics={"plt_ms": plt})
        return ok, LoadDetails(link=LinkInForce(profile=run.cell[PROFILE], profile_sha256="f" * 64))


def plan_of(tmp_path: Path, after: str = "", **axes: str) -> CampaignPlan:
    """A one-matrix campaign planned: lan, HTTP/2, BBR, the uniform 100k page, once, with
    `axes` (each a YAML value) added or in place, and `after` (YAML) below the matrix."""
    matrix = {
        "profiles": "[lan]",
        "http": "[2]",
        "cc": "[bbr]",
        "models": "[uniform]",
        "sizes": "[100k]",
        **axes,
    }
    lines = "".join(f"  {key}: {value}\n" for key, value in matrix.items())
    path = tmp_path / "c.yaml"
    path.write_text(f"name: t\nrepetitions: 1\nmatrix:\n{lines}{after}")
    return plan_file(path)


def looped_minute(**fields: object) -> dict[str, Any]:
    """A schedule that loops every minute in 15 s slots, one step (2 ms up), with `fields`
    added or in place."""
    return {
        "version": 1,
        "end": "loop",
        "length_s": 60,
        "slot_s": 15,
        "steps": [{"at_s": 0, "forward": {"uplink_delay_ms": 2.0}}],
        **fields,
    }
