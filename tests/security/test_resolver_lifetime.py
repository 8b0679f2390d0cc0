"""A recorded site's resolvers do not outlive the agent that started them (issue 48,
finding B): an agent killed with SIGKILL stops nothing itself, and its resolvers went
on answering, the client's resolv.conf naming a stub of a dead agent.

- Fast, no root: a child spawned with `die_with_parent` by a thread that ends (as each
  agent request's thread does) keeps running, and dies when its process is SIGKILLed.
- On a real netns testbed (its own id and state directory; removed also on failure):
  the gateway's, terminal's and client's resolvers started through the agents; the
  client's and the gateway's agents are SIGKILLed by PID, and their resolvers are gone
  within seconds (the terminal's, whose agent lives, is not); the client's resolv.conf
  still names the dead stub until the client's agent starts again, which puts it back
  as it was; a stub started through that agent, then stopped, rewrites it and puts it
  back as before."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clarke import registry
from clarke.agent.client import AgentClient
from clarke.agent.names_slot import RESOLV_MARK
from clarke.contract import NamesStart
from clarke.errors import ClarkeError
from clarke.place import procs
from clarke.place.plan import NetnsPlan
from clarke.run.session.names import SiteNames
from clarke.run.session.session import Session
from clarke.sites.zone import Zone
from clarke.testbed import lifecycle
from clarke.testbed.build import NO_DNS_SERVER, Builder
from clarke.testbed.substrate import NetnsSubstrate
from conftest import need
from testbeds import lan_session, state_dir

GONE_WITHIN_S = 5.0

# Spawns `sleep` with die_with_parent from a thread that ends at once, prints its PID,
# then waits to be killed.
SPAWNER = """
import sys, threading, time
from clarke.place import procs
children = procs.Children()
thread = threading.Thread(
    target=lambda: children.spawn("sleep", ["sleep", "300"], die_with_parent=True)
)
thread.start()
thread.join()
print(children.procs["sleep"].pid, flush=True)
time.sleep(300)
"""


def _gone(pid: int, start: int | None) -> bool:
    return start is None or procs.start_time(pid) != start


def _wait_gone(pids: dict[int, int | None], timeout: float = GONE_WITHIN_S) -> list[int]:
    """The PIDs (of their recorded start times) still running after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_gone(pid, st) for pid, st in pids.items()):
            return []
        time.sleep(0.1)
    return [pid for pid, st in pids.items() if not _gone(pid, st)]


def test_a_child_outlives_the_thread_that_spawned_it_not_its_process() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", SPAWNER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    child, start = 0, None
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        start = procs.start_time(child)
        time.sleep(1)  # the spawning thread ended a second ago
        assert start is not None and procs.start_time(child) == start, "died with its thread"
        parent.kill()
        parent.wait()
        assert not _wait_gone({child: start}), "the child outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.communicate()
        if child and not _gone(child, start):
            os.kill(child, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _resolver_of(agent: int) -> int:
    """The resolver among the agent's children: the agent's own child, no `ip netns
    exec` or shell in between, so that a signal for it reaches the resolver itself."""
    found = [
        pid
        for pid in _children(agent)
        if b"clarke.dns" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(found) == 1, f"agent {agent}: resolvers among its children: {found}"
    return found[0]


@pytest.fixture
def testbed() -> Iterator[tuple[Session, NetnsSubstrate]]:
    """A netns testbed of its own (a private state dir: its own id), removed afterwards
    whatever happened, with every process it ran."""
    need(os.geteuid() == 0, "root (network namespaces)")
    with state_dir(Path(tempfile.mkdtemp(prefix="clarke-resolvers-"))):
        substrate = NetnsSubstrate()
        with lan_session(substrate, []) as session:
            yield session, substrate


def _start_agent_again(substrate: NetnsSubstrate, plan: NetnsPlan, role: str) -> procs.Proc:
    """`role`'s agent started as `clarke testbed up` starts it, recorded in the state
    file (so that `down` stops it), once it answers."""
    state = substrate.store.read(plan.id)
    assert state is not None
    builder = Builder(substrate.store, state, plan, substrate.run_dir)
    impl = registry.for_role(role, None).name
    argv = lifecycle.agent_argv(plan, substrate.run_dir, role, impl)
    proc = builder.start(role, f"agent-{role}", argv)
    health = AgentClient(role, plan.agent_url(role), None, timeout=2)

    def answers() -> bool:
        try:
            health.health()
        except ClarkeError:
            return False
        return True

    try:
        procs.wait_ready(proc, answers, timeout=120)
    finally:
        health.close()
    return proc


@pytest.mark.root
@pytest.mark.slow
def test_resolvers_die_with_their_agent_and_resolv_conf_is_put_back(
    testbed: tuple[Session, NetnsSubstrate],
) -> None:
    session, substrate = testbed
    plan, agents = session.plan, session.agents
    assert isinstance(plan, NetnsPlan) and agents is not None
    names = {"www.example.org": str(plan.gw_lan.prefix.network_address + 64)}
    state = substrate.store.read(plan.id)
    assert state is not None
    agent = {p.role: p for p in state.processes if p.name == f"agent-{p.role}"}
    site = SiteNames(agents)
    site.start(names, cache=True)
    try:
        resolvers = {role: _resolver_of(agent[role].pid) for role in site.running}
        started = {role: procs.start_time(pid) for role, pid in resolvers.items()}
        resolv = Path("/etc/netns") / plan.ns("client") / "resolv.conf"
        saved = substrate.run_dir / "client" / "resolv.conf.before-stub"
        assert resolv.read_text().startswith(RESOLV_MARK) and saved.is_file()

        killed = ("client", "gateway")
        for role in killed:
            assert procs.alive(agent[role])
            os.kill(agent[role].pid, signal.SIGKILL)
        left = _wait_gone({resolvers[r]: started[r] for r in killed})
        assert not left, f"resolvers still running {GONE_WITHIN_S} s after their agent's SIGKILL"
        assert not _gone(resolvers["terminal"], started["terminal"]), "its agent still runs"
        # The killed client agent could not put resolv.conf back: it names a dead stub.
        assert resolv.read_text().startswith(RESOLV_MARK) and saved.is_file()

        _start_agent_again(substrate, plan, "client")
        assert resolv.read_text() == NO_DNS_SERVER and not saved.exists()
        # The new agent's stub, stopped, leaves resolv.conf as it was (the gateway's
        # resolver, which it would forward to, is gone: no lookup is made).
        client = agents["client"]
        client.names_start(NamesStart(zone=Zone.model_validate({"names": names})))
        assert resolv.read_text().startswith(RESOLV_MARK) and saved.is_file()
        client.names_stop()
        assert resolv.read_text() == NO_DNS_SERVER and not saved.exists()
    finally:
        with contextlib.suppress(ClarkeError):
            agents["terminal"].names_stop()
