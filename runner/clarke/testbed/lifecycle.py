"""`up`, `down` and `status` of netns testbeds.

`up` checks everything first (profile, id, the link's and the server's implementations
and whether they can take the profile, root, /dev/net/tun), writes the state file,
builds the roles' places (testbed/build.py), then starts every role's agent in its
namespace (`clarke serve ROLE --testbed N`: it starts and supervises the role's
implementation, exactly as in a container), waits until they answer and makes the
first configuration through them: the link profile. Everything is recorded in the
state file *before* it is created. Any failure rolls back through `down`, which works
from the state file and from the names the plan gives an id, so it removes exactly what
exists, also after a crash, and is a no-op the second time."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from clarke import profiles, registry, sh
from clarke.agent import auth
from clarke.agent.agents import Agents, Applied
from clarke.agent.client import AgentClient
from clarke.errors import ClarkeError, InputError
from clarke.link import netem
from clarke.place import netns, procs
from clarke.place.plan import MAX_ID, NetnsPlan, parse_ns, plan
from clarke.profiles import LinkProfile
from clarke.testbed.build import Builder, build, remove_etc
from clarke.testbed.state import Store, TestbedState
from clarke.vocab import LINK_START_ORDER, ROLES, CongestionControl, kind_of

log = logging.getLogger(__name__)

ROOT_LINK_RE = re.compile(r"^clk(\d{1,2})-mgmt$")
# The server first (it makes the testbed's certificate), the link roles in their start
# order, the client last.
AGENT_ORDER = ("server", *LINK_START_ORDER, "client")
AGENT_START_TIMEOUT_S = 120.0  # five Python processes starting at once on a busy host


def _pick_id(store: Store, existing_ns: list[str]) -> int:
    """The lowest id nobody uses: no state file here, no namespace or root link of any
    owner."""
    used = set(store.ids()) | {p[0] for n in existing_ns if (p := parse_ns(n))}
    used |= {int(m.group(1)) for name in _root_links() if (m := ROOT_LINK_RE.fullmatch(name))}
    for i in range(MAX_ID + 1):
        if i not in used:
            return i
    raise InputError(f"all {MAX_ID + 1} testbed ids are in use (clarke testbed status)")


@dataclass
class Up:
    """A testbed just brought up: its state, plan, and the first configuration made."""

    state: TestbedState
    plan: NetnsPlan
    applied: Applied | None


def check(
    profile_name: str, link: str | None = None, server: str | None = None
) -> tuple[LinkProfile, str, str]:
    """What `up` checks before it creates anything: the profile, the implementations,
    whether the link can take the profile (exit 2), then root, /dev/net/tun and whether
    the implementations are installed (exit 3)."""
    profile = profiles.read(profile_name)
    link_impl, server_impl = registry.get("link", link), registry.get("server", server)
    link_impl.check_profile(profile, f"link profile {profile_name!r}")
    netns.require_root_and_tun()
    link_impl.check_environment()
    server_impl.check_environment()
    return profile, link_impl.name, server_impl.name


def up(
    profile_name: str,
    testbed_id: int | None = None,
    link: str | None = None,
    server: str | None = None,
    store: Store | None = None,
    *,
    firefox: str | None = None,
) -> Up:
    """`firefox`: the client agent's browser (a name on PATH or a path; default: the
    first of firefox-nightly, firefox, firefox-esr), fixed for the testbed's life."""
    # Everything that can be checked is checked before anything is created.
    if testbed_id is not None:
        plan(testbed_id)  # range check
    profile, link, server = check(profile_name, link, server)
    store = store or Store()
    # Nothing found here is believed unless only root could have put it there: run
    # dirs and tokens another user planted are refused before anything is built.
    for i in range(MAX_ID + 1) if testbed_id is None else [testbed_id]:
        if store.run_dir(i).exists() or store.run_dir(i).is_symlink():
            store.make_run_dir(i)
            if (store.run_dir(i) / auth.TOKEN_FILE).exists():
                auth.read_token(store.run_dir(i) / auth.TOKEN_FILE)
    with store.locked():
        existing = netns.namespaces()
        if testbed_id is None:
            testbed_id = _pick_id(store, existing)
        elif (
            store.read(testbed_id) is not None
            or any((parsed := parse_ns(n)) and parsed[0] == testbed_id for n in existing)
            or netns.link_exists(plan(testbed_id).root_mgmt_link)
        ):
            raise InputError(
                f"testbed {testbed_id} already exists (clarke testbed down --id {testbed_id})"
            )
        p = plan(testbed_id)
        run_dir = store.run_dir(testbed_id)
        state = TestbedState(
            id=testbed_id, profile=profile_name, link=link, server=server, run_dir=str(run_dir)
        )
        store.save(state)
        tb = Builder(store, state, p, run_dir)
        # The id is the host's once this namespace exists: the next `up`, whatever its
        # state dir, sees it and picks another.
        try:
            tb.namespace(ROLES[0])
        except BaseException as e:
            state.phase, state.error = "failed", str(e)
            tb.save()
            _roll_back(testbed_id, store)
            raise
    try:
        with _sigterm_interrupts():
            # Only root enters the run dir: control sockets, keys, the agents' token.
            store.make_run_dir(testbed_id)
            # The role agents' bearer token: a new one per testbed, in a file only root
            # may read (clarke.agent.auth).
            token = auth.read_token(auth.ensure_token_file(run_dir / auth.TOKEN_FILE))
            note = netns.add_allowed_cc(CongestionControl.cubic)
            if note:
                state.host_changes.append(note)
                tb.save()
            build(tb)
            agents = _start_agents(tb, token, firefox)
            try:
                applied = agents.ensure_profile(profile_name, profile)
                view = agents.link()
            finally:
                agents.close()
            state.profile, state.profile_sha256 = profile_name, str(view.sha256)
            state.phase = "up"
            tb.save()
    except BaseException as e:
        state.phase, state.error = "failed", str(e)
        try:
            tb.save()
        finally:
            _roll_back(testbed_id, store)
        raise
    return Up(state, p, applied)


