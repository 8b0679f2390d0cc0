"""The server's stream scheduler as a campaign dimension, and the order a load's objects
completed in (issue 32): the campaign axis and its run ids, what the agent contract
takes, the join of the server's exchanges with the browser's resource timing, and the
report's figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from clarke.agent.agents import Agents
from clarke.campaign.dimensions import SCHEDULER
from clarke.campaign.plan import CampaignPlan
from clarke.contract import BaseServerConfig, Configured, ServerConfig
from clarke.errors import ClarkeError
from clarke.report.order import completion_order
from clarke.results.details import LoadDetails
from clarke.results.objects import kendall_tau_b, object_rows, signals_received
from clarke.vocab import Scheduler
from helpers import moved, plan_of, record, server_connections


def _plan(tmp_path: Path, schedulers: str) -> CampaignPlan:
    return plan_of(tmp_path, models="[triangular]", scheduler=schedulers)


def test_a_scheduler_axis_gives_one_cell_each_and_says_so_in_run_ids(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "[sequential, round-robin, rfc9218]")
    assert [r.run_id for r in plan.runs] == [
        "lan-h2-bbr-triangular-100k-sseq-r1",
        "lan-h2-bbr-triangular-100k-srr-r1",
        "lan-h2-bbr-triangular-100k-s9218-r1",
    ]
    assert [r.cell[SCHEDULER] for r in plan.runs] == [
        Scheduler.sequential,
        Scheduler.round_robin,
        Scheduler.rfc9218,
    ]


def test_a_campaign_without_the_axis_keeps_the_servers_own(tmp_path: Path) -> None:
    (run,) = plan_of(tmp_path, models="[triangular]").runs
    assert run.cell[SCHEDULER] is Scheduler.own
    assert run.run_id == "lan-h2-bbr-triangular-100k-r1"  # run ids as before


def test_an_unknown_scheduler_is_refused_with_the_allowed_ones(tmp_path: Path) -> None:
    with pytest.raises(ClarkeError) as e:
        _plan(tmp_path, "[fifo]")
    assert "fifo" in str(e.value) and "sequential" in str(e.value)


def test_the_agent_contract_takes_a_scheduler_from_the_vocabulary() -> None:
    assert ServerConfig.model_validate({"scheduler": "sequential"}).body() == {
        "scheduler": "sequential"
    }
    with pytest.raises(ValidationError):
        ServerConfig.model_validate({"scheduler": "fifo"})


def test_kendall_tau_b() -> None:
    assert kendall_tau_b([1, 2, 3, 4], [1, 2, 3, 4]) == 1.0
    assert kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert kendall_tau_b([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    assert kendall_tau_b([1], [1]) is None
    assert kendall_tau_b([1, 2], [5, 5]) is None


def _exchange(stream: int, path: str, asked: float, done: float, **more: Any) -> dict[str, Any]:
    return {
        "stream": stream,
        "path": path,
        "priority": "u=2, i",
        "urgency": 2,
        "incremental": True,
        "request_unix_ms": asked,
        "written_last_unix_ms": done,
        "bytes": 1000,
        **more,
    }


ORIGIN_MS = 1_000_000.0


def _raw(ends: dict[str, float]) -> dict[str, Any]:
    host = "https://www.clarke.test"
    return {
        "timeOrigin": ORIGIN_MS,
        "navigation": {"name": f"{host}/p/", "requestStart": 1.0, "responseEnd": 5.0},
        "resources": [
            {"name": f"{host}{path}", "requestStart": 10.0 + i, "responseEnd": end}
            for i, (path, end) in enumerate(ends.items())
        ],
    }


def test_object_rows_join_the_servers_exchanges_with_resource_timing() -> None:
    # Asked in the order a, b, c; the server finished c, then a, then b; the browser
    # received them in the same order.
    conn = {
        "id": 7,
        "protocol": "h2",
        "exchanges": [
            _exchange(1, "/p/", ORIGIN_MS + 1, ORIGIN_MS + 4),
            _exchange(3, "/p/a.jpg", ORIGIN_MS + 10, ORIGIN_MS + 40),
            _exchange(
                5, "/p/b.jpg", ORIGIN_MS + 11, ORIGIN_MS + 50, handed_first_unix_ms=ORIGIN_MS + 21
            ),
            _exchange(7, "/p/c.jpg", ORIGIN_MS + 12, ORIGIN_MS + 30, turn_released_unwritten=True),
        ],
        "signals": {"priority_updates": 2, "rfc7540_frames": 0, "settings": {"0x9": 1}},
    }
    rows, metrics = object_rows(
        server_connections([conn]), _raw({"/p/a.jpg": 42, "/p/b.jpg": 52, "/p/c.jpg": 32}), "/p/"
    )
    by_path = {r.path: r for r in rows}
    assert [r.path for r in rows] == ["/p/", "/p/a.jpg", "/p/b.jpg", "/p/c.jpg"]
    assert [r.request_order for r in rows] == [1, 2, 3, 4]
    assert [r.server_completion_order for r in rows] == [1, 3, 4, 2]
    assert [r.completion_order for r in rows] == [1, 3, 4, 2]
    assert by_path["/p/b.jpg"].server_done_ms == pytest.approx(50)
    assert by_path["/p/b.jpg"].server_start_ms == pytest.approx(21)
    assert by_path["/p/b.jpg"].response_end_ms == 52
    assert by_path["/p/c.jpg"].stream == 7 and by_path["/p/c.jpg"].urgency == 2
    assert [r.turn_released_unwritten for r in rows] == [False, False, False, True]
    # The HTML is left out of the metric: objects a, b, c against 2, 3, 1.
    assert metrics == {"completion_order_tau": pytest.approx(kendall_tau_b([1, 2, 3], [2, 3, 1]))}
    signals = signals_received(server_connections([conn]))
    assert signals.priority_headers == {"u=2, i": 4}
    assert signals.priority_updates == 2 and signals.settings == [{"0x9": 1}]


def test_an_http3_response_is_done_when_its_fin_first_went_out() -> None:
    # a's FIN went out first but a was acknowledged last (a packet of it sent again): the
    # server's order is the FINs'; an exchange without a FIN noted falls back to its ack.
    def h3(stream: int, path: str, **times: float) -> dict[str, Any]:
        x = _exchange(stream, path, ORIGIN_MS + stream, 0.0, **times)
        del x["written_last_unix_ms"]
        return x

    conn = {
        "id": 1,
        "protocol": "h3",
        "exchanges": [
            h3(4, "/p/a.jpg", fin_sent_unix_ms=ORIGIN_MS + 20, acked_unix_ms=ORIGIN_MS + 90),
            h3(8, "/p/b.jpg", fin_sent_unix_ms=ORIGIN_MS + 30, acked_unix_ms=ORIGIN_MS + 40),
            h3(12, "/p/c.jpg", acked_unix_ms=ORIGIN_MS + 35),
        ],
    }
    rows, _ = object_rows(
        server_connections([conn]), _raw({"/p/a.jpg": 88, "/p/b.jpg": 38, "/p/c.jpg": 33}), "/p/"
    )
    assert [(r.path, r.server_done_ms) for r in rows] == [
        ("/p/a.jpg", pytest.approx(20)),
        ("/p/b.jpg", pytest.approx(30)),
        ("/p/c.jpg", pytest.approx(35)),
    ]
    assert [r.server_completion_order for r in rows] == [1, 2, 3]


def test_without_the_servers_record_the_browsers_order_is_used() -> None:
    rows, metrics = object_rows([], _raw({"/p/a.jpg": 42, "/p/b.jpg": 32}), "/p/")
    assert [(r.path, r.request_order, r.completion_order) for r in rows] == [
        ("/p/a.jpg", 1, 2),
        ("/p/b.jpg", 2, 1),
    ]
    assert all(r.server_completion_order is None for r in rows)
    assert metrics == {"completion_order_tau": -1.0}


def test_the_report_draws_completion_order_per_scheduler() -> None:
    raw = _raw({"/p/a.jpg": 42, "/p/b.jpg": 52})
    conn = {
        "exchanges": [
            _exchange(1, "/p/a.jpg", ORIGIN_MS + 10, ORIGIN_MS + 40),
            _exchange(3, "/p/b.jpg", ORIGIN_MS + 11, ORIGIN_MS + 50),
        ]
    }
    rows, _ = object_rows(server_connections([conn]), raw, "/p/")
    records = [
        moved(record(i), scheduler=s).model_copy(update={"details": LoadDetails(objects=rows)})
        for i, s in enumerate(["sequential", "round-robin"])
    ]
    figure = completion_order(records)
    assert figure is not None and "sequential" in figure.svg and "round-robin" in figure.svg
    assert completion_order([record(0)]) is None  # no objects recorded: no figure


class _Server:
    """A server agent's client that counts what it is asked; its configure is a no-op
    where the scheduler asked for is in force, as a server's is (roles.py)."""

    def __init__(self, scheduler: str) -> None:
        self.scheduler = scheduler
        self.calls: list[str] = []

    def configure(self, body: BaseServerConfig) -> Configured:
        self.calls.append("POST /config")
        asked = str(body.body()["scheduler"])
        applied = asked != self.scheduler
        self.scheduler = asked
        return Configured(applied=applied, state={"scheduler": self.scheduler})


