"""Cross traffic's generators and its driver, without a testbed: the iperf3 command each
entry asks for, and the driver's start (confirmed by moving bytes, refused when nothing
moves or the flows run another congestion control) and measurement around a load,
against endpoints whose counters a test moves."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from clarke.campaign.cross import CrossKind, CrossTraffic, Direction
from clarke.compose.substrate import ComposeSubstrate
from clarke.errors import InputError
from clarke.place.procs import Proc
from clarke.run.session import cross
from clarke.run.session.session import Session


def _spec(name: str, **kw: object) -> CrossTraffic:
    return CrossTraffic.model_validate({"name": name, **kw})


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (_spec("bulk-cubic"), ["-P", "1", "-i", "0", "-R", "-C", "cubic"]),
        (_spec("bulk-bbr", flows=3, direction="return"), ["-P", "3", "-i", "0", "-C", "bbr"]),
        (
            _spec("udp-cbr", rate_mbps=2.5, direction="both"),
            ["-P", "1", "-i", "0", "--bidir", "-u", "-b", "2.5M"],
        ),
        (_spec("rrul"), ["-P", "4", "-i", "0", "--bidir", "-C", "cubic"]),
    ],
)
def test_each_entry_is_its_iperf3_command(spec: CrossTraffic, expected: list[str]) -> None:
    argv = cross.iperf3_client_argv(spec, "198.19.64.130")
    assert argv[:7] == ["iperf3", "-c", "198.19.64.130", "-p", "5201", "-t", "86400"]
    assert argv[7:] == expected


SS = """Recv-Q Send-Q Local Address:Port  Peer Address:Port Process
0      0      198.19.64.130:5201 198.19.64.2:40000
\t cubic wscale:7,7 rto:204 rtt:1.2/0.5 bytes_sent:120 bytes_acked:120 segs_out:4
0      3000000 198.19.64.130:5201 198.19.64.2:40002
\t bbr wscale:7,7 rto:260 rtt:55/2 bytes_sent:9000000 bytes_acked:8000000 segs_out:6000
"""


class FakeEndpoints:
    """Counters that move by `rate` bytes per sample (forward at xclient: received)."""

    def __init__(self, rate: tuple[int, int], ss: str = SS, tmp: Path = Path("/tmp")) -> None:
        self.rate, self.ss, self.tmp = rate, ss, tmp
        self.received = self.sent = 0
        self.started: list[Proc] = []
        self.stopped: list[Proc] = []

    def address(self, endpoint: str) -> str:
        return "198.19.64.130"

    def argv(self, endpoint: str, argv: Sequence[str]) -> list[str]:
        if argv[0] == "ss" and "-Hltn" in argv:
            return ["echo", "LISTEN 0 5 198.19.64.130:5201"]
        return ["printf", "%s", self.ss]

    def start(self, endpoint: str, name: str, argv: Sequence[str]) -> Proc:
        log = self.tmp / f"{name}.log"
        log.write_text("")
        proc = Proc(role=endpoint, name=name, pid=len(self.started) + 1, start_time=0,
                    argv=list(argv), log=str(log))  # fmt: skip
        self.started.append(proc)
        return proc

    def stop(self, started: Sequence[Proc]) -> None:
        self.stopped += started

    def alive(self, proc: Proc) -> bool:
        return proc not in self.stopped

    def byte_counters(self, endpoint: str) -> tuple[int, int]:
        self.received += self.rate[0]
        self.sent += self.rate[1]
        return self.received, self.sent


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cross, "WINDOW_S", 0.01)
    monkeypatch.setattr(cross, "START_TIMEOUT_S", 0.1)


def test_a_flow_that_moves_bytes_is_confirmed_measured_and_stopped(tmp_path: Path) -> None:
    ep = FakeEndpoints((125_000, 5_000), SS.replace("cubic", "reno"), tmp_path)
    driver = cross.CrossTrafficDriver(ep)
    driver.ensure(_spec("bulk-bbr"), "geo")
    assert [p.name for p in ep.started] == ["cross-iperf3-server", "cross-iperf3-client"]
    assert driver.running is not None and driver.running.started["cc"] == ["bbr"]
    driver.ensure(_spec("bulk-bbr"), "geo")  # the same cell again: left running
    assert len(ep.started) == 2
    before = driver.before_load()
    during, failure = driver.after_load(before)
    assert failure == "" and during.achieved_mbps["forward"] > 0
    assert set(during.achieved_mbps) == {"forward"} and during.cc == ["bbr"]
    assert cross.metrics_of(during) == {"cross_forward_mbps": during.achieved_mbps["forward"]}
    driver.ensure(_spec("none"), "geo")
    assert ep.stopped == ep.started and driver.running is None


def test_nothing_moving_fails_the_start_and_stops_what_it_started(tmp_path: Path) -> None:
    ep = FakeEndpoints((0, 0), tmp=tmp_path)
    with pytest.raises(cross.CrossTrafficFailed, match="no bytes moving"):
        cross.CrossTrafficDriver(ep).ensure(_spec("bulk-cubic"), "geo")
    assert ep.stopped == ep.started


def test_flows_on_another_congestion_control_fail_the_start(tmp_path: Path) -> None:
    ep = FakeEndpoints((125_000, 0), tmp=tmp_path)  # the data connection runs bbr
    with pytest.raises(cross.CrossTrafficFailed, match="run bbr, not cubic"):
        cross.CrossTrafficDriver(ep).ensure(_spec("bulk-cubic"), "geo")
    assert ep.stopped == ep.started


def test_defaults_and_labels() -> None:
    s = _spec("udp-cbr")
    assert (s.name, s.way, s.n_flows, s.rate, s.label) == (
        CrossKind.udp_cbr, Direction.forward, 1, 1.0, "udp-cbr"
    )  # fmt: skip
    assert _spec("bulk-cubic", flows=2, direction="return").label == "bulk-cubic-f2-return"


def test_the_compose_stack_refuses_cross_traffic_naming_why(tmp_path: Path) -> None:
    """The session asks its substrate for the endpoints; compose has none."""
    session = Session(ComposeSubstrate(tmp_path, tmp_path), [])
    session.ensure_cross(_spec("none"))  # nothing asked, nothing refused
    with pytest.raises(InputError, match="only the netns substrate builds"):
        session.ensure_cross(_spec("bulk-cubic"))
