"""Per-connection rows: the server's records joined with the browser's timings by path,
on loads built so that busy and idle time are known."""

from __future__ import annotations

import pytest

from clarke.results.connections import busy_time, connection_rows, load_activity, max_overlap
from helpers import server_connections

HOST = "https://www.clarke.test"


def _entry(path: str, start: float, end: float, **more: float) -> dict[str, object]:
    return {"name": f"{HOST}{path}", "requestStart": start, "responseEnd": end, **more}


def _conn(cid: int, protocol: str, paths: list[str], **more: object) -> dict[str, object]:
    return {"id": cid, "protocol": protocol, "requests": len(paths), "request_paths": paths,
            "wire_bytes_sent": 1000 * len(paths), "app_bytes_sent": 900 * len(paths),
            "start_unix_ms": 1, "end_unix_ms": 2,
            "transport": {"tcp": {"bytes_received": 300}}, **more}  # fmt: skip


def test_union_and_overlap() -> None:
    assert busy_time([(0, 10), (5, 20), (30, 40)]) == 30
    assert busy_time([(0, 100), (10, 20)]) == 100
    assert busy_time([]) == 0
    assert max_overlap([(0, 10), (5, 20), (30, 40)]) == 2
    assert max_overlap([(0, 10), (10, 20)]) == 1  # one ends as the next starts


def test_http1_connections_with_known_gaps() -> None:
    """Two HTTP/1.1 connections: the first carries the document, then an object 50 ms
    after it ended; the second two objects back to back with a 100 ms gap."""
    raw = {
        "navigation": _entry("/p/index.html", 20.0, 120.0, connectStart=1.0, connectEnd=15.0),
        "resources": [
            _entry("/p/o1.jpg", 170.0, 300.0),
            _entry("/p/o2.jpg", 130.0, 250.0, connectStart=121.0, connectEnd=129.0),
            _entry("/p/o3.jpg", 350.0, 400.0),
        ],
    }
    conns = [
        _conn(7, "h1", ["/p/index.html", "/p/o1.jpg"]),
        _conn(8, "h1", ["/p/o2.jpg", "/p/o3.jpg"]),
        _conn(9, "h1", [], requests=0),  # a connection that carried nothing
    ]
    rows, page = connection_rows(server_connections(conns), raw, 420.0)
    assert [r.id for r in rows] == [7, 8]
    first, second = rows
    assert first.requests_timed == 2
    assert (first.first_request_ms, first.last_response_end_ms) == (20.0, 300.0)
    assert first.busy_ms == pytest.approx(230.0) and first.idle_ms == pytest.approx(50.0)
    assert first.handshake_ms == pytest.approx(14.0) and first.max_streams == 1
    assert second.busy_ms == pytest.approx(170.0) and second.idle_ms == pytest.approx(100.0)
    assert second.handshake_ms == pytest.approx(8.0)
    assert (first.bytes_sent, first.bytes_received) == (2000, 300)
    assert page == {
        "max_concurrent_connections": 2.0,  # 20-300 and 130-400 overlap
        "max_concurrent_requests": 2.0,
        "connections_idle_ms": pytest.approx(150.0),
        # nothing outstanding 0-20, 120-130, 300-350 and 400-420 (PLT)
        "load_idle_ms": pytest.approx(100.0),
        "net_transfer_ms": pytest.approx(320.0),
        "effective_concurrency": pytest.approx((230.0 + 170.0) / 320.0),
        # both handshakes (1-15, 121-129) fall where nothing is outstanding
        "setup_wait_ms": pytest.approx(14.0 + 8.0),
    }


def test_one_multiplexed_connection() -> None:
    resources = [_entry(f"/p/o{i}.jpg", 100.0 + i, 200.0 + 10 * i) for i in range(1, 9)]
    raw = {"navigation": _entry("/p/index.html", 10.0, 90.0), "resources": resources}
    paths = ["/p/index.html"] + [f"/p/o{i}.jpg" for i in range(1, 9)]
    quic = _conn(1, "h3", paths, transport={"quic": {"udp_bytes_received": 4000}})
    (row,), page = connection_rows(server_connections([quic]), raw, None)
    assert row.max_streams == 8 and row.requests_timed == 9
    assert row.idle_ms == pytest.approx(11.0)  # 90 -> 101: nothing outstanding
    assert row.bytes_received == 4000
    assert page["max_concurrent_connections"] == 1.0
    assert page["max_concurrent_requests"] == 8.0
    assert "load_idle_ms" not in page  # no PLT: no figures over the load


def test_an_engine_without_timings_gives_rows_without_them() -> None:
    raw = {"navigation": {"name": f"{HOST}/p/index.html"},
           "resources": [{"name": f"{HOST}/p/o1.jpg", "responseEnd": None}]}  # fmt: skip
    (row,), page = connection_rows(
        server_connections([_conn(3, "h2", ["/p/index.html", "/p/o1.jpg"])]), raw, 500.0
    )
    assert row.requests == 2 and row.requests_timed == 0
    assert row.idle_ms is None and row.max_streams is None
    assert page == {}


def test_the_load_ends_at_its_plt() -> None:
    """What is outstanding after PLT is not the load's; one connection alone has an
    effective concurrency of 1; a load whose requests all start after PLT has no net
    transfer time, and no concurrency to average."""
    two = [[(20.0, 120.0), (170.0, 300.0)], [(130.0, 250.0), (350.0, 400.0)]]
    assert load_activity(two, 380.0) == {
        "load_idle_ms": pytest.approx(80.0),
        "net_transfer_ms": pytest.approx(300.0),
        "effective_concurrency": pytest.approx((230.0 + 150.0) / 300.0),
    }
    assert load_activity([[(10.0, 60.0), (40.0, 90.0)]], 100.0)["effective_concurrency"] == 1.0
    assert load_activity([[(200.0, 300.0)]], 100.0) == {
        "load_idle_ms": 100.0,
        "net_transfer_ms": 0.0,
    }


def test_the_set_up_wait_is_the_handshakes_time_with_nothing_outstanding() -> None:
    """[C]'s share of connection set-up: a handshake while another connection carries
    the page is not waited for; its part after the requests end is, up to PLT; a load
    whose handshakes were not timed has no figure."""
    requests = [[(20.0, 120.0)], [(130.0, 250.0)]]
    setups = [(0.0, 20.0), (100.0, 130.0), (260.0, 900.0)]
    figures = load_activity(requests, 300.0, setups)
    # 0-20 waited; 100-120 covered by the first connection's request, 120-130 waited;
    # 260-300 waited (up to PLT), the rest after PLT not the load's
    assert figures["setup_wait_ms"] == pytest.approx(20.0 + 10.0 + 40.0)
    assert figures["setup_wait_ms"] <= figures["load_idle_ms"]
    assert "setup_wait_ms" not in load_activity(requests, 300.0, [])
    assert "setup_wait_ms" not in load_activity(requests, 300.0)
