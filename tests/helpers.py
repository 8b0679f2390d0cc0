"""Builders for result records in tests (the journal and sinks are tested with records
shaped like the ones page loads produce)."""

from __future__ import annotations

import datetime as dt

from clarke.results.record import RunRecord, Status

BASE = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.UTC)


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
