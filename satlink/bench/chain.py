"""A five-namespace chain (client, terminal, satellite, gateway, server) around the
three satlink roles, for satlink's own end-to-end test and benchmark.

Names start with `clarket-<tag>-`, addresses come from 198.19.240.0/20 (chain i uses
198.19.(240+i).0/24), there is no default route, and `close()` removes every namespace
and process it created, whatever happened before.

    client  .1 ─lan─ .2  terminal  .9 ─emu─┐                   ┌─ .11 gateway .25 ─lan─ .26 server
                          sat0 .17 (TUN)   └─ br .10 satellite ┘    sat0 .18 (TUN)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clarke import control_socket

HERE = Path(__file__).resolve().parent
BINARY = Path(os.environ.get("SATLINK", HERE.parent / "target" / "release" / "satlink"))
PORT = 4000
EMU_MTU = 9000

GEO = {
    d: {
        "rate_bps": 10_000_000,
        "queue": {"bytes": 662_500},
        "uplink_delay_ms": 125.0,
        "downlink_delay_ms": 125.0,
        "framing_delay_ms": 15.0,
        "loss": None,
        "seed": s,
    }
    for d, s in (("forward", 1), ("return", 2))
}
UNSHAPED = {d: {"rate_bps": 0} for d in ("forward", "return")}


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(argv, check=False, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"$ {' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


class Chain:
    def __init__(self, index: int, tag: str, config: dict, events: bool = False) -> None:
        assert 0 <= index < 16
        self.index, self.tag = index, tag
        self.net = f"198.19.{240 + index}"
        self.ns = {r: f"clarket-{tag}{index}-{r}" for r in ROLES}
        self.dir = Path(tempfile.mkdtemp(prefix=f"clarket-{tag}{index}-"))
        self.config = config
        self.events = events
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.created: list[str] = []
        self.logs: list = []

    def addr(self, host: int) -> str:
        return f"{self.net}.{host}"

    def sh(self, role: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run("ip", "netns", "exec", self.ns[role], *argv, check=check)

    def ip(self, role: str, *argv: str) -> None:
        run("ip", "-n", self.ns[role], *argv)

    def control(self, role: str) -> Path:
        return self.dir / f"{role}.sock"

    def open(self) -> Chain:
        try:
            self._build()
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self) -> None:
        for r in ROLES:
            run("ip", "netns", "add", self.ns[r])
            self.created.append(self.ns[r])
            self.ip(r, "link", "set", "lo", "up")
        links = [  # (a, a_if, b, b_if, mtu)
            ("client", "lan", "terminal", "lan", 1500),
            ("terminal", "emu", "satellite", "emu-st", EMU_MTU),
            ("gateway", "emu", "satellite", "emu-gw", EMU_MTU),
            ("gateway", "lan", "server", "lan", 1500),
        ]
        for a, ai, b, bi, mtu in links:
            self.ip(
                a,
                "link",
                "add",
                "name",
                ai,
                "mtu",
                str(mtu),
                "type",
                "veth",
                "peer",
                "name",
                bi,
                "netns",
                self.ns[b],
            )
            self.ip(b, "link", "set", bi, "mtu", str(mtu), "up")
            self.ip(a, "link", "set", ai, "up")
        self.ip("satellite", "link", "add", "name", "br0", "mtu", str(EMU_MTU), "type", "bridge")
        for port in ("emu-st", "emu-gw"):
            self.ip("satellite", "link", "set", port, "master", "br0")
        self.ip("satellite", "link", "set", "br0", "up")
        for role, dev, host in [
            ("client", "lan", 1),
            ("terminal", "lan", 2),
            ("terminal", "emu", 9),
            ("satellite", "br0", 10),
            ("gateway", "emu", 11),
            ("gateway", "lan", 25),
            ("server", "lan", 26),
        ]:
            plen = 29
            self.ip(role, "addr", "add", f"{self.addr(host)}/{plen}", "dev", dev)
        self.ip("client", "route", "add", f"{self.addr(24)}/29", "via", self.addr(2))
        self.ip("server", "route", "add", f"{self.addr(0)}/29", "via", self.addr(25))
        for r in ("terminal", "gateway"):
            self.sh(r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            self.sh(r, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0")

    def _spawn(self, role: str, argv: list[str]) -> None:
        cfg = self.dir / "link.json"
        argv += ["--config", str(cfg), "--control", str(self.control(role))]
        if self.events:
            argv += ["--events", str(self.dir / f"{role}.events")]
        log = open(self.dir / f"{role}.log", "w")  # noqa: SIM115 (closed in close())
        self.logs.append(log)
        p = subprocess.Popen(
            ["ip", "netns", "exec", self.ns[role], str(BINARY), *argv],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        self.procs[role] = p
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        if line != "ready":
            p.wait(5)
            raise RuntimeError(
                f"satlink {role} did not start: {(self.dir / f'{role}.log').read_text()}"
            )

    def _start(self) -> None:
        (self.dir / "link.json").write_text(json.dumps(self.config))
        emu = {
            r: f"{self.addr(h)}:{PORT}"
            for r, h in (("terminal", 9), ("satellite", 10), ("gateway", 11))
        }
        self._spawn(
            "satellite",
            [
                "sat",
                "--emu-bind",
                emu["satellite"],
                "--gw",
                emu["gateway"],
                "--st",
                emu["terminal"],
            ],
        )
        for role, kind in (("gateway", "gw"), ("terminal", "st")):
            self._spawn(
                role, [kind, "--dev", "sat0", "--emu-bind", emu[role], "--sat", emu["satellite"]]
            )
        for role, host, remote in (("terminal", 17, 24), ("gateway", 18, 0)):
            self.ip(role, "addr", "add", f"{self.addr(host)}/30", "dev", "sat0")
            self.ip(role, "route", "add", f"{self.addr(remote)}/29", "dev", "sat0")

    def ask(self, role: str, request: dict) -> Any:
        """The role's reply as satlink sent it, an error reply included."""
        return control_socket.reply(self.control(role), request)

    @contextlib.contextmanager
    def iperf_server(self, wait_s: float) -> Iterator[None]:
        """iperf3 serving one test at the server's address (.26) for the block; afterwards
        given `wait_s` to finish it, then ended."""
        srv = subprocess.Popen(
            ["ip", "netns", "exec", self.ns["server"], "iperf3", "-s", "-1", "-B", self.addr(26)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(0.5)
            yield
        finally:
            try:
                srv.wait(wait_s)
            except subprocess.TimeoutExpired:
                srv.terminate()
                srv.wait(5)

    def pids(self) -> dict[str, int]:
        """The satlink processes' own pids (children of `ip netns exec`, which execs)."""
        return {r: p.pid for r, p in self.procs.items()}

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()
        for log in self.logs:
            log.close()
        self.logs.clear()
        for ns in reversed(self.created):
            run("ip", "netns", "del", ns, check=False)
        self.created.clear()

    def __enter__(self) -> Chain:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


ROLES = ("client", "terminal", "satellite", "gateway", "server")


def ping(chain: Chain, count: int, interval: float = 0.2, size: int = 56) -> list[float]:
    """RTTs in ms from client to server, of echoes with `size` bytes of payload."""
    out = chain.sh(
        "client",
        "ping",
        "-n",
        "-c",
        str(count),
        "-i",
        str(interval),
        "-s",
        str(size),
        "-W",
        "5",
        chain.addr(26),
        check=False,
    ).stdout
    return [
        float(line.split("time=")[1].split()[0]) for line in out.splitlines() if "time=" in line
    ]


def wait_link(chain: Chain, timeout: float = 10) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if ping(chain, 1):
            return
    raise RuntimeError("no ping across the chain")
