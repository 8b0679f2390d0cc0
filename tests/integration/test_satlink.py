"""satlink end to end: client, terminal, satellite, gateway and server namespaces around
the three satlink roles (satlink/bench/chain.py builds and removes them), checked with
ping, iperf3 and the control socket."""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import need

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "satlink" / "bench"))
import chain as ch  # noqa: E402

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def binary() -> Path:
    need(ch.BINARY.is_file(), f"satlink release build ({ch.BINARY}): cargo build --release")
    return ch.BINARY


@pytest.fixture
def geo(binary: Path) -> Iterator[ch.Chain]:
    need(os.geteuid() == 0, "root (network namespaces, TUN devices)")
    with ch.Chain(12, f"t{os.getpid()}-", ch.GEO, events=True) as c:
        ch.wait_link(c)
        yield c


def test_bad_input_exits_1_with_error(binary: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"forward": {"rate_bps": 1, "delay": 3}, "return": {}}')
    p = subprocess.run(
        [
            str(binary),
            "sat",
            "--emu-bind",
            "127.0.0.1:1",
            "--gw",
            "127.0.0.1:2",
            "--st",
            "127.0.0.1:3",
            "--config",
            str(bad),
            "--control",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 1
    assert p.stderr.startswith("ERROR: bad config")
    assert "unknown field `delay`" in p.stderr
    p = subprocess.run(
        [str(binary), "gw", "--dev", "x"], capture_output=True, text=True, check=False
    )
    assert p.returncode == 1
    assert p.stderr.startswith("ERROR: ")


@pytest.mark.timing
def test_geo_rtt_counters_and_runtime_change(geo: ch.Chain) -> None:
    rtts = ch.ping(geo, 10)
    assert len(rtts) == 10
    # ping prints whole milliseconds above 100 ms. Never early, and the geo delay, not
    # another (the VM may wake any timer 15-70 ms late: accuracy is the benchmark's job).
    assert min(rtts) >= 530 and statistics.median(rtts) < 600, rtts

    health = geo.ask("gateway", {"cmd": "health"})
    assert health["role"] == "gw"
    assert health["config"]["forward"]["uplink_delay_ms"] == 125.0

    stats = geo.ask("gateway", {"cmd": "stats"})
    fwd = stats["forward"]
    assert fwd["frames_out"] >= 10 and fwd["drops"]["queue_full"] == 0
    assert fwd["release_lateness"]["count"] >= 10
    assert stats["return"]["frames_out"] >= 10
    sat = geo.ask("satellite", {"cmd": "stats"})
    assert sat["forward"]["frames_out"] >= 10 and sat["return"]["frames_out"] >= 10

    # Change the delays at run time on every role, no restart: 2 x (10 + 10 + 5) = 50 ms.
    cfg = json.loads(json.dumps(ch.GEO))
    for d in ("forward", "return"):
        cfg[d].update(uplink_delay_ms=10.0, downlink_delay_ms=10.0, framing_delay_ms=5.0)
    for role in ("terminal", "satellite", "gateway"):
        reply = geo.ask(role, {"cmd": "set", "config": cfg})
        assert reply["ok"] and reply["config"]["return"]["uplink_delay_ms"] == 10.0
    time.sleep(0.6)  # frames already on the old delay line drain first
    rtts = ch.ping(geo, 5)
    # The new 50 ms, never early, and no longer the old 530 ms.
    assert min(rtts) >= 50 and statistics.median(rtts) < 120, rtts

    bad = geo.ask("gateway", {"cmd": "set", "config": {"forward": {"rate": 1}, "return": {}}})
    assert "unknown field `rate`" in bad["error"]
    assert geo.ask("gateway", {"cmd": "reset_stats"}) == {"ok": True}
    assert geo.ask("gateway", {"cmd": "stats"})["forward"]["frames_out"] == 0

    out = subprocess.run(
        [str(ch.BINARY), "ctl", str(geo.control("terminal")), '{"cmd":"health"}'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["role"] == "st"
    # Only the owner may connect: the socket is made 0600, whatever the umask.
    for role in ("terminal", "satellite", "gateway"):
        assert geo.control(role).stat().st_mode & 0o777 == 0o600, role


@pytest.mark.timing
def test_rate_queue_and_loss(geo: ch.Chain) -> None:
    need(shutil.which("iperf3") is not None, "iperf3")
    cfg = json.loads(json.dumps(ch.GEO))
    for d in ("forward", "return"):
        cfg[d].update(
            uplink_delay_ms=5.0,
            downlink_delay_ms=5.0,
            framing_delay_ms=0.0,
            rate_bps=5_000_000,
            queue={"ms": 50},
        )
    cfg["forward"]["loss"] = {"packet_rate": 0.1}
    for role in ("terminal", "satellite", "gateway"):
        assert geo.ask(role, {"cmd": "set", "config": cfg})["ok"]
    srv = subprocess.Popen(
        ["ip", "netns", "exec", geo.ns["server"], "iperf3", "-s", "-1", "-B", geo.addr(26)],
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        geo.ask("terminal", {"cmd": "reset_stats"})
        # 8 Mb/s of UDP into a 5 Mb/s return link for 4 s.
        geo.sh("client", "iperf3", "-c", geo.addr(26), "-u", "-b", "8M", "-l", "1400", "-t", "4")
        st = geo.ask("terminal", {"cmd": "stats"})
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(5)
    ret = st["return"]
    rate = ret["bytes_out"] * 8 / st["since_reset_s"] / 1e6
    assert 4.5 <= rate <= 5.1, rate
    assert ret["drops"]["queue_full"] > 0
    assert ret["queue_delay"]["max_ms"] <= 50.0 + 2.5  # the bound plus one frame in service
    # 10 % loss on the forward link: 200 pings lose about 20.
    geo.ask("gateway", {"cmd": "reset_stats"})
    geo.sh("client", "ping", "-q", "-c", "200", "-i", "0.005", geo.addr(26), check=False)
    lost = geo.ask("gateway", {"cmd": "stats"})["forward"]["drops"]["loss"]
    assert 5 <= lost <= 40, lost


@pytest.mark.timing
def test_fq_codel_drops_the_bulk_flow_and_spares_a_sparse_one(geo: ch.Chain) -> None:
    """The geo-fq-codel profile as satlink gets it: a UDP flow at 1.5 x the return rate
    builds a standing queue that CoDel drops from, while pings (another flow) cross at
    about the idle RTT."""
    need(shutil.which("iperf3") is not None, "iperf3")
    from clarke import profiles

    cfg = profiles.read("geo-fq-codel").to_satlink_config()
    for role in ("terminal", "satellite", "gateway"):
        assert geo.ask(role, {"cmd": "set", "config": cfg})["ok"]
    srv = subprocess.Popen(
        ["ip", "netns", "exec", geo.ns["server"], "iperf3", "-s", "-1", "-B", geo.addr(26)],
        stdout=subprocess.DEVNULL,
    )
    blast: subprocess.Popen[bytes] | None = None
    try:
        time.sleep(0.5)
        geo.ask("terminal", {"cmd": "reset_stats"})
        blast = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                geo.ns["client"],
                "iperf3",
                "-c",
                geo.addr(26),
                "-u",
                "-b",
                "15M",
                "-l",
                "1400",
                "-t",
                "6",
            ],
            stdout=subprocess.DEVNULL,
        )
        time.sleep(2)  # the bulk flow's queue builds up
        rtts = ch.ping(geo, 10)
        blast.wait(30)
        st = geo.ask("terminal", {"cmd": "stats"})
    finally:
        for p in (blast, srv):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(5)
    ret = st["return"]
    print(f"pings {rtts}, queue delay {ret['queue_delay']}, drops {ret['drops']}")
    assert ret["discipline"] == "fq_codel"
    assert ret["drops"]["codel"] > 0 and ret["drops"]["queue_full"] == 0
    # The bulk flow waits in a standing queue (a second or so by the end) ...
    assert ret["queue_delay"]["p99_ms"] > 200, ret["queue_delay"]
    # ... the pings do not (timers may wake 15-70 ms late: a wide margin).
    assert len(rtts) >= 8 and statistics.median(rtts) < 530 + 100, rtts


@pytest.mark.timing
def test_capacity_on_demand_holds_a_packet_after_idle_until_its_grant(geo: ch.Chain) -> None:
    """geo-consumer's return link as satlink gets it (DAMA): a full-sized echo after
    1.5 s of silence finds no capacity granted (its constant assignment carries 53 bytes
    a superframe) and waits for the request-grant loop, the allocation latency; the same
    echoes every 20 ms, a steady flow, cross in the capacity their requests keep
    granted."""
    from clarke import profiles

    profile = profiles.read("geo-consumer")
    dama = profile.return_.dama
    assert dama is not None
    cfg = profile.to_satlink_config()
    for role in ("terminal", "satellite", "gateway"):
        assert geo.ask(role, {"cmd": "set", "config": cfg})["ok"]
    time.sleep(1.5)  # the pings before have left no grant behind
    geo.ask("terminal", {"cmd": "reset_stats"})
    after_idle = ch.ping(geo, 3, interval=1.5, size=1472)
    steady = ch.ping(geo, 100, interval=0.02, size=1472)
    stats = geo.ask("terminal", {"cmd": "stats"})["return"]
    settled = steady[len(steady) // 2 :]  # the flow's own first echoes wait as after idle
    print(
        f"after 1.5 s idle: {after_idle} ms; steady, second half: median "
        f"{statistics.median(settled) if settled else None} ms; dama {stats.get('dama')}"
    )
    base = profile.idle_rtt_ms
    assert len(after_idle) == 3 and len(settled) >= 45, (after_idle, steady)
    # Never earlier than the grant (timers may wake late, never early) ...
    assert min(after_idle) >= base + dama.allocation_latency_ms - dama.superframe_ms, after_idle
    # ... and a steady flow nowhere near that wait.
    assert statistics.median(settled) < base + dama.allocation_latency_ms / 2, settled
    assert stats["dama"]["requests"] > 0, stats


@pytest.mark.timing
def test_schedule_steps_and_outage_on_time(geo: ch.Chain) -> None:
    """A schedule applied by `set`: RTT 50 ms, an outage from 1.5 s to 2.5 s (link
    time), then RTT 150 ms; only the pings the outage asked for are lost."""
    cfg = json.loads(json.dumps(ch.GEO))
    for d in ("forward", "return"):
        cfg[d].update(uplink_delay_ms=10.0, downlink_delay_ms=10.0, framing_delay_ms=5.0)
    both = lambda **kw: {"forward": dict(kw), "return": dict(kw)}  # noqa: E731
    cfg["schedule"] = {
        "id": "e2e",
        "end": "hold",
        "steps": [
            {"at_ms": 0},
            {"at_ms": 1500, **both(outage=True)},
            {"at_ms": 2500, **both(outage=False, uplink_delay_ms=60.0)},
        ],
    }
    t0 = time.time()
    for role in ("terminal", "satellite", "gateway"):
        assert geo.ask(role, {"cmd": "set", "config": cfg})["ok"]
    for role in ("terminal", "gateway"):
        geo.ask(role, {"cmd": "reset_stats"})
    out = geo.sh(
        "client",
        "ping",
        "-n",
        "-D",
        "-c",
        "40",
        "-i",
        "0.1",
        "-W",
        "2",
        geo.addr(26),
        check=False,
    ).stdout
    # (send time since the set, RTT) of each reply.
    replies = []
    for line in out.splitlines():
        if "time=" in line:
            stamp = float(line.split("]")[0].lstrip("["))
            rtt = float(line.split("time=")[1].split()[0])
            replies.append((stamp - rtt / 1000 - t0, rtt))
    early = [rtt for s, rtt in replies if s < 1.3]
    late = [rtt for s, rtt in replies if s > 2.7]
    assert len(early) >= 8 and len(late) >= 8, replies
    assert min(early) >= 50 and statistics.median(early) < 80, replies
    assert min(late) >= 150 and statistics.median(late) < 180, replies
    assert not [r for r in replies if 1.55 <= r[0] <= 2.45], replies

    st = geo.ask("terminal", {"cmd": "stats"})
    gw = geo.ask("gateway", {"cmd": "stats"})
    # Every lost ping was dropped by the outage, and nothing else was lost.
    outage = st["return"]["drops"]["outage"] + gw["forward"]["drops"]["outage"]
    assert 40 - len(replies) == outage and 8 <= outage <= 12, (outage, replies)
    assert st["return"]["drops"]["loss"] == gw["forward"]["drops"]["loss"] == 0
    assert gw["return"]["drops"]["outage"] == 0  # the received direction: never
    elapsed_ms = (time.time() - t0) * 1000
    for stats, d in ((st, "return"), (gw, "forward")):
        sched = stats[d]["schedule"]
        assert sched["id"] == "e2e" and sched["step_index"] == 2, sched
        assert elapsed_ms - 500 < sched["link_time_ms"] <= elapsed_ms, sched
        crossed = stats[d]["crossed"]
        assert crossed["frames"] >= 16, crossed
        assert (crossed["delay_ms"]["min"], crossed["delay_ms"]["max"]) == (25.0, 75.0)
        assert crossed["rate_bps"]["min"] == crossed["rate_bps"]["max"] == 10_000_000
    assert "schedule" not in st["forward"]
    health = geo.ask("gateway", {"cmd": "health"})
    assert health["schedule"]["id"] == "e2e" and health["schedule"]["steps"] == 3
    assert health["config"]["schedule"]["steps"][2]["forward"]["uplink_delay_ms"] == 60.0

    # A set without a schedule removes it.
    del cfg["schedule"]
    assert geo.ask("gateway", {"cmd": "set", "config": cfg})["ok"]
    assert "schedule" not in geo.ask("gateway", {"cmd": "stats"})["forward"]
    assert geo.ask("gateway", {"cmd": "health"})["schedule"] is None
    geo.procs["terminal"].send_signal(signal.SIGTERM)
    assert geo.procs["terminal"].wait(5) == 0
    lines = (geo.dir / "terminal.events").read_text().splitlines()
    assert any(line.startswith("# schedule e2e epoch at ") for line in lines)
    events = [line.split() for line in lines if not line.startswith("#")]
    assert (
        sum(e[1:3] == ["r", "d"] and e[4] == "outage" for e in events)
        == (st["return"]["drops"]["outage"])
    )


def test_sigterm_removes_the_socket_and_events_are_logged(binary: Path) -> None:
    need(os.geteuid() == 0, "root (network namespaces, TUN devices)")
    c = ch.Chain(13, f"t{os.getpid()}-", ch.UNSHAPED, events=True).open()
    try:
        ch.wait_link(c)
        sock = c.control("gateway")
        assert sock.exists()
        c.procs["gateway"].send_signal(signal.SIGTERM)
        assert c.procs["gateway"].wait(5) == 0
        assert not sock.exists()
        lines = (c.dir / "gateway.events").read_text().splitlines()
        assert lines[0] == "# satlink event log, format 1"
        assert any(line.startswith("# config: ") for line in lines)
        events = [line.split() for line in lines if not line.startswith("#")]
        assert any(e[1:3] == ["f", ">"] for e in events)
        assert any(e[1:3] == ["r", "<"] for e in events)
    finally:
        c.close()
    assert not any(
        ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for ns in c.ns.values()
    )
