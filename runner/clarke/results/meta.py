"""meta.json, the campaign's metadata in its results directory (docs/results.md), as a
model: what ran (campaign, shard, revision, seed, implementations), on which testbeds,
the link as measured before and after each profile's runs (`link`), every change made to
the testbed (`applies`), with sequential repetitions how each cell stopped
(`sequential`), and for a merged directory its shards (`merged_from`) or its parallel
lanes (`parallel`).

Every part is a Part (results/part.py): it writes the keys it was given, in the order
given, so a meta.json read, changed and written again is the file the dicts wrote (a key
set again keeps its place, a new one comes last); a file of an older Clarke reads with
what it lacks as absent, and what it has that no field names is kept. store.MetaKeeper
keeps one in memory for a results directory and writes it."""

from __future__ import annotations

from pydantic import Field

from clarke.results.part import JsonObject, Number, Part


class CheckedFigure(Part):
    """One figure of a link check, judged or shown (run/linkcheck/check.py Check)."""

    name: str | None = None
    measured: Number | None = None
    expected: Number | None = None
    tolerance: Number | None = None
    unit: str | None = None
    verdict: str | None = None  # ok | fail | info
    reason: str | None = None


class LinkCheckRecord(Part):
    """A campaign's link check (run/session/link.py check_record), or the error that
    stopped it; in a merged directory, with the shard that made it."""

    phase: str | None = None  # before | after
    profile: str | None = None
    profile_sha256: str | None = None
    link: str | None = None  # the link's implementation
    backend: str | None = None  # what older results called it
    substrate: str | None = None
    passed: bool | None = None
    time_ns: int | None = None
    rtt_mean_ms: Number | None = None
    rtt_stdev_ms: Number | None = None
    rtt_p50_ms: Number | None = None
    rtt_p99_ms: Number | None = None
    rtt_max_ms: Number | None = None
    rtt_expected_ms: Number | None = None
    forward_mbps: Number | None = None
    return_mbps: Number | None = None
    forward_expected_mbps: Number | None = None
    return_expected_mbps: Number | None = None
    rate_from: dict[str, str | None] = Field(default_factory=dict)
    rate_method: dict[str, str | None] = Field(default_factory=dict)
    checks: list[CheckedFigure] = Field(default_factory=list)
    error: str | None = None
    shard: str | None = None

    @property
    def implementation(self) -> str | None:
        """The link's implementation, under either name."""
        return self.link or self.backend

    def figures(self) -> dict[str, CheckedFigure]:
        """Its checks by name."""
        return {str(c.name): c for c in self.checks}


class AppliedRecord(Part):
    """One change made to the testbed (agent/agents.py Applied)."""

    what: str = ""  # profile | cc | pep | scheduler | site
    value: str = ""
    sha256: str | None = None
    roles: list[str] = Field(default_factory=list)
    at: str = ""
    seconds: float = 0.0


class StoppingRuleRecord(Part):
    metric: str = ""
    half_width: Number | None = None
    min: int | None = None
    max: int | None = None
    confidence: Number | None = None


class CellStop(Part):
    """How a cell stopped (run/loop/meta.py stop_entry)."""

    stop: str = ""
    loads: int = 0
    runs: int = 0
    last_run: str = ""
    median: Number | None = None
    low: Number | None = None
    high: Number | None = None
    half_width: Number | None = None
    at: str = ""


class SequentialRecord(Part):
    """With sequential repetitions: the rule, and per cell (its path) how it stopped."""

    rule: StoppingRuleRecord | None = None
    stopped: dict[str, CellStop] = Field(default_factory=dict)


class MergedShard(Part):
    """A shard of a merged directory (results/merge.py)."""

    dir: str = ""
    shard: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    git_rev: str | None = None
    testbeds: list[str] = Field(default_factory=list)
    runs: int = 0
    records: int = 0
    sequential: SequentialRecord | None = None


class LaneRecord(Part):
    """A lane of a parallel campaign (run/parallel/testbeds.py)."""

    shard: str = ""
    dir: str = ""
    cpus: list[int] = Field(default_factory=list)
    testbeds: list[str] = Field(default_factory=list)
    exit_code: int | None = None
    torn_down_by_parent: list[int] = Field(default_factory=list)


class Invocation(Part):
    """One `clarke run --parallel` of a parallel campaign's parts."""

    started_at: str = ""
    finished_at: str = ""
    wall_s: float = 0.0
    interrupted: bool = False
    exit_codes: list[int | None] = Field(default_factory=list)


class ParallelRecord(Part):
    testbeds: int = 0
    shard_by: str = ""
    parts: str = ""  # the parts directory's name, beside the merged one
    shared_cpus: bool = False
    lanes: list[LaneRecord] = Field(default_factory=list)
    invocations: list[Invocation] = Field(default_factory=list)


class Meta(Part):
    """meta.json (the module's doc says what it holds)."""

    campaign_id: str = ""
    campaign: str | None = None
    shard: str = ""
    shard_by: str | None = None  # only when not by run index (campaign.plan.ShardBy)
    started_at: str | None = None
    git_rev: str = ""
    clarke: str | None = None
    seed: int | None = None
    implementations: dict[str, str] = Field(default_factory=dict)  # link, server asked
    link: list[LinkCheckRecord] = Field(default_factory=list)
    testbeds: list[str] = Field(default_factory=list)  # one per invocation
    applies: list[AppliedRecord] = Field(default_factory=list)
    apply_counts: dict[str, int] = Field(default_factory=dict)  # what:value -> changes
    sequential: SequentialRecord | None = None
    finished_at: str | None = None
    merged_from: list[MergedShard] = Field(default_factory=list)
    missing_shards: list[str] = Field(default_factory=list)
    missing_runs: list[str] = Field(default_factory=list)
    parallel: ParallelRecord | None = None
    # How the lanes' testbeds compare (run/parallel/check.py TestbedCheck.to_json): a
    # report the merge writes once for people and the nightly's checks; no code of the
    # runner reads it back.
    testbed_check: JsonObject | None = None

    def measured_links(self) -> list[LinkCheckRecord]:
        """The link checks that measured (not stopped by an error)."""
        return [c for c in self.link if not c.has("error")]
