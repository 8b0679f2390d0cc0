"""The results directory of a campaign: results/<campaign>-<timestamp>/ holding the
campaign file as run, the plan, metadata and the journal. The only code that lays out
results directories, and the one writer of their metadata (MetaKeeper: meta.json read
once, kept in memory, written whole at each change)."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clarke.errors import InputError, ValidationFailed
from clarke.json_value import JsonObject
from clarke.results.journal import JOURNAL, Journal
from clarke.results.meta import Meta
from clarke.schema import problems_of

M = TypeVar("M", bound=BaseModel)

CAMPAIGN_COPY = "campaign.yaml"
META = "meta.json"
PLAN = "plan.json"
WRITER_LOCK = ".writer.lock"


def campaign_id(name: str, now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.UTC)
    return f"{name}-{now.strftime('%Y%m%dT%H%M%SZ')}"


def write_json(path: Path, data: Any) -> None:
    """`data` as JSON at `path`, whole or not at all: a temporary file in the same
    directory, fsync'd, renamed over `path`, and the directory fsync'd (the rename too
    survives a crash)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create(base: Path, cid: str, campaign_file: Path, plan: JsonObject, meta: Meta) -> Path:
    """A new results directory `cid` under `base`: the campaign file, `plan` (plan.json),
    `meta` (meta.json, its campaign id first) and an empty journal."""
    d = base / cid
    d.mkdir(parents=True, exist_ok=False)
    shutil.copyfile(campaign_file, d / CAMPAIGN_COPY)
    write_json(d / PLAN, plan)
    first = Meta(campaign_id=cid)  # first, whatever `meta` says it is
    first.take(meta)
    write_json(d / META, first.written())
    (d / JOURNAL).touch()
    return d


class PlanFile(BaseModel):
    """plan.json as `create` writes it: the campaign, its order and seed, the whole plan's
    size, the shard and the shard's runs (each Run.to_dict())."""

    model_config = ConfigDict(extra="allow")

    campaign: str
    order: str | None = None
    seed: int | None = None
    count: int | None = Field(default=None, ge=0)
    shard: str = ""
    shard_by: str | None = None
    runs: list[JsonObject]


def _read_model(path: Path, model: type[M]) -> M:
    """A results directory's JSON file as its model, or an error naming the file (exit
    2): a damaged file is the user's to see, not a traceback, and is never run from."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: damaged, not JSON ({e})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: damaged, not a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ValidationFailed(f"{path} (damaged)", problems_of(e)) from None


def read_plan(d: Path) -> PlanFile:
    """plan.json, or an error naming it."""
    return _read_model(d / PLAN, PlanFile)


def same_runs(recorded: list[JsonObject], expanded: list[JsonObject]) -> bool:
    """A plan.json's runs against the campaign's expansion, on the fields the file
    recorded: a plan written before an axis existed (cross traffic, PEP, browser) lacks
    its key, and its run ids, which carry every axis a campaign uses, say it was not
    used."""
    return len(recorded) == len(expanded) and all(
        r == {k: e.get(k) for k in r} for r, e in zip(recorded, expanded, strict=True)
    )


def check_plan(
    d: Path, recorded: PlanFile, campaign: str, count: int, runs: list[JsonObject]
) -> None:
    """A resume's plan.json against the plan the campaign file expands to (with the
    recorded seed): InputError naming plan.json unless they agree."""
    path = d / PLAN
    if recorded.campaign != campaign:
        raise InputError(f"{path}: a plan of campaign {recorded.campaign!r}, not {campaign!r}")
    if recorded.count is not None and recorded.count != count:
        raise InputError(
            f"{path}: counts {recorded.count} runs, but the campaign expands to {count}"
        )
    if not same_runs(recorded.runs, runs):
        raise InputError(
            f"{path}: its runs are not the ones the campaign plans for this directory "
            f"({len(recorded.runs)} recorded, {len(runs)} planned): damaged, or written by "
            "another Clarke version; start a new results directory"
        )


def read_meta(d: Path) -> Meta:
    """meta.json, or an error naming it."""
    return _read_model(d / META, Meta)


def open_existing(d: Path) -> tuple[Meta, Journal]:
    if not (d / META).is_file() or not (d / JOURNAL).is_file():
        raise InputError(f"{d}: not a Clarke results directory (no {META} or {JOURNAL})")
    return read_meta(d), Journal.in_dir(d)


class MetaKeeper:
    """The one keeper of a results directory's meta.json: read once when the directory
    is opened (`open`), kept in memory (`meta`, which its writer changes), and written
    whole and atomically at each `save` (write_json). Nothing else writes the file while
    a keeper has it: the campaign's sole writer holds the directory (sole_writer)."""

    def __init__(self, d: Path, meta: Meta) -> None:
        self.path, self.meta = d / META, meta

    @classmethod
    def open(cls, d: Path) -> MetaKeeper:
        return cls(d, read_meta(d))

    def save(self) -> None:
        write_json(self.path, self.meta.written())


@contextmanager
def sole_writer(d: Path) -> Iterator[None]:
    """Holds an exclusive lock on the results directory while a campaign writes it, so a
    second `clarke run --resume` of the same directory stops (exit 2, naming the holder)
    instead of running every remaining run again. The kernel drops the lock when its
    holder ends, however it ends: a killed run leaves nothing to clean up."""
    path = d / WRITER_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = path.read_text(errors="replace").strip() or "another process"
            raise InputError(
                f"{d} is being written by {holder}: one writer per results directory "
                "(let it finish, or stop it, then resume)"
            ) from None
        since = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} ({' '.join(sys.argv)}) since {since}\n".encode())
        yield
    finally:
        os.close(fd)
