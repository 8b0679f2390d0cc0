"""What every PEP process at a station shares: the role contract around its own start
(`_start`, which installs the TPROXY rules last) and stats; configure restarts it only
when the settings differ or it died, and stop removes the rules first."""

from __future__ import annotations

from pathlib import Path

from clarke.contract import PepSettings
from clarke.json_value import JsonObject
from clarke.pep import parse_settings, tproxy
from clarke.place import Place, procs


class TproxyPepProcess:
    implementation = ""  # the registry name

    def __init__(self, place: Place, binary: Path) -> None:
        self.place, self.binary, self.role = place, binary, place.role
        self.children = procs.Children()
        self.settings: PepSettings | None = None

    def _start(self, settings: PepSettings) -> None:
        raise NotImplementedError

    def health(self) -> JsonObject:
        return {"implementation": self.implementation, "running": self.settings is not None}

    def state(self) -> JsonObject:
        return {
            "pep": self.implementation,
            "running": self.problem() is None,
            **(self.settings.body() if self.settings else {}),
        }

    def configure(self, body: JsonObject) -> JsonObject:
        """Start with these settings, or restart when they differ (between loads: no
        connection is cut that a load needs)."""
        settings = parse_settings(body)
        if settings == self.settings and self.problem() is None:
            return {"applied": False, "state": self.state()}
        self.stop()
        try:
            self._start(settings)
        except BaseException:
            self.stop()
            raise
        return {"applied": True, "state": self.state()}

    def problem(self) -> str | None:
        return self.children.exited()

    def stop(self) -> None:
        tproxy.remove(self.place)
        self.children.stop()
        self.settings = None
