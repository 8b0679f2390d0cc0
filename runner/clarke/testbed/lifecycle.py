"""`up`, `down` and `status` of netns testbeds.

`up` validates everything first (profile, id, backend, root, /dev/net/tun, binaries),
writes the state file, then creates namespaces, links and processes, recording each in
the state file *before* creating it. Any failure rolls back through `down`, which works
from the state file and from the names the plan gives an id, so it removes exactly what
exists, also after a crash, and is a no-op the second time."""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clarke import schema
from clarke.agent import auth
from clarke.errors import ClarkeError, InputError
from clarke.link import profiles
from clarke.link.profiles import LinkProfile
from clarke.testbed import backends, netns, procs
from clarke.testbed.plan import (
    BRIDGE_EMU,
    BRIDGE_MGMT,
    IF_EMU,
    IF_LAN,
    IF_MGMT,
    MAX_ID,
    ROLES,
    SAT_EMU_PORTS,
    Plan,
    parse_ns,
    plan,
)
from clarke.testbed.state import Proc, Store, TestbedState

log = logging.getLogger(__name__)

EMU_MTU = 9000  # carriers encapsulate a full 1500-byte packet plus satlink's header
ROOT_LINK_RE = re.compile(r"^clk(\d{1,2})-mgmt$")


@dataclass
class Builder:
    """The testbed under construction: every creation goes through here and is recorded
    in the state file first."""

    store: Store
    state: TestbedState
    plan: Plan
    run_dir: Path
    procs_started: list[Proc] = field(default_factory=list)

    def save(self) -> None:
        self.store.save(self.state)

    def namespace(self, role: str) -> str:
        name = self.plan.ns(role)
        self.state.namespaces.append(name)
        self.save()
        netns.add(name)
        netns.set_owner(self.store.owner, name)
        return name

    def root_link(self, name: str) -> None:
        self.state.root_links.append(name)
        self.save()

    def start(self, role: str, name: str, argv: list[str]) -> Proc:
        proc = procs.start(role, name, self.plan.ns(role), argv, self.run_dir / f"{name}.log")
        self.state.processes.append(proc)
        self.save()
        return proc


def _pick_id(store: Store, existing_ns: list[str]) -> int:
    """The lowest id nobody uses: no state file here, no namespace or root link of any
    owner."""
    used = set(store.ids()) | {p[0] for n in existing_ns if (p := parse_ns(n))}
    used |= {int(m.group(1)) for name in _root_links() if (m := ROOT_LINK_RE.match(name))}
    for i in range(MAX_ID + 1):
        if i not in used:
            return i
    raise InputError(f"all {MAX_ID + 1} testbed ids are in use (clarke testbed status)")


def up(
    profile_name: str,
    testbed_id: int | None = None,
    backend_name: str = "auto",
    store: Store | None = None,
) -> tuple[TestbedState, Plan]:
    # Everything that can be checked is checked before anything is created.
    profile = load_profile(profile_name)
    if testbed_id is not None:
        plan(testbed_id)  # range check
    backend = backends.select(backend_name)
    backends.check_profile(backend, profile, f"link profile {profile_name!r}")
    netns.require_root_and_tun()
    backend.check()

    store = store or Store()
    with store.locked():
        existing = netns.namespaces()
        if testbed_id is None:
            testbed_id = _pick_id(store, existing)
        elif (
            store.load(testbed_id) is not None
            or any((p := parse_ns(n)) and p[0] == testbed_id for n in existing)
            or netns.link_exists(plan(testbed_id).root_mgmt_link)
        ):
            raise InputError(
                f"testbed {testbed_id} already exists (clarke testbed down --id {testbed_id})"
            )
        p = plan(testbed_id)
        run_dir = store.run_dir(testbed_id)
        state = TestbedState(
            id=testbed_id, profile=profile_name, backend=backend.name, run_dir=str(run_dir)
        )
        store.save(state)
    tb = Builder(store, state, p, run_dir)
    try:
        with _sigterm_interrupts():
            # Only root enters the run dir: control sockets, keys, the agents' token.
            run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            # The role agents' bearer token: a new one per testbed, in a file only root
            # may read (clarke.agent.auth).
            auth.ensure_token_file(run_dir / auth.TOKEN_FILE)
            _build(tb, profile, backend)
            state.phase = "up"
            tb.save()
    except BaseException as e:
        state.phase, state.error = "failed", str(e)
        try:
            tb.save()
        finally:
            down(testbed_id, store)
        raise
    return state, p


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM during `up` rolls back like Ctrl-C does (SIGKILL is left to `down`)."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (bench's parallel ups are sequential anyway)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def load_profile(name: str) -> LinkProfile:
    """A shipped profile by name, or a profile file by path (NAME.yaml)."""
    if name.endswith((".yaml", ".yml")):
        return schema.load(LinkProfile, Path(name))
    return profiles.load(name)


