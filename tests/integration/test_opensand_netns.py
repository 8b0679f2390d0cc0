"""OpenSAND 8.2 for real, in network namespaces (root): the netns testbed on the opensand
backend (up, status, verify, apply, down), the OpenSAND role agent's entities in
namespaces of their own, and `opensand -c` on the XML generated for every shipped
profile OpenSAND can take.

These tests SKIP when OpenSAND is not installed, ALSO IN CI: OpenSAND comes from the
OpenSAND project's own Debian 12 packages, which CI cannot install, so a missing OpenSAND
is not a CI failure. That is why they call pytest.skip directly instead of conftest.need()
(need() fails in CI). Everything else they use (root, iperf3) is need()ed as usual.
Everything they make is removed also when they fail."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clarke import profiles, sh
from clarke.errors import ClarkeError, ValidationFailed
from clarke.link import opensand
from clarke.link.opensand import entity as opensand_role
from clarke.place import netns, procs
from clarke.place.plan import plan
from clarke.roles import link_config
from clarke.run.linkcheck import check as linkcheck
from clarke.run.session.session import Session
from clarke.run.session.settings import ROLES_ONLY
from clarke.testbed import lifecycle
from clarke.testbed.state import Store
from clarke.testbed.substrate import NetnsSubstrate
from conftest import need

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "opensand" / "entrypoint.sh"
TESTBED_ID = 40  # the testbed of the backend test
ROLES_ID = 42  # addresses (plan.py) of the role agents' namespaces
CHECK_ID = 43  # addresses of the `opensand -c` namespaces


def require_opensand() -> str:
    # pytest.skip, not conftest.need(): CI cannot install OpenSAND, so its absence must
    # skip there too, with the reason printed (-ra), instead of failing CI.
    version = opensand_role.installed_version()
    if version is None:
        pytest.skip(
            "OpenSAND 8.2 is not installed (no `opensand` on PATH): `sudo opensand/install.sh` "
            "installs it from the OpenSAND project's Debian 12 packages, or from a local copy "
            "(docs/opensand.md, 'Getting OpenSAND'); skipped, also in CI"
        )
    if not version.startswith(f"{opensand.OPENSAND_VERSION}."):
        pytest.skip(f"OpenSAND {version} is installed; these tests are for 8.2")
    need(os.geteuid() == 0, "needs root (network namespaces)")
    need(Path("/dev/net/tun").exists(), "needs /dev/net/tun")
    return version


def report(capsys: pytest.CaptureFixture[str], text: str) -> None:
    """Measured figures go to the terminal whatever pytest captures."""
    with capsys.disabled():
        print(f"\n[opensand] {text}", flush=True)


def echo(ns: str, target: str, count: int, interval: float = 0.2) -> dict[str, list[float]]:
    argv = [sys.executable, "-m", "clarke.place.echo", target, "--count", str(count)]
    argv += ["--interval", str(interval), "--timeout", "3"]
    return json.loads(sh.run(netns.exec_argv(ns, argv), timeout=60).stdout)


def wait_for_echo(ns: str, target: str, timeout: float = 60, logs: tuple[Path, ...] = ()) -> None:
    """Fails naming the entities' logs' last lines (logon, TAP, errors): a link that
    never carries must say at which entity it stopped."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if echo(ns, target, 1)["rtts_ms"]:
            return
    tails = "".join(f"\n--- {log}:\n{opensand_role.tail(log, 15)}" for log in logs)
    pytest.fail(f"no echo {ns} -> {target} crossed the OpenSAND link within {timeout:.0f} s{tails}")


def gone(pids: dict[int, int]) -> list[int]:
    """The PIDs (with their recorded start times) still running."""
    return [pid for pid, st in pids.items() if procs.start_time(pid) == st]


# --- the netns testbed on the opensand backend --------------------------------------------


