"""The PEP a station's agent hosts beside its link (terminal and gateway): which PEP
implementation runs there (clarke.registry, kind `pep`), or none. The agent's
/pep/config, /pep/state, /pep/stats and /pep/stats/reset reach it.

POST /pep/config (clarke.contract.PepConfig: a name, or none, and its settings) is idempotent: the
same name and settings are a no-op; another name stops the running PEP first. PEPs run
on the netns substrate only: the compose images do not carry one (docs/peps.md).

The slot keeps the station's hop key (derived from the testbed's token by the agent) in
its run directory, 0600, for a PEP whose stations prove themselves to each other (the
accelerated splittcp): the key never travels in a request."""

from __future__ import annotations

import contextlib
import threading

from clarke import registry
from clarke.agent import auth
from clarke.contract import PepConfig
from clarke.errors import ClarkeError, InputError
from clarke.json_value import JsonObject
from clarke.pep import HOP_KEY_FILE
from clarke.place import Place
from clarke.roles import RoleProcess
from clarke.vocab import PEP_NONE, PEP_ROLES, Substrate


def pep_names() -> tuple[str, ...]:
    """What `name` takes: none, then the registry's PEPs."""
    return (PEP_NONE, *registry.names("pep"))


# What the stations' hop key is derived for (auth.derive_key).
HOP_KEY_LABEL = "clarke pep hop key v1"


class PepSlot:
    def __init__(self, place: Place, hop_key: str | None = None) -> None:
        if place.role not in PEP_ROLES:
            raise ClarkeError(f"PEPs run at {' and '.join(PEP_ROLES)}, not at the {place.role}")
        self.place = place
        self.hop_key = hop_key
        self._key_written = False
        self.process: RoleProcess | None = None
        self.name = PEP_NONE
        self._lock = threading.Lock()

    def state(self) -> JsonObject:
        if self.process is None:
            return {"pep": PEP_NONE, "running": True}
        return self.process.state()

    def configure(self, config: PepConfig) -> JsonObject:
        name = config.name
        if name not in pep_names():
            raise InputError(f"name: unknown PEP {name!r}; allowed: {', '.join(pep_names())}")
        settings = config.settings().body()
        if name != PEP_NONE and self.place.substrate != Substrate.netns.value:
            raise InputError(
                f"PEP {name}: PEPs run on the netns substrate only (the compose images carry "
                "no PEP); use --substrate netns, or pep: none"
            )
        with self._lock:
            if name == self.name and self.process is None:
                return {"applied": False, "state": self.state()}
            if name != PEP_NONE:
                self._write_hop_key()
            if name == self.name and self.process is not None:
                return self.process.configure(settings)
            self.stop()
            if name != PEP_NONE:
                process = registry.get("pep", name).start(self.place)
                try:
                    process.configure(settings)
                except BaseException:
                    process.stop()
                    raise
                self.process, self.name = process, name
            return {"applied": True, "state": self.state()}

    def _write_hop_key(self) -> None:
        """Once per slot: the key is the testbed's, the same for every PEP started."""
        if self.hop_key is not None and not self._key_written:
            self.place.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            auth.write_secret(self.place.run_dir / HOP_KEY_FILE, self.hop_key)
            self._key_written = True

    def stats(self) -> JsonObject:
        return {"pep": self.name, **(self.process.stats() if self.process else {})}

    def reset_stats(self) -> JsonObject:
        return self.process.reset_stats() if self.process else {"ok": True}

    def problem(self) -> str | None:
        return self.process.problem() if self.process else None

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ClarkeError):
                self.process.stop()
        self.process, self.name = None, PEP_NONE