def _roll_back(testbed_id: int, store: Store) -> None:
    """`down` after a failed `up`. Its own failure is logged, never raised: the error
    that stopped `up` (and its exit code) is what the user must see."""
    try:
        down(testbed_id, store)
    except Exception as e:
        log.error(
            "rolling testbed %d back failed too: %s; `clarke testbed down --id %d` removes "
            "what is left",
            testbed_id,
            e,
            testbed_id,
        )


def agent_argv(
    p: NetnsPlan, run_dir: Path, role: str, implementation: str, firefox: str | None = None
) -> list[str]:
    """`clarke serve ROLE` for a role of testbed p, run in its namespace. Every path the
    agent uses is here (the client's browser too); its requests carry values only."""
    argv = [
        sys.executable, "-m", "clarke", "serve", role, "--implementation", implementation,
        "--testbed", str(p.id), "--run-dir", str(run_dir / role),
        "--pages-dir", str(run_dir / "pages"), "--pki-dir", str(run_dir / "pki"),
        "--token-file", str(run_dir / auth.TOKEN_FILE),
    ]  # fmt: skip
    if role == "client" and firefox:
        argv += ["--firefox", firefox]
    return argv


def _start_agents(tb: Builder, token: str, firefox: str | None) -> Agents:
    """Every role's agent in its namespace; returns once all answer (an agent that dies
    on the way fails `up` with its log's tail)."""
    chosen = {"link": tb.state.link, "server": tb.state.server}
    started = {}
    for role in AGENT_ORDER:
        impl = registry.for_role(role, chosen.get(kind_of(role)))
        argv = agent_argv(tb.plan, tb.run_dir, role, impl.name, firefox)
        started[role] = tb.start(role, f"agent-{role}", argv)
    for role, proc in started.items():
        client = AgentClient(role, tb.plan.agent_url(role), None, timeout=2)  # /health
        try:
            procs.wait_ready(proc, partial(_answers, client), timeout=AGENT_START_TIMEOUT_S)
        finally:
            client.close()
    agents = Agents(tb.plan, ROLES, token)
    agents.wait_ready()
    return agents


