"""PEPsal (CNES's PEPSal 2.x, a split-TCP PEP for satellite links), at a station where it
is installed: `pepsal -p PEPSAL_PORT` takes what TPROXY intercepts (tproxy.py) and
connects onwards transparently, from the client's own address, so the server sees the
client. What it split is counted by the interception itself (the SYNs TPROXY handed
it: `accepted`); its syn-table log (-l), dumped every few seconds, lists the proxied
connections still open (`connections`, informative: closed ones leave the table).

Getting it: the Debian 12 package pepsal_2.0.2_amd64.deb from CNES's net4sat packages
(`apt install ./pepsal_2.0.2_amd64.deb`), or a build from its sources; $CLARKE_PEPSAL
names the binary where it is not on PATH (docs/peps.md)."""

from __future__ import annotations

import ipaddress
import os
import re
import resource
import shutil
import time
from pathlib import Path

from clarke.contract import PepSettings
from clarke.errors import EnvironmentProblem, InputError
from clarke.json_value import JsonObject
from clarke.pep import tproxy
from clarke.pep.process import TproxyPepProcess
from clarke.pep_presets import SPLIT
from clarke.place import Place, procs
from clarke.roles import Implementation, RoleProcess
from clarke.vocab import PEP_ROLES

PEPSAL_PORT = 7012
# PEPsal 2.x sets its open-file limit to this hard limit at start and exits when it may
# not (a hard limit below it and no CAP_SYS_RESOURCE, as in many containers).
PEPSAL_NOFILE = 1 << 20
CAP_SYS_RESOURCE = 24
START_TIMEOUT_S = 10.0
INSTALL = (
    "install PEPsal: the Debian 12 package pepsal_2.0.2_amd64.deb from CNES's net4sat "
    "packages (apt install ./pepsal_2.0.2_amd64.deb), or set CLARKE_PEPSAL to its binary "
    "(docs/peps.md)"
)
# One proxied connection in the syn-table dump: "[n] Proxy A:p <-> B:q" then its status;
# addresses as PEPsal 2.x prints them (IPv6 notation, IPv4 as ::ffff:a.b.c.d in hex).
PROXY_RE = re.compile(r"Proxy\s+(\S+):(\d+)\s+<->\s+(\S+):(\d+)\s+Status:\s*(\w+)")


def pepsal_binary() -> Path | None:
    env = os.environ.get("CLARKE_PEPSAL")
    if env:
        return Path(env) if Path(env).is_file() else None
    found = shutil.which("pepsal")
    return Path(found) if found else None


def may_raise_nofile() -> bool:
    """Whether PEPsal may set its open-file hard limit to PEPSAL_NOFILE here."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard >= PEPSAL_NOFILE:
        return True
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    caps = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("CapEff:")), "0")
    return bool(int(caps, 16) >> CAP_SYS_RESOURCE & 1)


def parse_log(text: str) -> list[dict[str, str]]:
    """The proxied connections of pepsal's last syn-table dump (its log is rewritten
    with each dump; a dump starts with '=== [')."""
    last = text.rsplit("=== [", 1)[-1]
    return [
        {"accepted_from": f"{_ip(a)}:{p}", "destination": f"{_ip(b)}:{q}", "status": status}
        for a, p, b, q, status in PROXY_RE.findall(last)
    ]


def _ip(text: str) -> str:
    """An address as Clarke writes it: IPv4 dotted, also when PEPsal printed it mapped."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return text
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


class PepsalProcess(TproxyPepProcess):
    implementation = "pepsal"

    def __init__(self, place: Place, binary: Path) -> None:
        super().__init__(place, binary)
        self.log = place.run_dir / "pepsal-syntab.log"
        self._seen: set[str] = set()  # connections counted before the last reset

    def _start(self, settings: PepSettings) -> None:
        # PEPsal sizes its buffers itself: hop_buffer_bytes is kept as asked, not applied;
        # it splits only (the accelerated settings are refused).
        if settings.mode != SPLIT:
            raise InputError("mode: PEPsal splits only (mode split)")
        place = self.place
        place.run_dir.mkdir(parents=True, exist_ok=True)
        self.log.unlink(missing_ok=True)
        argv = place.argv([
            str(self.binary), "-p", str(PEPSAL_PORT), "-l", str(self.log),
            "-C", settings.hop_cc.value, "-n",
        ])  # fmt: skip
        popen = self.children.spawn("pepsal", argv, log=place.run_dir / "pepsal.log")
        time.sleep(0.5)  # it has no readiness signal; a bad option ends it at once
        if popen.poll() is not None:
            tail = procs.tail(place.run_dir / "pepsal.log")
            raise EnvironmentProblem(f"pepsal exited during start-up ({popen.returncode}): {tail}")
        tproxy.install(place, PEPSAL_PORT)
        self.settings = settings

    def _connections(self) -> list[dict[str, str]]:
        try:
            return parse_log(self.log.read_text(errors="replace"))
        except OSError:
            return []

    def stats(self) -> JsonObject:
        """accepted: the connections TPROXY handed it since the last reset; connections:
        those of its last dump that were not there at the last reset."""
        if self.settings is None:
            return {}
        conns = [c for c in self._connections() if c["accepted_from"] not in self._seen]
        syns = tproxy.intercepted_syns(self.place)
        return {
            "accepted": syns or 0,
            "intercepted_syns": syns,
            "connections": conns,
            "mode": self.settings.mode,
            "preset": self.settings.preset,
        }

    def reset_stats(self) -> JsonObject:
        tproxy.reset_counters(self.place)
        self._seen = {c["accepted_from"] for c in self._connections()}
        return {"ok": True}


class Pepsal(Implementation):
    kind = "pep"
    name = "pepsal"
    summary = "PEPsal (CNES), where it is installed: transparent split TCP at terminal and gateway"
    install = INSTALL

    def check_environment(self) -> None:
        if pepsal_binary() is None:
            raise EnvironmentProblem(f"PEPsal is not installed: {INSTALL}")
        if not may_raise_nofile():
            raise EnvironmentProblem(
                f"PEPsal 2.x raises its open-file hard limit to {PEPSAL_NOFILE} at start, which "
                f"this host forbids (hard limit {resource.getrlimit(resource.RLIMIT_NOFILE)[1]}, "
                "no CAP_SYS_RESOURCE): run it where root may raise the limit (`ulimit -Hn "
                f"{PEPSAL_NOFILE}` works), e.g. outside a restricted container"
            )

    def start(self, place: Place) -> RoleProcess:
        self.check_environment()
        binary = pepsal_binary()
        assert binary is not None
        if place.role not in PEP_ROLES:
            raise EnvironmentProblem(
                f"a PEP runs at the terminal or the gateway, not the {place.role}"
            )
        return PepsalProcess(place, binary)
