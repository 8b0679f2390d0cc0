"""The runner's side of the agents: every request carries the testbed's agent token
(clarke.agent.auth)."""

from __future__ import annotations

from typing import TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from clarke.agent import auth
from clarke.browser.load import LoadRequest, LoadResult
from clarke.contract import (
    CaptureStart,
    CaptureStopped,
    Configured,
    Health,
    LinkState,
    NamesQueries,
    NamesStart,
    NamesStarted,
    PepConfig,
    Reply,
    Request,
    ServerState,
    ServerStats,
    Stats,
    kind_of_role,
    state_of,
)
from clarke.errors import ClarkeError, EnvironmentProblem, InputError
from clarke.json_value import JsonObject
from clarke.results.station_records import LinkRoleStats, PepStationStats
from clarke.schema import problems_of

M = TypeVar("M", bound=BaseModel)


# An agent's error keeps its kind (and so its exit code) on the runner's side.
KIND_OF_EXIT = {2: InputError, 3: EnvironmentProblem}


class AgentClient:
    def __init__(self, role: str, url: str, token: str | None, timeout: float = 30) -> None:
        """`token`: the testbed's agent token; None only asks /health (the rest is 401)."""
        self.role, self.url = role, url
        self._http = httpx.Client(
            base_url=url,
            timeout=timeout,
            trust_env=False,
            headers=auth.bearer(token) if token else {},
        )

    def _call(
        self,
        method: str,
        path: str,
        body: JsonObject | None = None,
        timeout: float | None = None,
        **params: str,
    ) -> JsonObject:
        try:
            resp = self._http.request(
                method,
                path,
                json=body,
                params=params or None,
                timeout=timeout or self._http.timeout,
            )
        except httpx.TransportError as e:
            raise ClarkeError(f"{self.role} agent at {self.url}: {type(e).__name__}: {e}") from None
        try:
            data = resp.json() if resp.content else {}
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        if resp.status_code >= 400:
            code = data.get("exit_code")
            kind = KIND_OF_EXIT.get(code, ClarkeError) if isinstance(code, int) else ClarkeError
            said = data.get("error") or resp.text.strip() or resp.reason_phrase
            raise kind(f"{self.role} agent: {method} {path}: {resp.status_code} {said}")
        return data

    def _reply(self, model: type[M], path: str, data: JsonObject) -> M:
        """An agent's answer as the contract's model (clarke.contract); an answer
        outside it is the agent's fault, said as such."""
        try:
            return model.model_validate(data)
        except ValidationError as e:
            raise ClarkeError(
                f"{self.role} agent at {self.url}: {path} answered outside the contract: "
                + "; ".join(problems_of(e))
            ) from None

    def health(self) -> Health:
        return self._reply(Health, "/health", self._call("GET", "/health"))

    def link_state(self) -> LinkState:
        return self._reply(LinkState, "/state", self._call("GET", "/state"))

    def server_state(self) -> ServerState:
        return self._reply(ServerState, "/state", self._call("GET", "/state"))

    def state(self) -> Reply:
        """What the role runs, as its kind's state (LinkState, ServerState)."""
        return self._reply(state_of(kind_of_role(self.role)), "/state", self._call("GET", "/state"))

    def configure(self, body: Request | None, timeout: float | None = None) -> Configured:
        """POST /config with a request of the contract (LinkConfig, ServerConfig; None:
        an empty one, for a role that takes no configuration)."""
        data = body.body() if body is not None else {}
        return self._reply(Configured, "/config", self._call("POST", "/config", data, timeout))

    def stats(self) -> JsonObject:
        """The role's counters (its implementation's own, normalised: contract.Stats)."""
        return self._reply(Stats, "/stats", self._call("GET", "/stats")).body()

    def server_stats(self) -> ServerStats:
        """The server's counters: its connections since the last reset."""
        return self._reply(ServerStats, "/stats", self._call("GET", "/stats"))

    def link_stats(self) -> LinkRoleStats:
        """A link role's counters since the last reset, as a record keeps them."""
        return self._reply(LinkRoleStats, "/stats", self._call("GET", "/stats"))

    def reset_stats(self) -> JsonObject:
        return self._reply(Stats, "/stats/reset", self._call("POST", "/stats/reset")).body()

    def load(self, request: LoadRequest, engine: str, timeout: float) -> LoadResult:
        body = request.model_dump(mode="json")
        data = self._call("POST", "/load", body, timeout=timeout, engine=engine)
        return self._reply(LoadResult, "/load", data)

    def capture_start(self, max_bytes: int) -> JsonObject:
        body = CaptureStart(max_bytes=max_bytes).body()
        return self._reply(
            Stats, "/capture/start", self._call("POST", "/capture/start", body)
        ).body()

    def capture_stop(self) -> CaptureStopped:
        """The packets (base64) and tcpdump's counts; up to the cap, so give it time."""
        data = self._call("POST", "/capture/stop", {}, timeout=120)
        return self._reply(CaptureStopped, "/capture/stop", data)

    def pep_state(self) -> JsonObject:
        return self._reply(Reply, "/pep/state", self._call("GET", "/pep/state")).body()

    def pep_configure(self, config: PepConfig) -> Configured:
        data = self._call("POST", "/pep/config", config.body(), 60)
        return self._reply(Configured, "/pep/config", data)

    def pep_stats(self) -> JsonObject:
        return self._reply(Stats, "/pep/stats", self._call("GET", "/pep/stats")).body()

    def pep_station_stats(self) -> PepStationStats:
        """A station's PEP since the last reset, as a record keeps it."""
        return self._reply(PepStationStats, "/pep/stats", self._call("GET", "/pep/stats"))

    def pep_reset_stats(self) -> JsonObject:
        data = self._call("POST", "/pep/stats/reset")
        return self._reply(Stats, "/pep/stats/reset", data).body()

    def names_start(self, request: NamesStart) -> NamesStarted:
        data = self._call("POST", "/names/start", request.body(), 30)
        return self._reply(NamesStarted, "/names/start", data)

    def names_stop(self) -> None:
        self._reply(Reply, "/names/stop", self._call("POST", "/names/stop", {}, 30))

    def names_queries(self, since: int = 0) -> NamesQueries:
        data = self._call("GET", "/names/queries", since=str(since))
        return self._reply(NamesQueries, "/names/queries", data)

    def close(self) -> None:
        self._http.close()
