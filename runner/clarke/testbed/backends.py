"""Link emulation backends behind one interface.

    satlink   the built-in user-space emulator (satlink/): ST, SAT and GW processes in
              the terminal, satellite and gateway namespaces, UDP carriers over the
              emulation network, a TUN device at ST and GW. The default.
    netem     Linux `tc netem` on the terminal's and the gateway's emulation-network
              interfaces, where the kernel has it (detected in a scratch namespace).
    opensand  OpenSAND 8.x: its configuration comes with the compose work; the class
              below is the seam (same interface, refuses to start for now).

A backend checks its environment before anything is created (`check`), then wires the
link between terminal and gateway in namespaces that lifecycle.py has already built
(`wire`), can apply another profile to a running link (`apply`) and report counters
(`stats`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from clarke import paths, sh
from clarke.agent.roles import SatlinkRole
from clarke.errors import ClarkeError, EnvironmentProblem, UnknownName
from clarke.link.profiles import Direction, LinkProfile
from clarke.testbed import netns
from clarke.testbed.plan import IF_EMU, IF_SAT, Addresses, Plan

NAMES = ("satlink", "netem", "opensand")
PROBE_PREFIX = "clkprobe-"


class Wiring(Protocol):
    """What a backend may do to the testbed under construction (lifecycle.Builder)."""

    plan: Plan
    run_dir: Path

    def start(self, role: str, name: str, argv: list[str]) -> Any: ...


class Backend(Protocol):
    name: str

    def check(self) -> None: ...
    def wire(self, tb: Wiring, profile: LinkProfile) -> None: ...
    def apply(self, plan: Plan, run_dir: Path, profile: LinkProfile) -> None: ...
    def stats(self, plan: Plan, run_dir: Path) -> dict[str, Any]: ...


# --- satlink ---------------------------------------------------------------------------


def satlink_binary() -> Path | None:
    """$CLARKE_SATLINK, else the checkout's release build, else `satlink` on PATH."""
    env = os.environ.get("CLARKE_SATLINK")
    if env:
        return Path(env)
    root = paths.source_root()
    if root is not None:
        built = root / "satlink" / "target" / "release" / "satlink"
        if built.is_file():
            return built
    found = shutil.which("satlink")
    return Path(found) if found else None


