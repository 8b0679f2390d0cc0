"""The runner's side of the agents: every request carries the testbed's agent token
(clarke.agent.auth)."""

from __future__ import annotations

from typing import Any

import httpx

from clarke.agent import auth
from clarke.errors import ClarkeError, EnvironmentProblem, InputError

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
        body: dict[str, Any] | None = None,
        timeout: float | None = None,
        **params: str,
    ) -> dict[str, Any]:
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

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def state(self) -> dict[str, Any]:
        return self._call("GET", "/state")

    def configure(self, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        return self._call("POST", "/config", body, timeout=timeout)

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/stats")

    def reset_stats(self) -> dict[str, Any]:
        return self._call("POST", "/stats/reset")

    def load(self, request: dict[str, Any], engine: str, timeout: float) -> dict[str, Any]:
        return self._call("POST", "/load", request, timeout=timeout, engine=engine)

    def capture_start(self, max_bytes: int) -> dict[str, Any]:
        return self._call("POST", "/capture/start", {"max_bytes": max_bytes})

    def capture_stop(self) -> dict[str, Any]:
        """The packets (base64) and tcpdump's counts; up to the cap, so give it time."""
        return self._call("POST", "/capture/stop", {}, timeout=120)

    def pep_state(self) -> dict[str, Any]:
        return self._call("GET", "/pep/state")

    def pep_configure(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/pep/config", body, timeout=60)

    def pep_stats(self) -> dict[str, Any]:
        return self._call("GET", "/pep/stats")

    def pep_reset_stats(self) -> dict[str, Any]:
        return self._call("POST", "/pep/stats/reset")

    def close(self) -> None:
        self._http.close()
