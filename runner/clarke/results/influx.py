"""InfluxDB sink: line protocol over the v1 HTTP /write API, so InfluxDB 1.x, 2.x (v1
compatibility) and 3.x all accept it. Points are batched and retried; each point's time
is the load's start, so writing the same records again overwrites them (no duplicates).

URL form: http://[user:password@]host:port[/database] (database default: clarke). A token
for 2.x/3.x comes from the INFLUX_TOKEN environment variable."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from influxdb_client import Point, WritePrecision

from clarke.errors import InputError, SinkError
from clarke.results.record import RunRecord

log = logging.getLogger(__name__)

MEASUREMENT = "page_load"
DEFAULT_DB = "clarke"
BATCH = 500
ATTEMPTS = 4

# Record attributes written as tags (indexed, for grouping and filtering).
TAGS = (
    "campaign",
    "campaign_id",
    "run_id",
    "profile",
    "http",
    "cc",
    "model",
    "size",
    "page",
    "repetition",
    "connections",
    "engine",
    "browser",
    "status",
    "git_rev",
    "shard",
)


def to_point(r: RunRecord) -> Point:
    p = Point(MEASUREMENT)
    for tag in TAGS:
        value = str(getattr(r, tag))
        if value != "":
            p = p.tag(tag, value)
    for role, impl in sorted(r.implementations.items()):
        p = p.tag(f"impl_{role}", impl)
    for name, value in sorted(r.metrics.items()):
        p = p.field(name, float(value))
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
        auth = (parts.username or "", parts.password or "") if parts.username else None
        return cls(f"{parts.scheme}://{netloc}", db, auth, os.environ.get("INFLUX_TOKEN"))

    def __str__(self) -> str:
        return f"{self.base}/{self.database}"


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
        lines = [to_line(r) for r in records]
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