def _build(tb: Builder, profile: LinkProfile, backend: backends.Backend) -> None:
    p = tb.plan
    note = netns.add_allowed_cc("cubic")
    if note:
        tb.state.host_changes.append(note)
        tb.save()
    for role in (*ROLES, "mgmt"):
        tb.namespace(role)
    for role in (*ROLES, "mgmt"):
        ns = p.ns(role)
        netns.batch(ns, ["link set lo up"])
        forwarding = "1" if role in ("terminal", "gateway") else "0"
        netns.sysctls(
            ns,
            {
                "net.ipv4.ip_forward": forwarding,
                # IPv4 only: no router solicitations or DAD on the measurement path.
                "net.ipv6.conf.all.disable_ipv6": "1",
                "net.ipv6.conf.default.disable_ipv6": "1",
            },
        )

    # mgmt: a bridge in its own namespace; one veth per role; one into the root
    # namespace for the runner (the only thing Clarke adds there: a connected /24).
    mg, mgmt_ns = p.mgmt, p.ns("mgmt")
    netns.batch(mgmt_ns, [f"link add {BRIDGE_MGMT} type bridge", f"link set {BRIDGE_MGMT} up"])
    for role in ROLES:
        netns.veth(p.ns(role), IF_MGMT, mgmt_ns, f"m-{role}")
        netns.batch(mgmt_ns, [f"link set m-{role} master {BRIDGE_MGMT}", f"link set m-{role} up"])
        netns.batch(
            p.ns(role), [f"addr add {mg.cidr(role)} dev {IF_MGMT}", f"link set {IF_MGMT} up"]
        )
        netns.sysctls(p.ns(role), {f"net.ipv4.conf.{IF_MGMT}.forwarding": "0"})
    tb.root_link(p.root_mgmt_link)
    netns.veth(None, p.root_mgmt_link, mgmt_ns, "m-runner")
    netns.set_owner(tb.store.owner, None, p.root_mgmt_link)
    netns.batch(mgmt_ns, [f"link set m-runner master {BRIDGE_MGMT}", "link set m-runner up"])
    netns.sysctls(
        None,
        {
            f"net.ipv6.conf.{p.root_mgmt_link}.disable_ipv6": "1",
            f"net.ipv4.conf.{p.root_mgmt_link}.forwarding": "0",
        },
    )
    netns.batch(
        None,
        [f"addr add {mg.cidr('runner')} dev {p.root_mgmt_link}", f"link set {p.root_mgmt_link} up"],
    )

    # The measurement path's LANs.
    for lan, a, b in ((p.st_lan, "client", "terminal"), (p.gw_lan, "server", "gateway")):
        netns.veth(p.ns(a), IF_LAN, p.ns(b), IF_LAN)
        for role in (a, b):
            netns.batch(
                p.ns(role), [f"addr add {lan.cidr(role)} dev {IF_LAN}", f"link set {IF_LAN} up"]
            )
    # Client and server: one route each, to the other LAN, through their link end.
    netns.batch(p.ns("client"), [f"route add {p.gw_lan.prefix} via {p.st_lan.address('terminal')}"])
    netns.batch(p.ns("server"), [f"route add {p.st_lan.prefix} via {p.gw_lan.address('gateway')}"])

    # The emulation network: a bridge in the satellite namespace, terminal and gateway
    # on it, the satellite's address on the bridge. Offloads stay on (satlink/README.md:
    # it uses no packet sockets, and on unshaped directions it carries TSO super-packets
    # read from its TUN device, which the veths' offloads keep fast).
    sat_ns = p.ns("satellite")
    netns.batch(
        sat_ns,
        [
            f"link add {BRIDGE_EMU} mtu {EMU_MTU} type bridge",
            f"addr add {p.emu.cidr('satellite')} dev {BRIDGE_EMU}",
            f"link set {BRIDGE_EMU} up",
        ],
    )
    for role, port in SAT_EMU_PORTS.items():
        netns.veth(p.ns(role), IF_EMU, sat_ns, port, mtu=EMU_MTU)
        netns.batch(sat_ns, [f"link set {port} master {BRIDGE_EMU}", f"link set {port} up"])
        netns.batch(
            p.ns(role), [f"addr add {p.emu.cidr(role)} dev {IF_EMU}", f"link set {IF_EMU} up"]
        )

    backend.wire(tb, profile)


def start_process(
    testbed_id: int, role: str, name: str, argv: list[str], store: Store | None = None
) -> Proc:
    """The hook for role processes (origin in the server namespace, agents …): start
    argv in the role's namespace, record it, so `down` stops it."""
    store = store or Store()
    state = store.load(testbed_id)
    if state is None:
        raise InputError(f"no testbed {testbed_id} (clarke testbed up)")
    p = plan(testbed_id)
    tb = Builder(store, state, p, Path(state.run_dir))
    return tb.start(role, name, argv)


@dataclass
class Removed:
    id: int
    namespaces: list[str] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    had_state: bool = False

    @property
    def anything(self) -> bool:
        return bool(self.namespaces or self.processes or self.links or self.had_state)


