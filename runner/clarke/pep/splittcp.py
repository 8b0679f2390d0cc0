"""splittcp, Clarke's built-in split-TCP PEP (satlink/crates/splittcp), at a station.

    split         `splittcp --mode split` at both stations takes what TPROXY intercepts
                  (tproxy.py) on loopback and relays each connection over one of its
                  own; the terminal's crosses the satellite hop (the gateway intercepts
                  it again), the gateway's goes to the server.
    accelerated   the terminal's `--mode accelerated` takes the client's connections
                  from TPROXY as well, but carries each over a hop connection it opened
                  beforehand to the gateway's hop listener, on the gateway's address at
                  the link's L3 end (plan.sat), which takes only the terminal's address
                  there and a connection that proves the testbed's key. The hop starts
                  at the link's rate: a route to the other station with `initcwnd` (the
                  first window), SO_MAX_PACING_RATE, large buffers.

Either way the gateway connects to the server not transparently: the server sees the
gateway's LAN address, which is how a load proves its TCP was split (run/session/pep.py)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from clarke import paths, sh
from clarke.contract import PepSettings
from clarke.control_socket import answers, ask
from clarke.errors import ClarkeError, EnvironmentProblem
from clarke.json_value import JsonObject, object_at
from clarke.pep import HOP_KEY_FILE, tproxy
from clarke.pep.process import TproxyPepProcess
from clarke.pep_presets import ACCELERATED, SPLIT
from clarke.place import Place, procs
from clarke.roles import Implementation, RoleProcess
from clarke.vocab import sends

PEP_PORT = 7010  # the clients' listener, on the station's loopback (TPROXY --on-ip)
HOP_PORT = 7011  # the accelerated gateway's hop listener, on its link-side address
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 10.0
# How long the accelerated terminal may take to fill its pool: every hop connection is a
# handshake and a key exchange across the link (two round trips on GEO), four at a time.
POOL_TIMEOUT_S = 30.0
STATIONS = ("terminal", "gateway")
SPEAKER = "splittcp"  # in its control socket's errors


def splittcp_binary() -> Path | None:
    """$CLARKE_SPLITTCP, else the checkout's release build, else `splittcp` on PATH."""
    return paths.rust_binary("splittcp", "CLARKE_SPLITTCP")


