"""The submission of a campaign's shards: the options a user gives, checked once against
the campaign's plan (`Submission`), whatever engine runs them.

Refused before anything is written or submitted (InputError, exit 2, with the reason):
fewer than one shard, a browser given as a path (the shards run a copy of the campaign,
where it would be refused), a shard with no run (more shards than the plan can fill), a
shuffled campaign without a `seed` (each shard would draw its own order), a campaign on
several implementations (pin one with --link and --server), a campaign id that is
not an id (clarke.ids), and a value written into a batch script or a manifest (here: the
results path and the InfluxDB URL; the engines' own options in slurm.py and k8s.py) that
holds a control character: a newline there would write lines of the user's choice into
the script (`check_written`)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from clarke.campaign.model import Order
from clarke.campaign.plan import ShardBy, plan_file
from clarke.errors import InputError
from clarke.ids import check_id
from clarke.results import store

# Characters that end a line, or hide or reorder text, in a script or a manifest:
# Unicode's controls (newline, carriage return, NUL, ESC, tab, ...), format characters
# (bidirectional overrides, ...), and line and paragraph separators (YAML's too).
_UNWRITABLE = frozenset({"Cc", "Cf", "Zl", "Zp"})
INFLUX_URL = "an InfluxDB URL http[s]://[user:password@]host[:port][/database] (visible ASCII)"
_VISIBLE = re.compile(r"[!-~]+")


def _shown(value: str) -> str:
    """`value` to quote in an error: its start, without a URL's password."""
    return repr(re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1***@", value[:80]))


def check_written(
    value: str, option: str, allowed: str, pattern: re.Pattern[str] | None = None
) -> str:
    """`value`, which is written into a batch script or a manifest, if it holds no
    control character and (when given) matches all of `pattern`; otherwise InputError
    naming `option` and what it takes (`allowed`)."""
    hidden = next((c for c in value if unicodedata.category(c) in _UNWRITABLE), None)
    if hidden is not None:
        raise InputError(
            f"{option} {_shown(value)}: expected {allowed}; it holds {hidden!r}, a control "
            "character, which would end or hide a line of the script or manifest it is "
            "written into"
        )
    if pattern is not None and pattern.fullmatch(value) is None:
        raise InputError(f"{option} {_shown(value)}: expected {allowed}")
    return value


def check_influx(url: str) -> str:
    """`url` if it is an InfluxDB URL (InputError naming --influx otherwise)."""
    check_written(url, "--influx", INFLUX_URL, _VISIBLE)
    parts = urlsplit(url)
    try:
        _ = parts.port  # a port that is no number raises
    except ValueError:
        parts = parts._replace(scheme="")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--influx {_shown(url)}: expected {INFLUX_URL}")
    return url


@dataclass(frozen=True)
class ShardRunArgs:
    """What every shard's `clarke run` is given besides its shard, as command-line
    arguments (docs/running.md); not run/loop/options.py's RunOptions, which the
    shard's `clarke run` builds from them."""

    link_check: str = "full"
    link: str | None = None
    server: str | None = None
    shard_by: ShardBy = ShardBy.run_index

    def argv(self) -> list[str]:
        """The options as `clarke run` takes them (defaults left out)."""
        out = ["--link-check", self.link_check]
        if self.shard_by is not ShardBy.run_index:
            out += ["--shard-by", self.shard_by.value]
        out += ["--link", self.link] if self.link else []
        out += ["--server", self.server] if self.server else []
        return out


@dataclass(frozen=True)
class SubmitOptions:
    """What `clarke submit ENGINE` was asked, before it is checked."""

    campaign_file: Path
    shards: int
    results: Path
    campaign_id: str | None = None
    run: ShardRunArgs = field(default_factory=ShardRunArgs)
    influx: str | None = None


@dataclass(frozen=True)
class Submission:
    """A checked submission: every shard has runs, and the directories are named."""

    campaign_file: Path  # absolute
    campaign_name: str
    campaign_id: str
    results: Path  # absolute: the same path on every node (shared storage)
    run: ShardRunArgs
    influx: str | None
    shard_sizes: tuple[int, ...]  # runs per shard, shard 1 first
    models_file: str | None = None  # the campaign's pages.models_file, relative to it

    @property
    def shards(self) -> int:
        return len(self.shard_sizes)

    @property
    def runs(self) -> int:
        return sum(self.shard_sizes)

    def shard_dir(self, index: int) -> Path:
        """Where `clarke run --shard index/N --campaign-id ID` writes (run/loop.py)."""
        return self.results / f"{self.campaign_id}-shard{index}of{self.shards}"

    @property
    def merged_dir(self) -> Path:
        return self.results / self.campaign_id


def prepare(options: SubmitOptions) -> Submission:
    """Check the options against the campaign's plan (exit 2 naming what is wrong)."""
    check_written(str(options.results), "--results", "a directory path")
    if options.shards < 1:
        raise InputError(f"--shards {options.shards}: the number of shards must be 1 or more")
    campaign_file = options.campaign_file.resolve()
    plan = plan_file(campaign_file)
    c = plan.campaign
    if c.order is Order.shuffled and c.seed is None:
        raise InputError(
            f"{options.campaign_file} is shuffled without a seed, so each shard would draw "
            "its own order: give the campaign a seed"
        )
    if c.browser.binary is not None and "/" in c.browser.binary:
        # The shards read a copy of the campaign (beside the batch scripts, or in a
        # ConfigMap), where a browser named by its path is refused or names another file
        # (clarke.campaign.paths): refused here, not on every node.
        raise InputError(
            f"{options.campaign_file}: browser.binary {c.browser.binary!r} is a path, but "
            "the shards run a copy of the campaign elsewhere, where it would be refused; "
            "name a browser on the nodes' PATH instead (e.g. firefox-esr)"
        )
    combos = c.implementations.combinations(options.run.link, options.run.server)
    if len(combos) > 1:
        raise InputError(
            f"{options.campaign_file} lists several implementations: a shard runs on one "
            "testbed, so pin one with --link and --server (or submit once per combination)"
        )
    sizes = tuple(
        len(plan.shard(i, options.shards, options.run.shard_by))
        for i in range(1, options.shards + 1)
    )
    empty = [str(i) for i, n in enumerate(sizes, 1) if n == 0]
    if empty:
        raise InputError(
            f"--shards {options.shards}: the plan has {len(plan.runs)} runs, so shard(s) "
            f"{', '.join(empty)} would have none (sliced by {options.run.shard_by.value}); "
            "give fewer shards"
        )
    # A campaign id names directories, Slurm jobs and environment values: an id, as
    # `clarke run --campaign-id` takes it (clarke.ids), matched whole.
    cid = check_id(options.campaign_id or store.campaign_id(c.name), "--campaign-id")
    return Submission(
        campaign_file=campaign_file,
        campaign_name=c.name,
        campaign_id=cid,
        results=options.results.resolve(),
        run=options.run,
        influx=check_influx(options.influx) if options.influx is not None else None,
        shard_sizes=sizes,
        models_file=c.pages.models_file,
    )