def down(testbed_id: int, store: Store | None = None) -> Removed:
    """Remove testbed `testbed_id`: its processes (by recorded PID and start time, then
    whatever else still lives in its namespaces), namespaces, root-namespace link, run
    dir and state file. Idempotent."""
    store = store or Store()
    p = plan(testbed_id)
    removed = Removed(testbed_id)
    existing = netns.namespaces()
    mine = [ns for ns in p.namespaces.values() if ns in existing]
    tags = {netns.owner(ns) for ns in mine}
    if netns.link_exists(p.root_mgmt_link):
        tags.add(netns.owner(None, p.root_mgmt_link))
    foreign = tags - {None, store.owner}
    if foreign:
        raise InputError(
            f"testbed {testbed_id} belongs to another state dir ({', '.join(map(str, foreign))}); "
            "run down with that CLARKE_STATE_DIR"
        )
    state = store.load(testbed_id)
    if state is not None:
        removed.had_state = True
        state.phase = "removing"
        store.save(state)
        live = [proc for proc in state.processes if procs.alive(proc)]
        removed.processes += [proc.pid for proc in live]
        procs.stop(live)
    # Processes nobody recorded (started, then the runner died before saving).
    strays: dict[int, int | None] = {}
    for ns in mine:
        for pid in netns.pids(ns):
            strays[pid] = None
    if strays:
        removed.processes += list(strays)
        procs.stop_pids(strays)
    errors = []
    for ns in mine:
        try:
            netns.delete(ns)
            removed.namespaces.append(ns)
        except ClarkeError as e:
            errors.append(str(e))
    if netns.link_exists(p.root_mgmt_link):
        netns.delete_link(p.root_mgmt_link)
        removed.links.append(p.root_mgmt_link)
    if errors:
        raise ClarkeError(
            f"testbed {testbed_id}: could not remove everything:\n" + "\n".join(errors)
        )
    shutil.rmtree(store.run_dir(testbed_id), ignore_errors=True)
    store.remove(testbed_id)
    return removed


def known_ids(store: Store | None = None) -> list[int]:
    """Every id this store owns: a state file here, or namespaces / a root link tagged
    with this store's owner, or untagged ones (a runner killed between creating a
    namespace and tagging it). Other state dirs' testbeds are never included."""
    store = store or Store()
    ids = set(store.ids())

    def mine(tag: str | None) -> bool:
        return tag is None or tag == store.owner

    ids |= {
        parsed[0] for ns in netns.namespaces() if (parsed := parse_ns(ns)) and mine(netns.owner(ns))
    }
    ids |= {
        int(m.group(1))
        for name in _root_links()
        if (m := ROOT_LINK_RE.match(name)) and mine(netns.owner(None, name))
    }
    return sorted(i for i in ids if i <= MAX_ID)


def _root_links() -> list[str]:
    import json

    from clarke import sh

    out = sh.run(["ip", "-j", "link", "show"]).stdout
    return [link["ifname"] for link in json.loads(out or "[]")]


def down_all(store: Store | None = None) -> list[Removed]:
    store = store or Store()
    out = [down(i, store) for i in known_ids(store)]
    for ns in netns.namespaces():  # scratch namespaces of an interrupted netem probe
        if ns.startswith(backends.PROBE_PREFIX):
            netns.delete(ns)
    return out


def status(store: Store | None = None) -> list[dict[str, Any]]:
    store = store or Store()
    existing = netns.namespaces()
    out = []
    for i in known_ids(store):
        p = plan(i)
        state = store.load(i)
        entry: dict[str, Any] = {
            "id": i,
            "profile": state.profile if state else None,
            "backend": state.backend if state else None,
            "phase": state.phase if state else "orphaned (no state file)",
            "namespaces": {r: n for r, n in p.namespaces.items() if n in existing},
            "addresses": p.addresses,
            "processes": [],
        }
        if state:
            entry["processes"] = [
                {"role": pr.role, "name": pr.name, "pid": pr.pid, "alive": procs.alive(pr)}
                for pr in state.processes
            ]
            if state.backend == "satlink":
                run_dir = Path(state.run_dir)
                for pr in entry["processes"]:
                    sock = backends.Satlink.control(run_dir, pr["role"])
                    if pr["name"].startswith("satlink-"):
                        pr["answers"] = pr["alive"] and backends.answers(pr["role"], sock)
                        pr["alive"] = pr["alive"] and pr["answers"]
            entry["created_at"] = state.created_at
            entry["host_changes"] = state.host_changes
        entry["healthy"] = bool(
            state
            and state.phase == "up"
            and len(entry["namespaces"]) == len(p.namespaces)
            and all(pr["alive"] for pr in entry["processes"])
        )
        out.append(entry)
    return out


def load_up(testbed_id: int | None, store: Store | None = None) -> tuple[TestbedState, Plan]:
    """The testbed a command addresses: --id, or the only one that is up."""
    store = store or Store()
    if testbed_id is None:
        ids = store.ids()
        if len(ids) != 1:
            raise InputError(
                "no testbed is up (clarke testbed up)"
                if not ids
                else f"several testbeds are up ({', '.join(map(str, ids))}): pass --id"
            )
        testbed_id = ids[0]
    p = plan(testbed_id)
    state = store.load(testbed_id)
    if state is None or state.phase != "up":
        raise InputError(f"testbed {testbed_id} is not up (clarke testbed status)")
    return state, p
