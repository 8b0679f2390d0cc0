"""InfluxDB sink: line protocol over the v1 HTTP /write API, so InfluxDB 1.x, 2.x (v1
compatibility) and 3.x all accept it. Points are batched and retried; each point's time
is the load's start, so writing the same records again overwrites them (no duplicates).

URL form: http://[user:password@]host:port[/database] (database default: clarke). Without
credentials in the URL, CLARKE_INFLUX_USER and CLARKE_INFLUX_PASSWORD_FILE (a file holding
the password: the compose stack's secrets, the demo's build/influxdb/credentials/) give
them; a password file other users may read is refused. A token for 2.x/3.x comes from the
INFLUX_TOKEN environment variable."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from influxdb_client import Point, WritePrecision

from clarke.errors import InputError, SinkError
from clarke.private_files import check_private_file
from clarke.results.link_timeline import link_schedule_points
from clarke.results.meta import LinkCheckRecord, Meta
from clarke.results.metric_families import number
from clarke.results.record import RunRecord
from clarke.results.station_records import Sojourn
from clarke.results.summary import ALL_FAMILY_METRICS, Sequential, summarise
from clarke.sequential import Decision
from clarke.vocab import SENDER

log = logging.getLogger(__name__)

MEASUREMENT = "page_load"
DEFAULT_DB = "clarke"
BATCH = 500
ATTEMPTS = 4

# The campaign's browser settings a load ran with (RunRecord.isolation, ...): the same
# for every load of a campaign, so not dimensions, but tags of every measurement of a
# load, so that loads of campaigns with other settings are not grouped together.
BROWSER_SETTINGS = ("engine", "isolation", "priority_signals")
# Record attributes written as tags (indexed, for grouping and filtering), besides one
# tag per dimension of the matrix (clarke.campaign.dimensions: profile, http, cc, ...).
TAGS = (
    "campaign",
    "campaign_id",
    "run_id",
    "page",
    "repetition",
    *BROWSER_SETTINGS,
    "status",
    "git_rev",
    "shard",
    "testbed",
)


def tags_of(r: RunRecord) -> dict[str, str]:
    """The record's tags: its attributes in TAGS and its cell's dimensions."""
    return {**{tag: str(getattr(r, tag)) for tag in TAGS}, **r.cell.texts()}


def _load_tags(p: Point, r: RunRecord) -> Point:
    """A load's cell as tags, one per dimension, its page and its browser's settings: a
    measurement of a load (its connections, the link's counters during it) is grouped as
    its load is."""
    texts = r.cell.texts() | {s: getattr(r, s) for s in BROWSER_SETTINGS}
    for name, text in texts.items():
        if text != "":
            p = p.tag(name, text)
    return p.tag("page", r.page)


def to_point(r: RunRecord) -> Point:
    p = Point(MEASUREMENT)
    for tag, value in tags_of(r).items():
        if value != "":
            p = p.tag(tag, value)
    for role, impl in sorted(r.implementations.items()):
        p = p.tag(f"impl_{role}", impl)
    for name, measured in sorted(r.metrics.items()):
        p = p.field(name, float(measured))
    p = p.field("attempt", r.attempt)
    p = p.field("browser_version", r.browser_version)
    p = p.field("reason", r.reason)
    return p.time(r.timestamp_ns, WritePrecision.NS)


def to_line(r: RunRecord) -> str:
    return to_point(r).to_line_protocol()


@dataclass(frozen=True)
class InfluxTarget:
    base: str
    database: str
    auth: tuple[str, str] | None
    token: str | None

    @classmethod
    def parse(cls, url: str) -> InfluxTarget:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(f"--influx {url!r}: expected http://host:port[/database]")
        netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
        if ":" in parts.hostname:  # an IPv6 literal
            netloc = f"[{parts.hostname}]" + (f":{parts.port}" if parts.port else "")
        db = parts.path.strip("/") or DEFAULT_DB
        auth = (parts.username or "", parts.password or "") if parts.username else _env_auth()
        return cls(f"{parts.scheme}://{netloc}", db, auth, os.environ.get("INFLUX_TOKEN"))

    def __str__(self) -> str:
        return f"{self.base}/{self.database}"


def _env_auth() -> tuple[str, str] | None:
    user = os.environ.get("CLARKE_INFLUX_USER", "")
    password_file = os.environ.get("CLARKE_INFLUX_PASSWORD_FILE", "")
    if not user:
        return None
    if not password_file:
        raise InputError("CLARKE_INFLUX_USER is set without CLARKE_INFLUX_PASSWORD_FILE")
    path = Path(password_file)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(f"CLARKE_INFLUX_PASSWORD_FILE {password_file}: {e.strerror}") from e
    with os.fdopen(fd, "rb") as f:
        # A password others may read is no secret: refused, naming the file and the fix.
        check_private_file(path, os.fstat(f.fileno()), "CLARKE_INFLUX_PASSWORD_FILE")
        password = f.read(4096).decode(errors="replace").strip()
    return user, password


class InfluxSink:
    def __init__(self, target: InfluxTarget, timeout: float = 10.0) -> None:
        self.target = target
        headers = {"Authorization": f"Token {target.token}"} if target.token else {}
        self._client = httpx.Client(
            base_url=target.base, timeout=timeout, headers=headers, trust_env=False
        )

    @classmethod
    def from_url(cls, url: str) -> InfluxSink:
        return cls(InfluxTarget.parse(url))

    def _params(self, **extra: str) -> dict[str, str]:
        params = {"db": self.target.database, **extra}
        if self.target.auth:
            params["u"], params["p"] = self.target.auth
        return params

    def _post(
        self, path: str, *, params: dict[str, str], content: bytes | None = None
    ) -> httpx.Response:
        delay = 0.5
        for attempt in range(1, ATTEMPTS + 1):
            try:
                resp = self._client.post(path, params=params, content=content)
            except httpx.TransportError as e:
                err: str = f"{type(e).__name__}: {e}"
            else:
                if resp.status_code < 500:
                    return resp
                err = f"HTTP {resp.status_code}: {resp.text.strip()}"
            if attempt == ATTEMPTS:
                raise SinkError(
                    f"InfluxDB at {self.target.base}: {err} (after {ATTEMPTS} attempts)"
                )
            log.warning("InfluxDB write failed (%s); retrying in %.1f s", err, delay)
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def ensure_database(self) -> None:
        """CREATE DATABASE on InfluxDB 1.x (idempotent); 2.x/3.x map databases themselves."""
        q = f'CREATE DATABASE "{self.target.database}"'
        resp = self._post("/query", params={**self._params(), "q": q})
        if resp.status_code >= 400:
            log.debug(
                "CREATE DATABASE not accepted (%s); assuming the server maps it", resp.status_code
            )

    def write(self, records: Iterable[RunRecord]) -> int:
        return self.write_lines([to_line(r) for r in records])

    def write_points(self, points: Iterable[Point]) -> int:
        return self.write_lines([p.to_line_protocol() for p in points])

    def write_lines(self, lines: list[str]) -> int:
        for i in range(0, len(lines), BATCH):
            body = ("\n".join(lines[i : i + BATCH]) + "\n").encode()
            resp = self._post("/write", params=self._params(precision="ns"), content=body)
            if resp.status_code >= 300:
                raise SinkError(
                    f"InfluxDB at {self.target} refused the write: HTTP {resp.status_code}: "
                    f"{resp.text.strip()}"
                )
        return len(lines)

    def query(self, q: str) -> dict[str, object]:
        resp = self._client.get("/query", params={**self._params(), "q": q})
        if resp.status_code >= 300:
            raise SinkError(f"InfluxDB query failed: HTTP {resp.status_code}: {resp.text.strip()}")
        return resp.json()

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> InfluxSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cell_summary_points(
    records: list[RunRecord],
    time_ns: int,
    kind: str = "campaign",
    sequential: Sequential | None = None,
) -> list[Point]:
    """Per-cell statistics (n, mean, median, 95 % CI) as `cell_summary` points, one per
    cell and metric, stamped with the campaign's start: dashboards draw CI bars and
    nightly trends from these without recomputing statistics in InfluxQL.

    Each point says whether its interval rests on too few loads (`few`), as the summary
    and the report do; with sequential repetitions each point of a cell also carries how
    the cell stopped (`stop`: precise, max or open), its loads and runs, and its interval
    for the median of the rule's metric (`stop_*`)."""

    if not records:
        return []
    first = records[0]
    points = []
    for cell in summarise(records, ALL_FAMILY_METRICS, sequential):
        for metric, s in cell.metrics.items():
            p = (
                Point("cell_summary")
                .tag("campaign", first.campaign)
                .tag("campaign_id", first.campaign_id)
            )
            p = p.tag("kind", kind).tag("metric", metric)
            for key, value in cell.cell.texts().items():
                p = p.tag(key, value)
            p = p.tag("page", cell.cell.page)
            p = p.field("n", s.n).field("mean", s.mean).field("median", s.median)
            p = p.field("ok", cell.ok).field("failed", cell.failed)
            p = p.field("few", s.few)
            if s.n >= 2:
                p = p.field("ci_low", s.ci_low).field("ci_high", s.ci_high)
            if cell.stop is not None and sequential is not None:
                p = stop_fields(p, cell.stop, sequential.rule.metric)
            points.append(p.time(time_ns, WritePrecision.NS))
    return points


def stop_fields(p: Point, stop: Decision, rule_metric: str) -> Point:
    """How a cell of sequential repetitions ended, as fields of its summary points."""
    i = stop.interval
    p = p.field("stop", stop.stop.value).field("stop_metric", rule_metric)
    p = p.field("stop_loads", i.n).field("stop_runs", stop.tried)
    p = p.field("stop_median", i.median).field("stop_confidence", i.confidence)
    if i.bounded:
        p = p.field("stop_low", i.low).field("stop_high", i.high)
        p = p.field("stop_half_width", i.relative_half_width)
    return p


def link_check_point(
    campaign: str, campaign_id: str, check: LinkCheckRecord, time_ns: int
) -> Point:
    """One link verification (before the first or after the last run) as a point: its
    profile and phase as tags, every figure it has (as meta.json has it) as a field."""
    p = Point("link_check").tag("campaign", campaign).tag("campaign_id", campaign_id)
    for tag, named in (("profile", check.profile), ("phase", check.phase)):
        if named:
            p = p.tag(tag, named)
    # The link implementation, under the tag name the dashboards group by ("backend").
    link = check.implementation
    if link:
        p = p.tag("backend", str(link))
    for key, value in check.written().items():
        if isinstance(value, bool):
            p = p.field(key, value)
        elif isinstance(value, int | float) and key not in ("profile", "phase", "backend"):
            p = p.field(key, float(value))
    return p.time(time_ns, WritePrecision.NS)


def link_stats_points(records: list[RunRecord]) -> list[Point]:
    """The emulator's counters during each load (from the sending ground station of each
    direction), as `link_stats` points at the load's time."""
    points = []
    for r in records:
        stats = r.details.link_stats
        for direction, role in SENDER.items():
            station = stats.get(role)
            d = station.direction(direction) if station is not None else None
            if d is None:
                continue
            drops = d.drops or {}
            delay = d.queue_delay or Sojourn()
            p = Point("link_stats").tag("campaign", r.campaign).tag("campaign_id", r.campaign_id)
            p = _load_tags(p.tag("run_id", r.run_id), r)
            p = p.tag("direction", direction)
            p = p.tag("attempt", str(r.attempt))
            p = p.field("frames", d.frames_out).field("bytes", d.bytes_out)
            p = p.field("drops_queue", drops.get("queue_full", 0))
            p = p.field("drops_loss", drops.get("loss", 0))
            p = p.field("queue_delay_mean_ms", float(delay.mean_ms or 0.0))
            p = p.field("queue_delay_max_ms", float(delay.max_ms or 0.0))
            points.append(p.time(r.timestamp_ns, WritePrecision.NS))
    return points


CONNECTION_FIELDS = (
    "requests",
    "requests_timed",
    "bytes_sent",
    "bytes_received",
    "handshake_ms",
    "first_request_ms",
    "last_response_end_ms",
    "busy_ms",
    "idle_ms",
    "max_streams",
)


def connection_points(records: list[RunRecord]) -> list[Point]:
    """Each load's per-connection rows (clarke.results.connections) as `connection`
    points at the load's time, one series per connection id."""
    points = []
    for r in records:
        for row in r.details.per_connection:
            p = Point("connection").tag("campaign", r.campaign).tag("campaign_id", r.campaign_id)
            p = _load_tags(p.tag("run_id", r.run_id).tag("attempt", str(r.attempt)), r)
            p = p.tag("conn_id", str(row.id)).tag("protocol", str(row.protocol))
            for key in CONNECTION_FIELDS:  # fields of the row (ConnectionRow)
                if (value := number(getattr(row, key))) is not None:
                    p = p.field(key, value)
            points.append(p.time(r.timestamp_ns, WritePrecision.NS))
    return points


def campaign_points(
    meta: Meta, records: list[RunRecord], sequential: Sequential | None = None
) -> list[Point]:
    """What a campaign adds beyond its loads: cell statistics (with how each cell
    stopped, for sequential repetitions), the link's counters, per-connection rows and
    link checks, all stamped with fixed times so that pushing again overwrites rather
    than duplicates."""
    if not records:
        return []
    start_ns = min(r.timestamp_ns for r in records)
    points = (
        cell_summary_points(records, start_ns, sequential=sequential)
        + link_stats_points(records)
        + connection_points(records)
        + link_schedule_points(records)
    )
    for i, check in enumerate(meta.link):
        stamp = check.time_ns or start_ns + i
        points.append(
            link_check_point(records[0].campaign, records[0].campaign_id, check, int(stamp))
        )
    return points
