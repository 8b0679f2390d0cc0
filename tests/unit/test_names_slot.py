"""A recorded site's resolver routes on an agent (agent/names_slot.py), served for real
on loopback: behind the token, the request checked against the contract and against
the agent's own LAN before anything starts, `since` a count or a 400, and absent from
the server's agent. Starting the resolvers for real is in the site tests (netns) and the
compose test (the client's container)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from clarke.agent import auth
from clarke.agent.client import AgentClient
from clarke.agent.names_slot import NamesSlot, resolv_conf
from clarke.errors import ClarkeError, InputError
from clarke.place import Place
from clarke.place.plan import compose_plan, plan
from testbeds import agent_serving

TOKEN = "n" * 43
TESTBED = 42


class Role:
    implementation = "test"

    def __init__(self, role: str) -> None:
        self.role = role

    def health(self) -> dict[str, Any]:
        return {"role": self.role, "implementation": self.implementation}

    def state(self) -> dict[str, Any]:
        return {}

    def stats(self) -> dict[str, Any]:
        return {}

    def reset_stats(self) -> dict[str, Any]:
        return {}

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"applied": False, "state": {}}


def _place(tmp_path: Path, role: str) -> Place:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    return Place("netns", role, plan(TESTBED), run_dir, tmp_path / "pages", tmp_path / "pki")


@contextlib.contextmanager
def _agent(role: str, names: NamesSlot | None) -> Iterator[AgentClient]:
    with agent_serving(Role(role), TOKEN, names=names) as url:
        agent = AgentClient(role, url, TOKEN)
        try:
            yield agent
        finally:
            agent.close()


def test_names_routes_are_behind_the_token_and_check_what_they_are_given(tmp_path: Path) -> None:
    slot = NamesSlot(_place(tmp_path, "client"))
    lan = plan(TESTBED).gw_lan
    inside = str(lan.prefix.network_address + 10)
    with _agent("client", slot) as agent:
        for method, path in [("POST", "/names/start"), ("POST", "/names/stop"),
                             ("GET", "/names/queries")]:  # fmt: skip
            r = httpx.request(method, agent.url + path, json={}, trust_env=False)
            assert r.status_code == 401, (path, r.text)
            r = httpx.request(
                method, agent.url + path, json={}, headers=auth.bearer("w" * 43), trust_env=False
            )
            assert r.status_code == 403, (path, r.text)
        # The contract's model first (unknown fields, wrong types, names that are no
        # host names or point outside the testbed), then the agent's own LAN.
        for body, said in [
            ({"zone": {"names": {"www.a.test": inside}}, "argv": ["sh"]}, "argv"),
            ({"zone": {"names": {"www.a.test": inside}}, "cache": "yes"}, "cache"),
            ({"zone": {"names": {"www..test": inside}}}, "not a host name"),
            ({"zone": {"names": {"www.a.test": "8.8.8.8"}}}, "outside the testbed range"),
            ({"zone": {"names": {"www.a.test": inside}, "ttl": -1}}, "ttl"),
            ({"zone": {"names": {"www.a.test": "198.18.0.2"}}}, f"the server's LAN {lan.prefix}"),
            ({}, "the client needs the site's names"),
        ]:  # fmt: skip
            with pytest.raises(InputError, match=said):
                agent._call("POST", "/names/start", body)
        for since in ["-1", "x", "1e3", "1234567890123"]:
            with pytest.raises(ClarkeError, match="400 since must be one count"):
                agent._call("GET", "/names/queries", since=since)
        assert agent.names_queries().model_dump() == {"queries": [], "total": 0}
        agent.names_stop()  # nothing running: a no-op
    assert not slot.children.procs


def test_queries_are_read_back_from_a_count_on(tmp_path: Path) -> None:
    slot = NamesSlot(_place(tmp_path, "gateway"))
    slot.log.write_text("".join(f'{{"name": "h{i}.test", "type": "A"}}\n' for i in range(5)))
    with _agent("gateway", slot) as agent:
        got = agent.names_queries(3)
        assert got.total == 5 and [q["name"] for q in got.queries] == ["h3.test", "h4.test"]
        assert agent.names_queries(10**12 - 1).queries == []


def test_only_the_client_terminal_and_gateway_have_a_resolver(tmp_path: Path) -> None:
    with pytest.raises(ClarkeError, match="not the server"):
        NamesSlot(_place(tmp_path, "server"))
    no_route = "404 no POST /names/start on the server agent"
    with _agent("server", None) as agent, pytest.raises(ClarkeError, match=no_route):
        agent._call("POST", "/names/start", {})


def test_the_clients_resolv_conf_is_its_namespaces_never_the_hosts(tmp_path: Path) -> None:
    netns = _place(tmp_path, "client")
    assert resolv_conf(netns) == Path(f"/etc/netns/clk{TESTBED}-client/resolv.conf")
    compose = Place("compose", "client", compose_plan(), tmp_path, tmp_path, tmp_path)
    assert resolv_conf(compose) == Path("/etc/resolv.conf")
