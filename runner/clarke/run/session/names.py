"""A recorded site's names on a testbed, through the agents (agent/names_slot.py), the
same on both substrates: the authoritative resolver at the gateway (on its address on
the server's LAN, so the client reaches it across the link), optionally a terminal's
cache in front of it, and the client's stub on its loopback, which the client's
resolv.conf names while it runs. Each resolver is a child of its role's agent, so
whatever stops the testbed stops them too."""

from __future__ import annotations

from clarke.agent.agents import Agents
from clarke.contract import NamesStart
from clarke.errors import ClarkeError
from clarke.json_value import JsonObject
from clarke.sites.zone import Zone

Mark = dict[str, int]  # role -> queries its resolver had answered
# GET /names/queries?since= beyond every log: only the count comes back.
COUNT_ONLY = 10**12 - 1


class SiteNames:
    def __init__(self, agents: Agents) -> None:
        self.agents = agents
        self.running: list[str] = []  # roles whose resolver this started, in start order

    def start(self, names: dict[str, str], cache: bool = False, ttl: int | None = None) -> str:
        """Answer `names` (host -> address) from the gateway, with a terminal's cache in
        front if `cache`; returns where the client's stub sends them."""
        self.stop()
        zone = Zone.model_validate({"names": names} | ({"ttl": ttl} if ttl is not None else {}))
        request = NamesStart(zone=zone, cache=cache)
        nameserver = ""
        for role in ["gateway", *(["terminal"] if cache else []), "client"]:
            self.running.append(role)  # first: a start that fails half-way is stopped too
            started = self.agents[role].names_start(request)
            if role != "client":
                nameserver = started.listen
        return nameserver

    def queries(self, role: str = "gateway", since: Mark | None = None) -> list[JsonObject]:
        """The queries `role`'s resolver (gateway, terminal, client) answered since it
        started, or since `since` (mark(): one load's own)."""
        if role not in self.running:
            return []
        return self.agents[role].names_queries((since or {}).get(role, 0)).queries

    def mark(self) -> Mark:
        """Where each resolver's log stands now: queries(role, since=mark) are the ones
        after it (a load's own, when taken before the load)."""
        return {r: self.agents[r].names_queries(COUNT_ONLY).total for r in self.running}

    def stop(self) -> None:
        """Every resolver this started, the client's first (its resolv.conf back as it
        was); all are asked even when one fails, and the first failure is raised."""
        failed: ClarkeError | None = None
        for role in reversed(self.running):
            try:
                self.agents[role].names_stop()
            except ClarkeError as e:
                failed = failed or e
        self.running = []
        if failed is not None:
            raise failed
