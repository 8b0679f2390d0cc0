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
from dataclasses import replace
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
# Five objects (300, 100, 250, 50 and 300 K) all held 500 ms: every request has reached
# origin before any response starts, so the order they complete in is the scheduler's.
TOGETHER = "together-1m"
PROFILE = "lan"


def _models_file() -> Path:
    root = paths.source_root()
    assert root is not None, "runs from a checkout"
    return root / "pages/examples/server-delays.yaml"


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    need(os.geteuid() == 0, "root (network namespaces)")
    s = Session(
        NetnsSubstrate(),
        [PAGE, TOGETHER],
        SessionSettings(registry=Registry.default([_models_file()])),
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


@pytest.mark.timing
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
    (row,) = (r.written() for r in details.per_connection)
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
    assert details.metrics["connections_idle_ms"] == pytest.approx(row["idle_ms"])
    # [K]'s figures of the load, on one connection: the load is idle before its first
    # request, in the connection's idle time and after its last response until PLT; the
    # holds are net transfer time; one connection in flight whenever any is.
    k = details.metrics
    plt = m["plt_ms"]
    assert row["last_response_end_ms"] <= plt, (row, plt)
    outside = row["first_request_ms"] + (plt - row["last_response_end_ms"])
    assert k["load_idle_ms"] == pytest.approx(row["idle_ms"] + outside, abs=0.01), (k, row)
    assert k["net_transfer_ms"] == pytest.approx(plt - k["load_idle_ms"]), k
    assert k["net_transfer_ms"] >= held_busy and k["load_idle_ms"] < plt - held_busy, k
    assert k["effective_concurrency"] == pytest.approx(1.0), k
    # [C]'s set-up wait: the one connection's handshake, with nothing outstanding yet.
    assert k["setup_wait_ms"] == pytest.approx(row["handshake_ms"], abs=0.01), (k, row)
    concurrent = details.metrics["max_concurrent_requests"] or 0
    if http == "1.1":
        assert row["max_streams"] == 1 and concurrent == 1
    else:
        # o2 and o3 are held together for at least 600 ms.
        assert row["max_streams"] >= 2 and concurrent >= 2
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
                "load_idle_ms": k["load_idle_ms"],
                "net_transfer_ms": k["net_transfer_ms"],
                "setup_wait_ms": k["setup_wait_ms"],
            }
        )
    )


# origin notes an HTTP/3 response done when its request's task wakes after the client's
# last acknowledgement; one ACK frame often covers the end of two responses, and their
# tasks wake in either order, a few milliseconds apart on a busy 2-core machine. Its
# HTTP/2 completion times are those of the END_STREAM frames written, in the socket's order.
H3_DONE_TOLERANCE_MS = 3.0
# The loads of the test below: (scheduler, browser).
SCHEDULED_LOADS = (
    ("sequential", "firefox"),
    ("round-robin", "firefox"),
    ("rfc9218", "firefox"),
    ("rfc9218", "chromium"),
)


def _priority(header: str | None) -> tuple[int, bool]:
    """RFC 9218 (urgency, incremental) of a Priority header as browsers write it."""
    urgency, incremental = 3, False
    for member in (header or "").split(","):
        key, _, value = member.strip().partition("=")
        if key == "u" and value.isdigit():
            urgency = int(value)
        elif key == "i":
            incremental = value in ("", "?1")
    return urgency, incremental


def _done_before(a: dict[str, Any], b: dict[str, Any], http: str) -> bool:
    """Whether origin finished sending `a` before `b` (HTTP/3: within the tolerance)."""
    slack = H3_DONE_TOLERANCE_MS if http == "3" else 0.0
    return bool(a["server_done_ms"] <= b["server_done_ms"] + slack)


def _overtaken(rows: list[dict[str, Any]]) -> bool:
    """A later, smaller object completed before an earlier, larger one (the HTML, asked
    first, left out)."""
    images = rows[1:]
    return any(
        b["bytes"] < a["bytes"] and b["server_done_ms"] < a["server_done_ms"]
        for i, a in enumerate(images)
        for b in images[i + 1 :]
    )


