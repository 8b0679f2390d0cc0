"""The runner's side of the agents: every request carries the testbed's agent token
(clarke.agent.auth)."""

from __future__ import annotations

from typing import Any

import httpx

from clarke.agent import auth
from clarke.errors import ClarkeError


class AgentClient:
    def __init__(self, role: str, url: str, token: str, timeout: float = 30) -> None:
        self.role, self.url = role, url
        self._http = httpx.Client(
            base_url=url, timeout=timeout, trust_env=False, headers=auth.bearer(token)
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
            said = data.get("error") or resp.text.strip() or resp.reason_phrase
            raise ClarkeError(f"{self.role} agent: {method} {path}: {resp.status_code} {said}")
        return data

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/config", body)

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/stats")

    def reset_stats(self) -> dict[str, Any]:
        return self._call("POST", "/stats/reset")

    def load(self, request: dict[str, Any], engine: str, timeout: float) -> dict[str, Any]:
        return self._call("POST", "/load", request, timeout=timeout, engine=engine)

    def close(self) -> None:
        self._http.close()
