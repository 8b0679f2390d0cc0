"""How `clarke run` runs a campaign, as one value: where results go, which slice of the
plan, which testbed and implementations, how the link is checked, what is captured.
The CLI builds it once from its options; the campaign loop, several implementations and
parallel testbeds read it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from clarke.campaign.plan import ShardBy
from clarke.errors import InputError
from clarke.run.session.captures import DEFAULT_MAX_MB, CaptureMode


@dataclass(frozen=True)
class Shard:
    """The index-th (from 1) of `count` disjoint slices of the plan, sliced `by`."""

    index: int
    count: int
    by: ShardBy = ShardBy.run_index

    @classmethod
    def parse(cls, text: str, by: ShardBy = ShardBy.run_index) -> Shard:
        i, sep, n = text.partition("/")
        if not sep or not i.isdigit() or not n.isdigit() or not 1 <= int(i) <= int(n):
            raise InputError(f"--shard {text!r}: expected i/N with 1 <= i <= N, e.g. 1/4")
        return cls(int(i), int(n), by)

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class RunOptions:
    """`results_base`: where results directories go; `campaign_id`: the new directory's
    name (default: <name>-<UTC time>); `resume`: a results directory to continue;
    `testbed_id`: a running netns testbed to use; `link`, `server`: implementations that
    replace the campaign's; `link_check`: full or quick (run/session/link.py)."""

    results_base: Path = Path("results")
    campaign_id: str | None = None
    resume: Path | None = None
    shard: Shard | None = None
    influx_url: str | None = None
    testbed_id: int | None = None
    link_check: str = "full"
    substrate: str = "netns"
    link: str | None = None
    server: str | None = None
    capture: CaptureMode = CaptureMode.none
    capture_max_bytes: int = DEFAULT_MAX_MB * 1_000_000

    def on(self, link: str | None, server: str | None) -> RunOptions:
        """The same options pinned to one link and server implementation."""
        return replace(self, link=link, server=server)