@pytest.fixture
def testbed_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    require_opensand()
    need(shutil.which("iperf3") is not None, "iperf3 is not installed (Debian: iperf3)")
    state_dir = tmp_path / "state"
    monkeypatch.setenv("CLARKE_STATE_DIR", str(state_dir))
    try:
        yield state_dir
    finally:
        lifecycle.down(TESTBED_ID)  # only ours: down refuses another state dir's testbed
    p = plan(TESTBED_ID)
    assert not [n for n in netns.namespaces() if n in p.namespaces.values()]
    assert not netns.link_exists(p.root_mgmt_link)
    assert not list(state_dir.glob("*.json"))


@pytest.mark.timing
@pytest.mark.slow
def test_testbed_on_opensand(testbed_env: Path, run_cli, capsys) -> None:  # type: ignore[no-untyped-def]
    tid = str(TESTBED_ID)
    code, out, err = run_cli(
        "testbed", "up", "--json", "--id", tid, "--link", "opensand", "--profile", "geo"
    )
    assert code == 0, err
    up = json.loads(out)
    assert up["link"] == "opensand" and [a["value"] for a in up["applied"]] == ["geo"]
    store, p = Store(), plan(TESTBED_ID)
    state = store.read(TESTBED_ID)
    assert state is not None and state.phase == "up" and state.profile == "geo"
    assert [pr.name for pr in state.processes] == [
        "agent-server",
        "agent-satellite",
        "agent-gateway",
        "agent-terminal",
        "agent-client",
    ]
    assert all(procs.alive(pr) for pr in state.processes)
    run_dir = Path(state.run_dir)
    assert (run_dir / "gateway" / "xml" / "gw" / "profile.xml").is_file()

    code, out, err = run_cli("testbed", "status", "--json")
    assert code == 0, err
    (entry,) = [e for e in json.loads(out) if e["id"] == TESTBED_ID]
    assert entry["healthy"] and entry["link"] == "opensand"

    # verify: the RTT is judged here; the rates are measured and reported (OpenSAND
    # 8.2's forward TCP stays below the forward capacity: docs/opensand.md).
    load = Path("/proc/loadavg").read_text().split()[0]
    code, out, err = run_cli("testbed", "check", "--id", tid, "--json")
    assert code in (0, 1) and out.strip(), (code, err)
    rep = json.loads(out)
    checks = {c["name"]: c for c in rep["checks"]}
    ping, tput = rep["ping"], rep["throughput"]
    report(
        capsys,
        f"geo verify (load average {load}): RTT mean {ping['mean']:.1f} ms, stdev "
        f"{ping['stdev']:.1f}, p50 {ping['p50']:.1f}, p99 {ping['p99']:.1f}, max "
        f"{ping['max']:.1f} (expected {checks['rtt p50']['expected']:.1f} "
        f"± {checks['rtt p50']['tolerance']:.1f}); "
        + "; ".join(
            f"{d}: link {t['rate_bps'] / 1e6:.2f} Mb/s from {t['rate_from']}, goodput "
            f"{t['goodput_bps'] / 1e6:.2f} Mb/s, {checks[d + ' rate']['verdict']}"
            for d, t in tput.items()
        ),
    )
    assert checks["rtt p50"]["verdict"] == "ok", checks["rtt p50"]
    assert checks["echo loss"]["verdict"] == "ok", checks["echo loss"]
    for direction, t in tput.items():
        assert t["rate_from"] == "link counters", direction
        # The TAP counters and iperf3 count the same TCP transfer.
        assert 0.8 < t["tcp_rate_bps"] / t["wire_bps"] < 1.25, (direction, t)
    stats = rep["link_stats"]
    assert stats["terminal"]["tap"]["rx_packets"] > 1000
    assert stats["terminal"]["bytes_onto_link"]["forward"] > 1_000_000
    assert stats["terminal"]["link"]["delay_value_ms"] == 127

    # Another profile on the running testbed, and back: through the agents, once each.
    session = Session(NetnsSubstrate(TESTBED_ID), [], ROLES_ONLY)
    session.start("geo")
    try:
        for name in ("meo", "geo"):
            agents = session.agents
            assert agents is not None
            pids = {
                r: agents[r].health().said("opensand")["pid"] for r in ("satellite", "terminal")
            }
            applied = session.ensure_profile(name)
            assert applied is not None and applied.roles == ("satellite", "gateway", "terminal")
            assert session.ensure_profile(name) is None  # in force: nothing to do
            now = store.read(TESTBED_ID)
            assert now is not None and now.profile == name  # the state file follows
            for role, pid in pids.items():
                assert procs.start_time(pid) is None, f"the old {role} entity still runs"
            result = linkcheck.ping(session.link().probe(), count=10)
            s = result.summary()
            expected = opensand.derive(profiles.read(name)).expected_rtt_ms
            report(
                capsys,
                f"after apply {name}: RTT mean {s['mean']:.1f} ms, p50 {s['p50']:.1f}, max "
                f"{s['max']:.1f} (expected {expected:.1f})",
            )
            assert result.loss == 0
            assert abs(s["mean"] - expected) < 0.15 * expected + 10, (name, s)
    finally:
        session.close()  # attached: the testbed stays up

    pids = {pr.pid: pr.start_time for pr in store.read(TESTBED_ID).processes}  # type: ignore[union-attr]
    code, out, err = run_cli("testbed", "down", "--id", tid)
    assert code == 0, err
    assert not gone(pids)
    assert not [n for n in netns.namespaces() if n in p.namespaces.values()]
    assert store.read(TESTBED_ID) is None


