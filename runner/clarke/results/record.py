"""The result record of one page load: what was asked (every matrix dimension), what was
used (software versions, implementations of each role), what was measured (metrics) and
whether it counts (status, with the reason when it does not). docs/results.md documents
every field and its mapping to InfluxDB."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core.core_schema import SerializerFunctionWrapHandler

from clarke.campaign import dimensions
from clarke.campaign.dimensions import Cell
from clarke.results.details import LoadDetails

SCHEMA_VERSION = 1


def _cell(value: object) -> Cell:
    if isinstance(value, Cell):
        return value
    if not isinstance(value, dict):
        raise ValueError("a cell is a mapping of the matrix's dimensions")
    return Cell.parse(value)


# The matrix cell of the load: one value per dimension (clarke.campaign.dimensions). In
# the journal each dimension is a top-level field of its own (profile, http, cc, ...).
RecordCell = Annotated[Cell, PlainValidator(_cell), PlainSerializer(lambda c: c.record())]

# Metrics a page load reports, all in milliseconds from navigation start unless named
# otherwise. Engines may add more; these are the ones dashboards and reports rely on.
KNOWN_METRICS = (
    "plt_ms",
    "fcp_ms",
    "lcp_ms",
    "ttfb_ms",
    "dom_content_loaded_ms",
    "connect_ms",
    "tls_ms",
    "transfer_bytes",
    "wire_bytes",
    "overhead",
)


class Status(StrEnum):
    ok = "ok"
    failed = "failed"


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    campaign: str
    campaign_id: str
    run_id: str
    run_index: int
    attempt: int = Field(ge=1)
    scenarios: list[str] = Field(default_factory=list)
    # Every dimension of the matrix: in the journal each under its own name (profile,
    # http, cc, model, size, connections, cross_traffic, pep, browser: docs/results.md).
    # The cross traffic's parameters and achieved rates are in details.cross_traffic.
    cell: RecordCell
    profile_sha256: str = ""  # the profile's content hash, as the link roles confirmed it
    page: str
    repetition: int
    engine: str
    browser_version: str = ""
    implementations: dict[str, str] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    git_rev: str = "unknown"
    shard: str = ""
    # The testbed that ran the load: netns-<id>, or compose; empty in records written
    # before it was recorded.
    testbed: str = ""
    started_at: dt.datetime
    finished_at: dt.datetime
    status: Status
    reason: str = ""
    metrics: dict[str, float] = Field(default_factory=dict)
    # What the load really used, as the runner verified it (results/details.py).
    details: LoadDetails = Field(default_factory=LoadDetails)

    @model_validator(mode="before")
    @classmethod
    def _gather_cell(cls, data: object) -> object:
        """The journal's top-level dimension fields, gathered into the cell."""
        if not isinstance(data, dict) or "cell" in data:
            return data
        names = [d.name for d in dimensions.seal()]
        return {
            **{k: v for k, v in data.items() if k not in names},
            "cell": {k: data[k] for k in names if k in data},
        }

    @model_serializer(mode="wrap")
    def _spread_cell(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """Each dimension back at the top level, where the journal has always kept it."""
        out: dict[str, object] = handler(self)
        cell = out.pop("cell", None)
        return {**out, **cell} if isinstance(cell, dict) else out

    @field_validator("schema_version")
    @classmethod
    def _known_schema(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {v}: this Clarke reads records of version {SCHEMA_VERSION} "
                "(written by another Clarke release?)"
            )
        return v

    # The browser's settings that shape every load of a campaign beside its engine
    # (campaign `browser:`), as the session verified them: not dimensions, so not in the
    # cell or the run id, but InfluxDB tags and export columns (results/influx.py
    # BROWSER_SETTINGS). Empty in records written before they were kept.
    @property
    def isolation(self) -> str:
        """How the load's browser state was made new: profile or context."""
        return self.details.isolation.mode if self.details.isolation else ""

    @property
    def priority_signals(self) -> str:
        """The HTTP priority signals the browser was asked to send."""
        return self.details.priority_signals.asked if self.details.priority_signals else ""

    @property
    def timestamp_ns(self) -> int:
        """The point's time in InfluxDB: the load's start, so that re-pushing is idempotent."""
        start = self.started_at
        if start.tzinfo is None:
            start = start.replace(tzinfo=dt.UTC)
        delta = start - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