def _answers(client: AgentClient) -> bool:
    try:
        client.health()
    except ClarkeError:
        return False
    return True


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
    state = store.read(testbed_id)
    if state is not None:
        removed.had_state = True
        state.phase = "removing"
        store.save(state)
        # The agents first: each stops what its implementation started.
        live = [proc for proc in state.processes if procs.alive(proc)]
        removed.processes += [proc.pid for proc in live]
        procs.stop(live, timeout=15)
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
    remove_etc(p)
    shutil.rmtree(store.run_dir(testbed_id), ignore_errors=True)
    store.remove(testbed_id)
    return removed


def known_ids(store: Store | None = None) -> list[int]:
    """Every id this store owns: a state file here, or namespaces / a root link tagged
    with this store's owner. An untagged one (a runner killed between creating a
    namespace and tagging it) is this store's only where its state file is here: the
    state file is written before anything is created, so another state dir's testbed
    being built at this moment (its namespaces not tagged yet) is never taken."""
    store = store or Store()
    ids = set(store.ids())
    recorded = set(ids)

    def mine(tag: str | None, testbed_id: int) -> bool:
        return tag == store.owner or (tag is None and testbed_id in recorded)

    ids |= {
        parsed[0]
        for ns in netns.namespaces()
        if (parsed := parse_ns(ns)) and mine(netns.owner(ns), parsed[0])
    }
    ids |= {
        int(m.group(1))
        for name in _root_links()
        if (m := ROOT_LINK_RE.fullmatch(name)) and mine(netns.owner(None, name), int(m.group(1)))
    }
    return sorted(i for i in ids if i <= MAX_ID)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _root_links() -> list[str]:
    out = sh.run(["ip", "-j", "link", "show"]).stdout
    return [link["ifname"] for link in json.loads(out or "[]")]


def down_all(store: Store | None = None) -> list[Removed]:
    store = store or Store()
    out = [down(i, store) for i in known_ids(store)]
    # Scratch namespaces of an interrupted netem probe, named by the probing process:
    # only a dead one's (another runner may be probing at this moment).
    for ns in netns.namespaces():
        pid = ns.removeprefix(netem.PROBE_PREFIX)
        if ns.startswith(netem.PROBE_PREFIX) and pid.isdigit() and not _alive(int(pid)):
            netns.delete(ns)
    return out


def status(store: Store | None = None) -> list[dict[str, Any]]:
    store = store or Store()
    existing = netns.namespaces()
    out = []
    for i in known_ids(store):
        p = plan(i)
        state = store.read(i)
        entry: dict[str, Any] = {
            "id": i,
            "profile": state.profile if state else None,
            "profile_sha256": state.profile_sha256 if state else None,
            "link": state.link if state else None,
            "server": state.server if state else None,
            "phase": state.phase if state else "orphaned (no state file)",
            "namespaces": {r: n for r, n in p.namespaces.items() if n in existing},
            "addresses": p.addresses,
            "processes": [],
        }
        if state:
            for pr in state.processes:
                alive = procs.alive(pr)
                item = {"role": pr.role, "name": pr.name, "pid": pr.pid, "alive": alive}
                if alive and pr.name.startswith("agent-"):
                    client = AgentClient(pr.role, p.agent_url(pr.role), None, timeout=3)
                    item["answers"] = _answers(client)
                    item["alive"] = item["answers"]
                    client.close()
                entry["processes"].append(item)
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


def running(testbed_id: int | None, store: Store | None = None) -> tuple[TestbedState, NetnsPlan]:
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
    state = store.read(testbed_id)
    if state is None or state.phase != "up":
        raise InputError(
            f"testbed {testbed_id} is not up (clarke testbed status; clarke testbed up "
            f"--id {testbed_id})"
        )
    return state, p
