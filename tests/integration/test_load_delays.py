"""A page whose objects finish in a known order because the server holds their
responses (docs/pages.md, "Server delays"), loaded for real in Firefox over a satlink
link from origin, over HTTP/1.1, /2 and /3 on one connection: the object metrics and the
connection's busy and idle time (docs/metrics.md) are checked against the holds
(issue: evidence for every load).

The page, staggered-170k, has three objects, the largest in the middle, held 0, 600 and
1200 ms. What the definitions then require:

- Each object's response ends no sooner than its hold after its request started, and
  not much later: within the unheld object's own turnaround in the same load (the link's
  round trip, the server, the transfer), plus the larger object's extra transfer time at
  the profile's rate, plus a quarter of the step between holds (600 ms). A quarter step
  leaves every object's window apart from its neighbours', so the order is still
  unambiguous, and covers a timer this VM wakes 15-70 ms late.
- The objects finish in page order: first_object_ms is o1's responseEnd,
  largest_object_ms o2's (the largest, and not the last), last_object_ms o3's.
- A held response is a request in flight: its hold is busy time on the connection,
  never idle time. The connection is busy at least the sum of the holds over HTTP/1.1
  (one request at a time) and at least the longest hold over /2 and /3 (the three
  requests go out together). Its idle time lies only where the browser had asked
  nothing: between the HTML's end and the first object's request (the browser reading
  the page; 65-130 ms on this VM) and, over HTTP/1.1, between a response's end and the
  next request. So it is shorter than the shortest hold, where reading the holds as idle
  ("nothing being received") would give at least 1800 ms (HTTP/1.1) or 1200 ms.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from clarke import paths, profiles
from clarke.pages.models import Registry
from clarke.results.record import Status
from clarke.run.linkcheck.check import expected_rtt_ms
from clarke.run.session.session import Session
from clarke.run.session.settings import PageLoad, SessionSettings
from clarke.testbed.substrate import NetnsSubstrate
from conftest import need

pytestmark = [pytest.mark.root, pytest.mark.browser, pytest.mark.slow]
PAGE = "staggered-170k"
PROFILE = "lan"


def _models_file() -> Path:
    root = paths.source_root()
    assert root is not None, "runs from a checkout"
    return root / "pages/examples/server-delays.yaml"


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    need(os.geteuid() == 0, "root (network namespaces)")
    s = Session(
        NetnsSubstrate(), [PAGE], SessionSettings(registry=Registry.default([_models_file()]))
    )
    s.start(PROFILE)
    try:
        s.ensure_profile(PROFILE)
        s.ensure_cc("bbr")
        yield s
    finally:
        s.close()


def _timings(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The browser's resource timing entries by page-relative path."""
    return {urlsplit(r["name"]).path.lstrip("/"): r for r in raw.get("resources") or []}