class SplitTcpProcess(TproxyPepProcess):
    implementation = "splittcp"

    def __init__(self, place: Place, binary: Path) -> None:
        super().__init__(place, binary)
        self.control = place.run_dir / "splittcp.sock"
        self.route: list[str] | None = None  # the hop's route, while it is in force

    # --- addresses ------------------------------------------------------------------
    def _peer_link_address(self) -> str:
        """The other station's address at the link's L3 end."""
        other = "gateway" if self.role == "terminal" else "terminal"
        return self.place.plan.sat.address(other)

    def _lan_prefixes(self) -> tuple[str, str]:
        """(the clients' LAN, the server's LAN)."""
        plan = self.place.plan
        return str(plan.st_lan.prefix), str(plan.gw_lan.prefix)

    def _argv(self, settings: PepSettings) -> list[str]:
        place, role = self.place, self.role
        direction = sends(role) or "forward"
        clients, servers = self._lan_prefixes()
        common = [
            "--station", role,
            "--hop-cc", settings.hop_cc.value,
            "--hop-buffer-bytes", str(settings.hop_buffer_bytes),
            "--hop-max-pacing-rate", str(settings.hop_max_pacing_rate.of(direction)),
            "--allow-destination", servers,
            "--control", str(self.control),
        ]  # fmt: skip
        if settings.mode == SPLIT:
            # The gateway takes what crosses the link from the terminal's side.
            sources = [clients] if role == "terminal" else [clients, *self._terminal_side()]
            return [
                str(self.binary), "--mode", SPLIT, *common,
                "--listen", f"{LOOPBACK}:{PEP_PORT}", "--transparent",
                *(a for s in sources for a in ("--allow-source", s)),
            ]  # fmt: skip
        key = place.run_dir / HOP_KEY_FILE
        if not key.is_file():
            raise EnvironmentProblem(
                f"no hop key at the {role} ({key}): the station's agent writes it from the "
                "testbed's token; start the station with `clarke testbed up`"
            )
        if role == "terminal":
            return [
                str(self.binary), "--mode", ACCELERATED, *common,
                "--listen", f"{LOOPBACK}:{PEP_PORT}", "--transparent",
                "--allow-source", clients,
                "--gateway", f"{self._peer_link_address()}:{HOP_PORT}",
                "--hop-key-file", str(key),
                "--pool-size", str(settings.pool_size),
                "--pool-max-opening", str(settings.pool_max_opening),
                "--pool-spare", str(settings.pool_spare),
            ]  # fmt: skip
        return [
            str(self.binary), "--mode", ACCELERATED, *common,
            "--listen", f"{place.plan.sat.address('gateway')}:{HOP_PORT}",
            "--hop-peer", self._peer_link_address(),
            "--hop-key-file", str(key),
        ]  # fmt: skip

    def _terminal_side(self) -> list[str]:
        """Where the terminal's own connections come from, seen at the gateway: its
        addresses on the link (sat, and emu for links without an L3 end of their own)."""
        plan = self.place.plan
        return [f"{plan.sat.address('terminal')}/32", f"{plan.emu.address('terminal')}/32"]

    # --- life -----------------------------------------------------------------------
    def _start(self, settings: PepSettings) -> None:
        place = self.place
        place.run_dir.mkdir(parents=True, exist_ok=True)
        accelerated = settings.mode == ACCELERATED
        if accelerated:
            self._check_link_end()
        argv = place.argv(self._argv(settings))
        log = place.run_dir / "splittcp.log"
        popen = self.children.spawn("splittcp", argv, log=log)
        self.children.started(
            "splittcp",
            lambda: answers(self.control, SPEAKER),
            "splittcp",
            START_TIMEOUT_S,
            lambda: procs.tail(log),
        )
        direction = sends(self.role) or "forward"
        window = settings.hop_initial_window.of(direction)
        if accelerated and window > 0:
            self._set_route(window)
        if not (accelerated and self.role == "gateway"):
            tproxy.install(place, PEP_PORT, on_ip=LOOPBACK)
        if accelerated and self.role == "terminal":
            self._wait_for_the_pool(settings.pool_size, popen)
        self.settings = settings

    def _check_link_end(self) -> None:
        address = self.place.plan.sat.address(self.role)
        try:
            self.place.iface("sat")
        except EnvironmentProblem:
            raise EnvironmentProblem(
                f"the accelerated PEP's hop runs between the link's L3 ends (satlink, "
                f"opensand); this {self.role} has no address {address} (a netem link has "
                "none): use pep splittcp here"
            ) from None

    def _set_route(self, segments: int) -> None:
        """The hop's first window: a host route to the other station's link address
        with `initcwnd` (the kernel reads it when a connection starts, and restarts an
        idle one from it)."""
        peer = self._peer_link_address()
        route = [f"{peer}/32", "dev", self.place.iface("sat")]
        sh.run([*self.place.ip(), "route", "replace", *route, "initcwnd", str(segments)])
        self.route = route

    def _wait_for_the_pool(self, size: int, popen: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + POOL_TIMEOUT_S
        pool: JsonObject = {}
        while time.monotonic() < deadline and popen.poll() is None:
            pool = object_at(ask(self.control, {"cmd": "stats"}, SPEAKER), "pool")
            ready = pool.get("ready", 0)
            if isinstance(ready, int) and ready >= size:
                return
            time.sleep(0.1)
        raise EnvironmentProblem(
            f"the terminal's PEP opened {pool.get('ready', 0)} of {size} hop connections to "
            f"the gateway in {POOL_TIMEOUT_S:.0f} s: {pool.get('last_error') or 'no error'}"
        )

    def health(self) -> JsonObject:
        return {**super().health(), "mode": self.settings.mode if self.settings else None}

    def stats(self) -> JsonObject:
        if self.settings is None:
            return {}
        out = ask(self.control, {"cmd": "stats"}, SPEAKER)
        out["mode"] = self.settings.mode
        out["preset"] = self.settings.preset
        if tproxy.installed(self.place):
            out["intercepted_syns"] = tproxy.intercepted_syns(self.place)
        return out

    def reset_stats(self) -> JsonObject:
        if self.settings is None:
            return {"ok": True}
        tproxy.reset_counters(self.place)
        return ask(self.control, {"cmd": "reset_stats"}, SPEAKER)

    def stop(self) -> None:
        super().stop()
        if self.route is not None:
            sh.run([*self.place.ip(), "route", "del", *self.route], check=False)
            self.route = None
        self.control.unlink(missing_ok=True)


class SplitTcp(Implementation):
    kind = "pep"
    name = "splittcp"
    summary = (
        "Clarke's own split-TCP proxy (satlink/crates/splittcp), TPROXY at terminal and gateway"
    )
    install = (
        "build it with ci/build.sh (cargo build --release in satlink/), or set CLARKE_SPLITTCP"
    )

    def check_environment(self) -> None:
        if splittcp_binary() is None:
            raise EnvironmentProblem(f"the splittcp binary is missing: {self.install}")
        if shutil.which("iptables") is None:
            raise EnvironmentProblem("splittcp needs iptables (TPROXY): apt-get install iptables")

    def start(self, place: Place) -> RoleProcess:
        """Nothing runs until the first configure (it carries the settings)."""
        self.check_environment()
        binary = splittcp_binary()
        assert binary is not None
        if place.role not in STATIONS:
            raise ClarkeError(f"a PEP runs at the terminal or the gateway, not the {place.role}")
        return SplitTcpProcess(place, binary)
