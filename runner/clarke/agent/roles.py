"""What each role's agent does, per implementation. A role's contract (the endpoints
and their JSON) does not change with the implementation behind it."""

from __future__ import annotations

import json
import socket
from typing import Any, Protocol

import httpx
from pydantic import ValidationError

from clarke import __version__
from clarke.browser.load import BrowserSetup
from clarke.errors import ClarkeError, InputError, ValidationFailed
from clarke.link.profiles import LinkProfile
from clarke.schema import problems_of


class Role(Protocol):
    role: str
    implementation: str

    def health(self) -> dict[str, Any]: ...
    def configure(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def stats(self) -> dict[str, Any]: ...
    def reset_stats(self) -> dict[str, Any]: ...


def link_profile_of(body: dict[str, Any]) -> LinkProfile:
    """The link roles' POST /config body, whatever emulates the link:
    {"name": "geo", "profile": {...a link profile, as in profiles/<name>.yaml...}}."""
    if not isinstance(body.get("profile"), dict):
        raise InputError(
            'POST /config for a link role takes {"name": NAME, "profile": {...link profile...}}'
        )
    try:
        return LinkProfile.model_validate(body["profile"])
    except ValidationError as e:
        raise ValidationFailed(f"link profile {body.get('name', '')!r}", problems_of(e)) from None


class SatlinkRole:
    """terminal, satellite or gateway, backed by a satlink process's control socket."""

    implementation = "satlink"

    def __init__(self, role: str, control_socket: str) -> None:
        self.role, self.control_socket = role, control_socket

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            try:
                s.connect(self.control_socket)
            except OSError as e:
                raise ClarkeError(f"satlink control socket {self.control_socket}: {e}") from None
            s.sendall(json.dumps(request).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        reply = json.loads(buf or b"{}")
        if isinstance(reply, dict) and reply.get("error"):
            raise InputError(f"satlink refused {request.get('cmd')}: {reply['error']}")
        return reply

    def health(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "implementation": "satlink",
            "clarke": __version__,
            "satlink": self._ask({"cmd": "health"}),
        }

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        profile = link_profile_of(body)
        reply = self.set_link(profile.to_satlink_config())
        return {"applied": body.get("name", ""), "satlink": reply}

    def set_link(self, config: dict[str, Any]) -> dict[str, Any]:
        """satlink's own configuration document (satlink/README.md), applied at run time."""
        return self._ask({"cmd": "set", "config": config})

    def stats(self) -> dict[str, Any]:
        stats = self._ask({"cmd": "stats"})
        # A station's `bytes_out` of the direction it shapes are the IP bytes it put onto
        # the link; the satellite only relays.
        shapes = {"gw": "forward", "st": "return"}.get(str(stats.get("role")))
        if shapes and isinstance(stats.get(shapes), dict):
            stats["bytes_onto_link"] = {shapes: stats[shapes].get("bytes_out")}
            # When satlink read its counters, on its own clock (seconds): rates from
            # samples of them do not depend on how long a request took to get here.
            stats["counted_at_s"] = stats.get("uptime_s")
        return stats

    def reset_stats(self) -> dict[str, Any]:
        return self._ask({"cmd": "reset_stats"})


class HttpControlledRole:
    """A role whose implementation has its own HTTP control endpoint on the management
    side (origin: /health, /config, /stats, /stats/reset)."""

    def __init__(self, role: str, implementation: str, control_url: str) -> None:
        self.role, self.implementation = role, implementation
        self._http = httpx.Client(base_url=control_url, timeout=15, trust_env=False)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            resp = self._http.request(method, path, json=body)
        except httpx.TransportError as e:
            raise ClarkeError(
                f"{self.implementation} control endpoint {self._http.base_url}: {e}"
            ) from None
        if resp.status_code >= 400:
            raise InputError(f"{self.implementation} refused {method} {path}: {resp.text.strip()}")
        return resp.json() if resp.content else {}

    def health(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "implementation": self.implementation,
            "clarke": __version__,
            self.implementation: self._call("GET", "/health"),
        }

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/config", body)

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/stats")

    def reset_stats(self) -> dict[str, Any]:
        return self._call("POST", "/stats/reset")


class ClientRole:
    """The browser: loads pages with the requested engine, inside this role's network.
    The browser binary, the CA and the server's name are the agent's start-up options
    (`setup`); a request carries only values (browser/load.py)."""

    role = "client"
    implementation = "firefox"
    ENGINES = ("selenium", "browsertime")

    def __init__(self, setup: BrowserSetup) -> None:
        self.setup = setup
        self.loads = 0

    def health(self) -> dict[str, Any]:
        from clarke.browser import firefox

        try:
            binary = firefox.find_firefox(self.setup.firefox)
            version = firefox.version(binary)
        except ClarkeError as e:
            return {
                "role": self.role,
                "implementation": self.implementation,
                "ready": False,
                "error": str(e),
                "clarke": __version__,
            }
        return {
            "role": self.role,
            "implementation": self.implementation,
            "ready": True,
            "firefox": binary,
            "firefox_version": version,
            "clarke": __version__,
        }

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        return {}

    def stats(self) -> dict[str, Any]:
        return {"loads": self.loads}

    def reset_stats(self) -> dict[str, Any]:
        return {}

    def load(self, body: dict[str, Any], engine: str) -> dict[str, Any]:
        """One page load; InputError (nothing started) for an unknown engine or a
        request that is not a valid LoadRequest for this agent's setup."""
        from clarke.browser.load import LoadRequest, LoadResult

        if engine not in self.ENGINES:
            raise InputError(f"unknown engine {engine!r}; allowed: {', '.join(self.ENGINES)}")
        req = LoadRequest.for_agent(body, self.setup)
        if engine == "selenium":
            from clarke.browser import selenium_engine as module
        else:
            from clarke.browser import browsertime_engine as module  # type: ignore[no-redef]
        self.loads += 1
        try:
            result = module.load(req, self.setup)
        except ClarkeError as e:
            result = LoadResult.failed(engine, f"{e.kind}: {e}")
        return result.model_dump(mode="json")