class Satlink:
    name = "satlink"

    def __init__(self) -> None:
        self.binary: Path | None = None

    def check(self) -> None:
        binary = satlink_binary()
        if binary is None or not os.access(binary, os.X_OK):
            where = binary or "satlink/target/release/satlink"
            raise EnvironmentProblem(
                f"the satlink binary is missing ({where}): build it with "
                "`cargo build --release` in satlink/, or set CLARKE_SATLINK"
            )
        self.binary = binary

    @staticmethod
    def control(run_dir: Path, role: str) -> Path:
        return run_dir / f"{role}.sock"

    def argv(self, plan: Addresses, run_dir: Path, role: str) -> list[str]:
        """The satlink command of a link role (both substrates)."""
        assert self.binary is not None
        common = [
            "--config",
            str(run_dir / "link.json"),
            "--control",
            str(self.control(run_dir, role)),
        ]
        if role == "satellite":
            return [
                str(self.binary),
                "sat",
                "--emu-bind",
                plan.emu_endpoint("satellite"),
                "--gw",
                plan.emu_endpoint("gateway"),
                "--st",
                plan.emu_endpoint("terminal"),
                *common,
            ]
        kind = "st" if role == "terminal" else "gw"
        return [
            str(self.binary),
            kind,
            "--dev",
            IF_SAT,
            "--emu-bind",
            plan.emu_endpoint(role),
            "--sat",
            plan.emu_endpoint("satellite"),
            *common,
        ]

    def wire(self, tb: Wiring, profile: LinkProfile) -> None:
        plan, run_dir = tb.plan, tb.run_dir
        (run_dir / "link.json").write_text(json.dumps(profile.to_satlink_config(), indent=2))
        for role in ("satellite", "gateway", "terminal"):
            proc = tb.start(role, f"satlink-{role}", self.argv(plan, run_dir, role))
            sock = self.control(run_dir, role)
            from clarke.testbed import procs

            procs.wait_ready(proc, lambda sock=sock, role=role: answers(role, sock))
        for role in ("terminal", "gateway"):
            netns.batch(plan.ns(role), self.link_end_commands(plan, role))

    @staticmethod
    def link_end_commands(plan: Addresses, role: str) -> list[str]:
        """`ip` commands for a station (terminal, gateway) once satlink runs: its TUN
        device gets the link end's address, and the remote LAN is routed into it."""
        return [
            f"addr replace {plan.sat.cidr(role)} dev {IF_SAT}",
            f"link set {IF_SAT} up",
            f"route replace {plan.remote_lan(role).prefix} dev {IF_SAT}",
        ]

    def apply(self, plan: Plan, run_dir: Path, profile: LinkProfile) -> None:
        config = profile.to_satlink_config()
        for role in ("terminal", "satellite", "gateway"):
            SatlinkRole(role, str(self.control(run_dir, role))).set_link(config)
        (run_dir / "link.json").write_text(json.dumps(config, indent=2))

    def stats(self, plan: Plan, run_dir: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for role in ("terminal", "satellite", "gateway"):
            try:
                out[role] = SatlinkRole(role, str(self.control(run_dir, role))).stats()
            except ClarkeError as e:
                out[role] = {"error": str(e)}
        return out

    def link_bytes(self, plan: Plan, run_dir: Path, direction: str) -> int | None:
        """IP bytes the shaping station has put on the link in `direction` so far."""
        role = "gateway" if direction == "forward" else "terminal"
        try:
            stats = SatlinkRole(role, str(self.control(run_dir, role))).stats()
            return int(stats[direction]["bytes_out"])
        except (ClarkeError, KeyError, TypeError, ValueError):
            return None

    def reset_stats(self, run_dir: Path) -> None:
        for role in ("terminal", "satellite", "gateway"):
            SatlinkRole(role, str(self.control(run_dir, role))).reset_stats()


def answers(role: str, sock: Path) -> bool:
    if not sock.exists():
        return False
    try:
        SatlinkRole(role, str(sock)).health()
    except (ClarkeError, OSError, ValueError):
        return False
    return True


# --- netem -----------------------------------------------------------------------------


@cache
def netem_available() -> tuple[bool, str]:
    """Try a netem qdisc in a scratch namespace; (available, reason)."""
    if os.geteuid() != 0 or shutil.which("tc") is None:
        return False, "cannot probe (needs root and tc)"
    ns = f"{PROBE_PREFIX}{os.getpid()}"
    try:
        netns.add(ns)
        netns.batch(ns, ["link add probe0 type veth peer name probe1", "link set probe0 up"])
        proc = sh.run(
            ["tc", "-n", ns, "qdisc", "add", "dev", "probe0", "root", "netem", "delay", "1ms"],
            check=False,
        )
        if proc.returncode == 0:
            return True, "netem qdisc available"
        return False, f"this kernel has no netem qdisc ({proc.stderr.strip() or 'tc failed'})"
    except ClarkeError as e:
        return False, f"netem probe failed: {e}"
    finally:
        with contextlib.suppress(ClarkeError):
            netns.delete(ns)


def netem_args(d: Direction) -> list[str]:
    """One direction as netem arguments. netem has no bit error rate: a BER becomes the
    loss probability of a 1500-byte packet."""
    args = ["delay", f"{d.one_way_delay_ms}ms"]
    if d.rate_mbps > 0:
        args += ["rate", f"{d.rate_mbps}mbit"]
    mtu_bytes = 1500
    if hasattr(d.queue, "bytes"):
        limit = max(1, d.queue.bytes // mtu_bytes)  # type: ignore[union-attr]
    else:
        rate = d.rate_mbps or 1000
        limit = max(1, int(rate * 1e6 * d.queue.ms / 1000 / 8 / mtu_bytes))  # type: ignore[union-attr]
    # netem's limit also holds the packets in flight on the delay line.
    in_flight = int((d.rate_mbps or 1000) * 1e6 * d.one_way_delay_ms / 1000 / 8 / mtu_bytes)
    args += ["limit", str(limit + in_flight)]
    if d.loss is not None:
        p = getattr(d.loss, "packet_rate", None)
        if p is None:
            p = 1 - (1 - d.loss.bit_error_rate) ** (mtu_bytes * 8)  # type: ignore[union-attr]
        args += ["loss", f"{100 * p:.6f}%"]
    return args


class Netem:
    name = "netem"

    def check(self) -> None:
        ok, why = netem_available()
        if not ok:
            raise EnvironmentProblem(f"netem backend unavailable: {why}; use --backend satlink")

    def _qdiscs(self, plan: Plan, profile: LinkProfile, verb: str) -> None:
        # Return direction leaves the terminal, forward leaves the gateway.
        for role, d in (("terminal", profile.return_), ("gateway", profile.forward)):
            sh.run(
                [
                    "tc",
                    "-n",
                    plan.ns(role),
                    "qdisc",
                    verb,
                    "dev",
                    IF_EMU,
                    "root",
                    "netem",
                    *netem_args(d),
                ]
            )

    def wire(self, tb: Wiring, profile: LinkProfile) -> None:
        plan = tb.plan
        for role, remote, peer in (
            ("terminal", plan.gw_lan, "gateway"),
            ("gateway", plan.st_lan, "terminal"),
        ):
            via = plan.emu.address(peer)
            netns.batch(plan.ns(role), [f"route add {remote.prefix} via {via} dev {IF_EMU}"])
        self._qdiscs(plan, profile, "add")

    def apply(self, plan: Plan, run_dir: Path, profile: LinkProfile) -> None:
        self._qdiscs(plan, profile, "change")

    def link_bytes(self, plan: Plan, run_dir: Path, direction: str) -> int | None:
        role = "gateway" if direction == "forward" else "terminal"
        try:
            return int(self.stats(plan, run_dir)[role][0]["bytes"])
        except (KeyError, IndexError, TypeError, ValueError):
            return None

    def stats(self, plan: Plan, run_dir: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for role in ("terminal", "gateway"):
            proc = sh.run(
                ["tc", "-n", plan.ns(role), "-s", "-j", "qdisc", "show", "dev", IF_EMU], check=False
            )
            try:
                out[role] = json.loads(proc.stdout or "[]")
            except json.JSONDecodeError:
                out[role] = {"error": proc.stderr.strip()}
        return out


# --- opensand (seam) ---------------------------------------------------------------------


class OpenSand:
    """OpenSAND 8.x ST / SAT / GW. The configuration generator (profile -> XML, see the
    OpenSAND reference notes) arrives with the compose work; `wire` will then start
    `opensand` in the three link namespaces through Wiring.start, like satlink."""

    name = "opensand"

    def check(self) -> None:
        raise EnvironmentProblem(
            "the opensand backend is not wired into the netns testbed yet (its "
            "configuration comes with the compose substrate); use --backend satlink"
        )

    def wire(self, tb: Wiring, profile: LinkProfile) -> None:
        raise NotImplementedError

    def apply(self, plan: Plan, run_dir: Path, profile: LinkProfile) -> None:
        raise NotImplementedError

    def stats(self, plan: Plan, run_dir: Path) -> dict[str, Any]:
        return {}


def select(name: str) -> Backend:
    """`auto` means satlink (it needs no kernel qdisc)."""
    if name == "auto":
        name = "satlink"
    if name == "satlink":
        return Satlink()
    if name == "netem":
        return Netem()
    if name == "opensand":
        return OpenSand()
    raise UnknownName("link backend", name, ["auto", *NAMES])


def describe_netem() -> str:
    ok, why = netem_available()
    return f"netem: {'available' if ok else 'not available'} ({why})"
