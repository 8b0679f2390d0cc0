"""splittcp, Clarke's built-in split-TCP PEP (satlink/crates/splittcp), at a station:
`splittcp --transparent` on PEP_PORT takes what TPROXY intercepts (tproxy.py) and
relays each connection over one of its own. At the terminal its own connection crosses
the satellite hop (--hop-side outbound); at the gateway the accepted one did (inbound).
Outbound connections are not transparent: the server sees the gateway's LAN address,
which is how a load proves its TCP was split (run/session/pep.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from clarke import paths
from clarke.errors import ClarkeError, EnvironmentProblem
from clarke.pep import tproxy
from clarke.pep.control import answers, ask
from clarke.pep.process import TproxyPepProcess
from clarke.place import Place, procs
from clarke.roles import Implementation, RoleProcess

PEP_PORT = 7010  # the transparent listener, in the station's own namespace
START_TIMEOUT_S = 10.0
HOP_SIDE = {"terminal": "outbound", "gateway": "inbound"}


def splittcp_binary() -> Path | None:
    """$CLARKE_SPLITTCP, else the checkout's release build, else `splittcp` on PATH."""
    env = os.environ.get("CLARKE_SPLITTCP")
    if env:
        return Path(env)
    root = paths.source_root()
    if root is not None:
        built = root / "satlink" / "target" / "release" / "splittcp"
        if built.is_file():
            return built
    found = shutil.which("splittcp")
    return Path(found) if found else None


class SplitTcpProcess(TproxyPepProcess):
    implementation = "splittcp"

    def __init__(self, place: Place, binary: Path) -> None:
        super().__init__(place, binary)
        self.control = place.run_dir / "splittcp.sock"

    def _start(self, settings: dict[str, Any]) -> None:
        place = self.place
        place.run_dir.mkdir(parents=True, exist_ok=True)
        argv = place.argv([
            str(self.binary), "--listen", f"0.0.0.0:{PEP_PORT}", "--transparent",
            "--hop-side", HOP_SIDE[place.role], "--hop-cc", settings["hop_cc"],
            "--hop-buffer-bytes", str(settings["hop_buffer_bytes"]),
            "--control", str(self.control),
        ])  # fmt: skip
        popen = self.children.spawn("splittcp", argv, log=place.run_dir / "splittcp.log")
        procs.wait_until(
            lambda: answers(self.control) or popen.poll() is not None, "splittcp", START_TIMEOUT_S
        )
        if popen.poll() is not None:
            tail = procs.tail(place.run_dir / "splittcp.log")
            raise EnvironmentProblem(
                f"splittcp exited during start-up ({popen.returncode}): {tail}"
            )
        tproxy.install(place, PEP_PORT)
        self.settings = settings

    def stats(self) -> dict[str, Any]:
        if self.settings is None:
            return {}
        return {
            **ask(self.control, {"cmd": "stats"}),
            "intercepted_syns": tproxy.intercepted_syns(self.place),
        }

    def reset_stats(self) -> dict[str, Any]:
        if self.settings is None:
            return {"ok": True}
        tproxy.reset_counters(self.place)
        return ask(self.control, {"cmd": "reset_stats"})

    def stop(self) -> None:
        super().stop()
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
        if place.role not in HOP_SIDE:
            raise ClarkeError(f"a PEP runs at the terminal or the gateway, not the {place.role}")
        return SplitTcpProcess(place, binary)