# --- the role agent's entities in namespaces of their own ------------------------------


@contextlib.contextmanager
def namespaces(names: list[str]) -> Iterator[None]:
    """Fresh namespaces (IPv6 off), deleted afterwards with whatever still runs in them."""
    existing = set(netns.namespaces())
    clash = [n for n in names if n in existing]
    need(not clash, f"namespaces exist already (an earlier run?): {clash}")
    try:
        for ns in names:
            netns.add(ns)
            netns.batch(ns, ["link set lo up"])
            netns.sysctls(
                ns,
                {
                    "net.ipv6.conf.all.disable_ipv6": "1",
                    "net.ipv6.conf.default.disable_ipv6": "1",
                },
            )
        yield
    finally:
        for ns in names:
            if ns in netns.namespaces():
                procs.stop_pids(dict.fromkeys(netns.pids(ns)))
                netns.delete(ns)


@pytest.mark.timing
@pytest.mark.slow
def test_role_agents_in_namespaces(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The three entities as the compose stack runs them, one OpenSandRole each, in
    namespaces joined by an emulation bridge: start in order, an echo crosses the link,
    configure (satellite, gateway, terminal) restarts each on another profile, a profile
    OpenSAND cannot take is refused without touching the running entity, stop leaves
    no process, TAP or bridge."""
    from clarke.link.opensand.entity import EntitySetup, LinkEnd, OpenSandRole
    from clarke.vocab import LINK_START_ORDER as START_ORDER

    require_opensand()
    p = plan(ROLES_ID)
    ns = {"satellite": f"clkos{ROLES_ID}-sat", "gateway": f"clkos{ROLES_ID}-gw"}
    ns["terminal"] = f"clkos{ROLES_ID}-st"
    entities = opensand.Entities(
        p.emu.address("gateway"), p.emu.address("terminal"), p.emu.address("satellite")
    )
    roles: dict[str, OpenSandRole] = {}
    with namespaces(list(ns.values())):
        sat_ns = ns["satellite"]
        netns.batch(
            sat_ns,
            [
                "link add br-emu type bridge mcast_snooping 0",
                f"addr add {p.emu.cidr('satellite')} dev br-emu",
                "link set br-emu up",
            ],
        )
        for role in ("gateway", "terminal"):
            port = f"emu-{opensand_role.ENTITY_OF[role]}"
            netns.veth(ns[role], "emu", sat_ns, port)
            netns.batch(sat_ns, [f"link set {port} master br-emu", f"link set {port} up"])
            netns.batch(ns[role], [f"addr add {p.emu.cidr(role)} dev emu"])
        try:
            for role in START_ORDER:
                end = None
                if role != "satellite":
                    peer = "gateway" if role == "terminal" else "terminal"
                    end = LinkEnd(
                        p.sat.cidr(role), p.sat.address(peer), (str(p.remote_lan(role).prefix),)
                    )
                setup = EntitySetup(
                    emu_iface="br-emu" if role == "satellite" else "emu",
                    config_dir=tmp_path / role / "etc",
                    run_dir=tmp_path / role / "run",
                    entrypoint=ENTRYPOINT,
                    netns=ns[role],
                    link_end=end,
                )
                roles[role] = OpenSandRole(role, entities, setup)
                reply = roles[role].configure(link_config("geo", profiles.read("geo")))
                assert reply["applied"] and reply["restarts"] == 0
                h = roles[role].health()
                assert h["opensand"]["running"] and h["opensand"]["profile"] == "geo"
                assert h["opensand"]["version"].startswith("8.2")
            across = (ns["terminal"], p.sat.address("gateway"))
            wait_for_echo(*across, logs=tuple(r.log_path for r in roles.values()))
            # The median: an echo behind an OpenSAND frame stall on a busy host moved a
            # 5-echo mean by 50-60 ms once, which says nothing about the configured delay.
            geo = statistics.median(echo(*across, count=7)["rtts_ms"])
            stats = roles["terminal"].stats()
            assert stats["running"] and stats["restarts"] == 0 and stats["profile"] == "geo"
            assert stats["bytes_onto_link"]["forward"] > 0 and stats["tap"]["rx_packets"] > 0
            # When the TAP was read, on this host's monotonic clock: between the request's
            # ends (rates from samples must not carry the request's own latency).
            before = time.monotonic()
            at = roles["terminal"].stats()["counted_at_s"]
            assert before <= at <= time.monotonic()
            roles["terminal"].reset_stats()
            assert roles["terminal"].stats()["tap"]["rx_packets"] == 0

            body = link_config("meo", profiles.read("meo"))
            for role in START_ORDER:
                old = roles[role].health()["opensand"]["pid"]
                reply = roles[role].configure(body)
                assert reply["applied"] and reply["state"]["profile"] == "meo"
                assert reply["restarts"] == 1
                assert roles[role].configure(body)["applied"] is False  # in force
                h = roles[role].health()["opensand"]
                assert h["running"] and h["profile"] == "meo" and h["pid"] != old
                assert procs.start_time(old) is None, f"the old {role} entity still runs"
            lan = {
                "name": "lan",
                "profile": profiles.read("lan").model_dump(by_alias=True, mode="json"),
            }
            pid = roles["satellite"].health()["opensand"]["pid"]
            with pytest.raises(ValidationFailed, match=r"forward\.rate_mbps"):
                roles["satellite"].configure(lan)
            assert roles["satellite"].health()["opensand"]["pid"] == pid
            assert roles["satellite"].stats()["profile"] == "meo"
            wait_for_echo(*across, logs=tuple(r.log_path for r in roles.values()))
            meo = statistics.median(echo(*across, count=7)["rtts_ms"])
            report(
                capsys,
                f"role agents: bridge-to-bridge median RTT (7 echoes) geo {geo:.1f} ms (expected "
                f"{opensand.expected_rtt_ms(127):.1f}), after configure meo {meo:.1f} ms "
                f"(expected {opensand.derive(profiles.read('meo')).expected_rtt_ms:.1f})",
            )
            assert abs(geo - 531.5) < 90 and abs(meo - 139.5) < 40
        finally:
            for role in reversed(START_ORDER):
                if role in roles:
                    with contextlib.suppress(ClarkeError):
                        roles[role].stop()
        for role, r in roles.items():
            assert not r.alive()
            assert netns.pids(ns[role]) == [], f"processes left in {ns[role]}"
            if role != "satellite":
                assert not netns.link_exists(opensand.TAP_IFACE, ns[role])
                assert not netns.link_exists(opensand.BRIDGE_IFACE, ns[role])
            assert not (r.run_dir / "opensand.pid").exists()


# --- opensand -c on the generated XML --------------------------------------------------


def _takes(name: str) -> bool:
    try:
        opensand.derive(profiles.read(name))
    except ValidationFailed:
        return False
    return True


MAPPABLE = [name for name in profiles.available() if _takes(name)]


@contextlib.contextmanager
def entity_networks(entities: opensand.Entities) -> Iterator[dict[str, str]]:
    """One namespace per entity with its emulation address, and for GW and ST its TAP."""
    ns = {e: f"clkos{CHECK_ID}-{e}" for e in opensand.ROLES}
    with namespaces(list(ns.values())):
        for entity, address in (
            ("gw", entities.gw_emu),
            ("st", entities.st_emu),
            ("sat", entities.sat_emu),
        ):
            netns.batch(
                ns[entity],
                [
                    "link add emu type veth peer name emu-peer",
                    f"addr add {address}/24 dev emu",
                    "link set emu up",
                    "link set emu-peer up",
                ],
            )
            if entity != "sat":
                mac = opensand.MAC_GW if entity == "gw" else opensand.MAC_ST
                netns.batch(
                    ns[entity],
                    [
                        f"tuntap add mode tap {opensand.TAP_IFACE}",
                        f"link set {opensand.TAP_IFACE} address {mac}",
                        f"link set {opensand.TAP_IFACE} up",
                    ],
                )
        yield ns


def opensand_check(ns: str, directory: Path, entity: str) -> subprocess.CompletedProcess[str]:
    argv = ["opensand", "-c", "-i", str(directory / "infrastructure.xml")]
    argv += ["-t", str(directory / "topology.xml")]
    if entity != "sat":
        argv += ["-p", str(directory / "profile.xml")]
    return sh.run(netns.exec_argv(ns, argv), check=False, timeout=60)


def test_every_mappable_profile_is_shipped_and_known() -> None:
    assert {"geo", "meo", "leo"} <= set(MAPPABLE)
    assert "lan" not in MAPPABLE and "geo-lossy" not in MAPPABLE


@pytest.mark.parametrize("name", MAPPABLE)
def test_generated_xml_passes_opensand_check(name: str, tmp_path: Path) -> None:
    require_opensand()
    p = plan(CHECK_ID)
    entities = opensand.Entities(
        p.emu.address("gateway"), p.emu.address("terminal"), p.emu.address("satellite")
    )
    opensand.write(profiles.read(name), entities, tmp_path, f"link profile {name!r}")
    with entity_networks(entities) as ns:
        for entity in opensand.ROLES:
            proc = opensand_check(ns[entity], tmp_path / entity, entity)
            assert proc.returncode == 0, f"{name} {entity}:\n{proc.stdout[-3000:]}{proc.stderr}"
            assert "error" not in proc.stderr.lower(), proc.stderr


def test_opensand_check_rejects_a_broken_file(tmp_path: Path) -> None:
    """The check above is not vacuous: a value of the wrong type fails `opensand -c`."""
    require_opensand()
    p = plan(CHECK_ID)
    entities = opensand.Entities(
        p.emu.address("gateway"), p.emu.address("terminal"), p.emu.address("satellite")
    )
    opensand.write(profiles.read("geo"), entities, tmp_path)
    gw_profile = tmp_path / "gw" / "profile.xml"
    text = gw_profile.read_text()
    assert "<delay_value>127</delay_value>" in text
    gw_profile.write_text(text.replace("<delay_value>127<", "<delay_value>soon<"))
    with entity_networks(entities) as ns:
        proc = opensand_check(ns["gw"], tmp_path / "gw", "gw")
    assert proc.returncode != 0
    assert "delay_value" in proc.stdout + proc.stderr