def test_a_scheduler_in_force_costs_one_call_per_run() -> None:
    """A campaign without the axis (`own`) puts the scheduler in force with one request
    per run, which the server finds in force (issue 32: each run once made a state call
    and a no-op POST /config); another is applied once and recorded."""
    server = _Server("own")
    agents = Agents.__new__(Agents)
    agents.clients = {"server": server}  # type: ignore[dict-item]
    agents.applied = []
    for _ in range(3):
        assert agents.ensure_server({"scheduler": Scheduler.own.value}) is None
    assert server.calls == ["POST /config"] * 3
    applied = agents.ensure_server({"scheduler": "sequential"})
    assert applied is not None and (applied.what, applied.value) == ("scheduler", "sequential")
    assert agents.ensure_server({"scheduler": "sequential"}) is None
    assert server.calls[3:] == ["POST /config"] * 2 and agents.applied == [applied]


def _timed(url: str, start: float, end: float) -> dict[str, Any]:
    return {"name": url, "requestStart": start, "responseEnd": end}


def test_a_sites_exchanges_join_the_timing_of_their_own_origin() -> None:
    """Two origins of a site serving one path: each exchange gets its own host's entry
    (by path alone, the first host's entry was given to both)."""
    raw = {
        "timeOrigin": ORIGIN_MS,
        "navigation": {"name": "https://www.site.test/", "requestStart": 1.0, "responseEnd": 5.0},
        "resources": [
            _timed("https://static.site.test/app.js?v=2", 10.0, 40.0),
            _timed("https://cdn.other.test/app.js", 11.0, 90.0),
        ],
    }
    conns = [
        {"exchanges": [
            _exchange(1, "/", ORIGIN_MS + 1, ORIGIN_MS + 4, authority="www.site.test"),
            _exchange(3, "/app.js", ORIGIN_MS + 10, ORIGIN_MS + 30, authority="static.site.test"),
        ]},
        {"exchanges": [
            _exchange(1, "/app.js", ORIGIN_MS + 11, ORIGIN_MS + 80, authority="CDN.other.test:443"),
        ]},
    ]  # fmt: skip
    rows, metrics = object_rows(server_connections(conns), raw, "/", "www.site.test")
    ends = {(r.host, r.path): r.response_end_ms for r in rows}
    # The start page is left out of the order metric, the other objects are in it:
    # asked static then cdn, completed in that order.
    assert metrics == {"completion_order_tau": 1.0}
    assert ends == {
        ("www.site.test", "/"): 5.0,
        ("static.site.test", "/app.js"): 40.0,
        ("cdn.other.test", "/app.js"): 90.0,
    }
