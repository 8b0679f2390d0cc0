"""The cross-traffic endpoints of a netns testbed (xclient behind the terminal, xserver
behind the gateway; testbed/build.py builds them with every testbed): processes started
in them are recorded in the testbed's state file first, so that `clarke testbed down`
stops them also after the runner died; their LAN interface's counters say what moved.
The runner drives them itself (run/session/cross.py): they have no agent and no mgmt address,
only the generators the runner starts and stops."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from clarke import sh
from clarke.errors import ClarkeError
from clarke.place import netns, procs
from clarke.place.plan import IF_XLAN, NetnsPlan
from clarke.place.procs import Proc
from clarke.testbed.state import Store


class NetnsCrossEndpoints:
    def __init__(self, plan: NetnsPlan, store: Store, run_dir: Path) -> None:
        self.plan, self.store, self.run_dir = plan, store, run_dir

    @property
    def pages_dir(self) -> Path:
        return self.run_dir / "pages"

    @property
    def pki_dir(self) -> Path:
        return self.run_dir / "pki"

    def address(self, endpoint: str) -> str:
        return self.plan.cross_lans[endpoint].address(endpoint)

    def argv(self, endpoint: str, argv: Sequence[str]) -> list[str]:
        """argv run inside the endpoint's namespace."""
        return netns.exec_argv(self.plan.ns(endpoint), argv)

    def start(self, endpoint: str, name: str, argv: Sequence[str]) -> Proc:
        proc = procs.start(
            endpoint, name, self.plan.ns(endpoint), argv, self.run_dir / f"{name}.log"
        )
        self._record(add=[proc])
        return proc

    def stop(self, started: Sequence[Proc]) -> None:
        procs.stop(list(started), timeout=5)
        self._record(remove=[p.pid for p in started])

    def alive(self, proc: Proc) -> bool:
        return procs.alive(proc)

    def byte_counters(self, endpoint: str) -> tuple[int, int]:
        """(received, sent) bytes of the endpoint's LAN interface since it was made."""
        out = sh.run([*netns.ip(self.plan.ns(endpoint)), "-j", "-s", "link", "show", IF_XLAN])
        try:
            stats = json.loads(out.stdout)[0]["stats64"]
            return int(stats["rx"]["bytes"]), int(stats["tx"]["bytes"])
        except (ValueError, LookupError, TypeError) as e:
            raise ClarkeError(f"{endpoint}: no byte counters for {IF_XLAN}: {e}") from None

    def _record(self, add: Sequence[Proc] = (), remove: Sequence[int] = ()) -> None:
        with self.store.locked():
            state = self.store.read(self.plan.id)
            if state is None:
                return
            state.processes = [p for p in state.processes if p.pid not in remove] + list(add)
            self.store.save(state)