@pytest.mark.parametrize("http", ["1.1", "2", "3"])
def test_object_metrics_and_idle_time_follow_the_server_holds(session: Session, http: str) -> None:
    entry = session.pages[PAGE]
    objects = sorted(entry["objects"], key=lambda o: o["position"])
    holds = [float(o["delay_ms"]) for o in objects]
    assert holds == [0, 600, 1200], "the page this test is written for"
    largest = max(objects, key=lambda o: o["bytes"])
    assert largest["position"] == 2, "the largest object is held neither least nor most"

    # Tolerances from the page's holds and the profile's own timing.
    profile = profiles.read(PROFILE)
    step = min(b - a for a, b in itertools.pairwise(sorted(set(holds))))
    allowance = step / 4
    link_ms = expected_rtt_ms(profile)
    assert link_ms < allowance, "the holds must dominate the link's round trip"
    rate, unheld_bytes = profile.forward.rate_mbps, objects[0]["bytes"]

    def extra_transfer_ms(size: int) -> float:
        """The time `size` bytes take beyond the unheld object's at the profile's rate."""
        return max(0, size - unheld_bytes) * 8 / (rate * 1e3) if rate > 0 else 0.0

    result, details = session.load_page(PageLoad(PAGE, http, "bbr", 1))
    assert result.status is Status.ok, result.reason
    timed = _timings(result.raw or {})
    starts = [float(timed[o["path"]]["requestStart"]) for o in objects]
    ends = [float(timed[o["path"]]["responseEnd"]) for o in objects]
    turnaround = [e - s for s, e in zip(starts, ends, strict=True)]

    # Every response held at least its hold, and at most that much longer than the
    # unheld object's own turnaround in this load.
    base = turnaround[0]
    for o, hold, took in zip(objects, holds, turnaround, strict=True):
        upper = hold + base + extra_transfer_ms(o["bytes"]) + allowance
        assert hold <= took <= upper, (o["path"], hold, took, upper)
    if http == "1.1":
        # One connection, one request at a time: each starts when the one before ends.
        for before_end, next_start in zip(ends, starts[1:], strict=False):
            assert next_start >= before_end, (starts, ends)
    else:
        # All three asked for together: the order comes from the holds alone.
        assert max(starts) - min(starts) < allowance, starts

    # The object metrics name the objects the holds put first, largest and last.
    m = result.metrics
    assert (m["first_object_ms"], m["largest_object_ms"], m["last_object_ms"]) == (
        ends[0],
        ends[largest["position"] - 1],
        ends[2],
    ), (m, ends)
    assert m["first_object_ms"] < m["largest_object_ms"] < m["last_object_ms"], m
    # Between them: over HTTP/1.1 at least the later object's hold (it is asked for once
    # the one before has ended); over /2 and /3 the difference of the holds.
    for a, b in ((0, 1), (1, 2)):
        gap = ends[b] - ends[a]
        if http == "1.1":
            assert gap >= holds[b], (a, b, gap, holds)
        else:
            want = holds[b] - holds[a]
            assert want - allowance <= gap <= want + base + allowance, (a, b, gap, want)

    # The connection: holds are busy time, never idle time.
    (row,) = details["per_connection"]
    assert row["protocol"] == {"1.1": "h1", "2": "h2", "3": "h3"}[http], row
    assert row["requests"] == row["requests_timed"] == 1 + len(objects), row
    span = row["last_response_end_ms"] - row["first_request_ms"]
    assert row["busy_ms"] + row["idle_ms"] == pytest.approx(span), row
    held_busy = sum(holds) if http == "1.1" else max(holds)
    assert row["busy_ms"] >= held_busy, row
    # Idle only where the browser had asked nothing: reading the HTML before the objects
    # (and over HTTP/1.1, issuing the next request after a response): no hold in it.
    nav_end = float((result.raw or {})["navigation"]["responseEnd"])
    if http == "1.1":
        gaps = [s - e for e, s in zip([nav_end, *ends[:-1]], starts, strict=True)]
        assert row["idle_ms"] == pytest.approx(sum(gaps), abs=0.01), (row, gaps)
    else:
        before, spread = min(starts) - nav_end, max(starts) - min(starts)
        assert before - 0.01 <= row["idle_ms"] <= before + spread + 0.01, (row, before)
    assert 0 <= row["idle_ms"] < step, row  # not even the shortest hold
    assert details["metrics"]["connections_idle_ms"] == pytest.approx(row["idle_ms"])
    if http == "1.1":
        assert row["max_streams"] == 1 and details["metrics"]["max_concurrent_requests"] == 1
    else:
        # o2 and o3 are held together for at least 600 ms.
        assert row["max_streams"] >= 2 and details["metrics"]["max_concurrent_requests"] >= 2
    print(
        json.dumps(
            {
                "http": http,
                "first_object_ms": m["first_object_ms"],
                "largest_object_ms": m["largest_object_ms"],
                "last_object_ms": m["last_object_ms"],
                "turnaround_ms": [round(t, 1) for t in turnaround],
                "busy_ms": row["busy_ms"],
                "idle_ms": row["idle_ms"],
                "max_streams": row["max_streams"],
            }
        )
    )