def _check_rfc9218(rows: list[dict[str, Any]], conn: dict[str, Any], http: str) -> None:
    """RFC 9218 section 10 on responses that were all ready together, at the priority
    each request's Priority header gave (a response whose priority a PRIORITY_UPDATE
    changed is left out: the update may have come while it was sending; Chromium repeats
    each request's priority in an update over HTTP/3): more urgent first; non-incremental
    ones of one urgency in request order; incremental ones of one urgency sharing the
    connection."""
    fixed = [
        o
        for o in rows
        if all(_priority(u) == _priority(o["priority"]) for u in o["priority_updates"])
    ]
    for o in fixed:
        assert (o["urgency"], o["incremental"]) == _priority(o["priority"]), o
    for a, b in itertools.permutations(fixed, 2):
        if a["urgency"] < b["urgency"]:
            assert _done_before(a, b, http), ("urgency", a, b)
        elif (
            a["urgency"] == b["urgency"]
            and not (a["incremental"] or b["incremental"])
            and a["request_order"] < b["request_order"]
        ):
            assert _done_before(a, b, http), ("request order", a, b)
    images = fixed[1:]
    shared = {(o["urgency"], o["incremental"]) for o in images}
    if len(images) == len(rows) - 1 and len(shared) == 1 and next(iter(shared))[1]:
        # Every image at one urgency, incremental: they share the connection. Where a
        # smaller image was asked after a larger one, it completes first; where they
        # reached origin smallest first (over HTTP/3 requests may arrive out of stream
        # order), sharing completes them in that order too, and only HTTP/2's record of
        # DATA frames shows the interleaving.
        later_smaller = any(
            b["bytes"] < a["bytes"] for i, a in enumerate(images) for b in images[i + 1 :]
        )
        if later_smaller:
            assert _overtaken(rows), rows
        elif http == "2":
            assert len(conn["data_frames"]) > len(rows), conn["data_frames"]


@pytest.mark.timing
@pytest.mark.parametrize("http", ["2", "3"])
def test_each_scheduler_orders_responses_that_are_all_ready_together(
    session: Session, http: str
) -> None:
    """Issue 32, on a page whose five objects are held alike (every request has arrived
    before any response starts), from origin's record of each exchange:
    - `sequential`: over HTTP/2 the objects complete in request order, each response's
      DATA frames together (one run per response); over HTTP/3 origin hands them to quinn
      in request order;
    - `round-robin` (HTTP/3): a later, smaller object completes before an earlier,
      larger one;
    - `rfc9218`, with Firefox and with Chromium: origin recorded the Priority header
      Firefox sent with every request and ran each response at the priority it gives
      (more urgent first, non-incremental ones of one urgency in request order,
      incremental ones of one urgency sharing the connection). Firefox asks for the page
      at `u=0, i` and every image at `u=4, i`, Chromium at `u=0, i` and `u=2, i` (over
      HTTP/3 repeated in a PRIORITY_UPDATE per request), so their images share."""
    session.settings = replace(session.settings, engine="selenium")
    html = f"/{TOGETHER}/index.html"
    seen: dict[tuple[str, str], tuple[list[dict[str, Any]], dict[str, Any]]] = {}
    try:
        for scheduler, browser in SCHEDULED_LOADS:
            session.ensure_server({"scheduler": scheduler})
            # Chromium opens its own 6 connections per server over HTTP/1.1 and says so.
            connections = 6 if browser == "chromium" else 1
            load = PageLoad(TOGETHER, http, "bbr", connections, browser=browser)
            result, loaded = session.load_page(load)
            assert result.status is Status.ok, result.reason
            details = loaded.written()  # as the record writes them
            (conn,) = [c for c in details["server_connections"] if c.get("exchanges")]
            assert conn["scheduler"] == scheduler
            rows = sorted(details["objects"], key=lambda o: o["request_order"])
            assert rows[0]["path"] == html, rows
            assert len(rows) == 6 and all(o["server_done_ms"] is not None for o in rows)
            seen[scheduler, browser] = rows, conn
            print(  # for the record (pytest -rP shows it)
                http,
                scheduler,
                browser,
                [
                    [o[k] for k in ("stream", "bytes", "priority", "priority_updates")]
                    + [o["server_completion_order"]]
                    for o in rows
                ],
                f"{len(conn.get('data_frames') or [])} runs of DATA",
                details["priority_signals"],
            )
    finally:
        session.ensure_server({"scheduler": "own"})

    rows, conn = seen["sequential", "firefox"]
    if http == "2":
        for a, b in itertools.pairwise(rows):
            assert _done_before(a, b, http), (a, b)
        assert len(conn["data_frames"]) == len(rows), conn["data_frames"]
    else:
        # Over HTTP/3 origin hands the responses to quinn one at a time in request order,
        # and quinn's priorities order what it holds; in three lan loads of seven the 50 K
        # response was acknowledged whole before the 250 K one asked before it, once by
        # more than 3 ms (docs/scheduling.md, "Not yet"): the handing order is checked here,
        # the completion order on the triangular page (test_load.py).
        for a, b in itertools.pairwise(rows):
            assert a["server_start_ms"] <= b["server_start_ms"], (a, b)

    if http == "3":
        # h2's own round-robin interleaves only the responses whose bytes it holds at
        # once; on lan it wrote most of each before the next was ready in one load of
        # four (loopback.rs checks its alternation).
        rr = seen["round-robin", "firefox"][0]
        assert _overtaken(rr), rr

    rows, conn = seen["rfc9218", "firefox"]
    # Firefox's signal for every request, as received.
    assert all(o["priority"] is not None for o in rows), rows
    _check_rfc9218(rows, conn, http)
    _check_rfc9218(*seen["rfc9218", "chromium"], http)
