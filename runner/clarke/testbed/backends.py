"""Link emulation backends behind one interface.

    satlink   the built-in user-space emulator (satlink/): ST, SAT and GW processes in
              the terminal, satellite and gateway namespaces, UDP carriers over the
              emulation network, a TUN device at ST and GW. The default.
    netem     Linux `tc netem` on the terminal's and the gateway's emulation-network
              interfaces, where the kernel has it (detected in a scratch namespace).
    opensand  OpenSAND 8.2 ST, SAT and GW in the same namespaces, XML generated from the
              profile (clarke.link.opensand), each entity run by opensand/entrypoint.sh.

A backend checks its environment before anything is created (`check`), then wires the
link between terminal and gateway in namespaces that lifecycle.py has already built
(`wire`), can apply another profile to a running link (`apply`) and report counters
(`stats`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from clarke import paths, sh
from clarke.agent.roles import SatlinkRole
from clarke.errors import ClarkeError, EnvironmentProblem, UnknownName
from clarke.link import opensand, opensand_role
from clarke.link.profiles import Direction, LinkProfile
from clarke.testbed import netns
from clarke.testbed.plan import BRIDGE_EMU, IF_EMU, IF_LAN, IF_SAT, Addresses, Plan

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

    def link_bytes(self, plan: Plan, run_dir: Path, direction: str) -> tuple[int, float] | None:
        """IP bytes the shaping station has put on the link in `direction` so far, and
        when it counted them on its own clock (seconds)."""
        role = "gateway" if direction == "forward" else "terminal"
        try:
            stats = SatlinkRole(role, str(self.control(run_dir, role))).stats()
            return int(stats[direction]["bytes_out"]), float(stats["uptime_s"])
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


# --- opensand ----------------------------------------------------------------------------


def opensand_entrypoint() -> Path | None:
    """$CLARKE_OPENSAND_ENTRYPOINT, else the checkout's opensand/entrypoint.sh, else
    `opensand-entrypoint` on PATH (as installed in the opensand image)."""
    env = os.environ.get("CLARKE_OPENSAND_ENTRYPOINT")
    if env:
        return Path(env)
    root = paths.source_root()
    if root is not None and (root / "opensand" / "entrypoint.sh").is_file():
        return root / "opensand" / "entrypoint.sh"
    found = shutil.which("opensand-entrypoint")
    return Path(found) if found else None


class OpenSand:
    """OpenSAND 8.2 ST / SAT / GW in the terminal, satellite and gateway namespaces. One
    generator, two substrates: the XML comes from clarke.link.opensand and every entity is
    wired and run by opensand/entrypoint.sh (TAP `opensand_tap` and bridge `opensand_br`
    at GW and ST with the sat network's addresses, the remote LAN routed into it), as in
    the opensand image. The entities start through Wiring.start (recorded in the state
    file, stopped by `down`) in OpenSAND's order SAT, GW, ST, each once `entrypoint.sh
    health` answers; `wire` returns once an echo crosses the link (the ST has logged on).

    In the run dir: opensand/xml/{gw,st,sat}/ and MAPPING.md, opensand/run/<entity>/
    (the entrypoint's pid file), opensand/link.json (the mapped values), and the logs
    opensand-<role>.log. Counters: see clarke.link.opensand_role (TAP byte counters
    include a 14-byte Ethernet header per frame, subtracted here)."""

    name = "opensand"
    START_TIMEOUT_S = 60.0
    LOGON_TIMEOUT_S = 60.0

    def __init__(self) -> None:
        self.entrypoint: Path | None = None

    def check_profile(self, profile: LinkProfile, source: str = "link profile") -> None:
        """InputError naming every profile field OpenSAND cannot emulate (e.g. lan)."""
        opensand.derive(profile, source)

    def check(self) -> None:
        opensand_role.require_opensand()
        entry = opensand_entrypoint()
        if entry is None or not os.access(entry, os.X_OK):
            raise EnvironmentProblem(
                f"the OpenSAND entrypoint is missing ({entry or 'opensand/entrypoint.sh'}): "
                "run from a Clarke checkout, or set CLARKE_OPENSAND_ENTRYPOINT"
            )
        self.entrypoint = entry

    # --- where things are ------------------------------------------------------------
    @staticmethod
    def home(run_dir: Path) -> Path:
        return run_dir / "opensand"

    @classmethod
    def pid_dir(cls, run_dir: Path, role: str) -> Path:
        return cls.home(run_dir) / "run" / opensand_role.ENTITY_OF[role]

    @staticmethod
    def emu_iface(role: str) -> str:
        """The satellite's emulation address is on the bridge itself."""
        return BRIDGE_EMU if role == "satellite" else IF_EMU

    @staticmethod
    def entities(plan: Addresses) -> opensand.Entities:
        return opensand.Entities(
            gw_emu=plan.emu.address("gateway"),
            st_emu=plan.emu.address("terminal"),
            sat_emu=plan.emu.address("satellite"),
        )

    def _entry(self) -> Path:
        if self.entrypoint is None:
            self.check()
        assert self.entrypoint is not None
        return self.entrypoint

    def argv(self, plan: Addresses, run_dir: Path, role: str) -> list[str]:
        """The entrypoint with the environment it documents, for one link role."""
        end = None
        if role != "satellite":
            peer = "gateway" if role == "terminal" else "terminal"
            end = opensand_role.LinkEnd(
                br_address=plan.sat.cidr(role),
                peer_br_address=plan.sat.address(peer),
                remote_lans=(str(plan.remote_lan(role).prefix),),
                lan_iface=IF_LAN,
            )
        env = opensand_role.entrypoint_env(
            opensand_role.ENTITY_OF[role],
            self.home(run_dir) / "xml",
            self.pid_dir(run_dir, role),
            self.emu_iface(role),
            end,
        )
        return ["env", *(f"{k}={v}" for k, v in env.items()), str(self._entry())]

    # --- up, apply ---------------------------------------------------------------------
    def _write(self, plan: Plan, run_dir: Path, profile: LinkProfile, source: str) -> None:
        m = opensand.derive(profile, source)
        home = self.home(run_dir)
        opensand.write(profile, self.entities(plan), home / "xml", source)
        link = {
            "id": plan.id,
            "delay_value_ms": m.delay_value_ms,
            "expected_rtt_ms": m.expected_rtt_ms,
            "forward_bandwidth_khz": m.forward_bandwidth_khz,
            "cra_kbps": m.cra_kbps,
            "forward_fifo_packets": m.forward_fifo_packets,
            "return_fifo_packets": m.return_fifo_packets,
            "notes": m.notes,
        }
        (home / "link.json").write_text(json.dumps(link, indent=2))
        (home / "baseline.json").unlink(missing_ok=True)  # new TAP devices count from 0

    def _healthy(self, plan: Plan, run_dir: Path, role: str) -> bool:
        entity = opensand_role.ENTITY_OF[role]
        return opensand_role.health_ok(
            self._entry(), entity, self.pid_dir(run_dir, role), plan.ns(role)
        )

    def _start_all(self, tb: Wiring) -> None:
        from clarke.testbed import procs

        plan, run_dir = tb.plan, tb.run_dir
        for role in opensand_role.START_ORDER:
            self.pid_dir(run_dir, role).mkdir(parents=True, exist_ok=True)
            proc = tb.start(role, f"opensand-{role}", self.argv(plan, run_dir, role))
            procs.wait_ready(
                proc,
                lambda role=role: self._healthy(plan, run_dir, role),
                timeout=self.START_TIMEOUT_S,
            )
        self._wait_logon(plan, run_dir)

    def _wait_logon(self, plan: Plan, run_dir: Path) -> None:
        """Until an echo crosses the link, terminal -> gateway's bridge address: the ST
        has logged on to the GW through the SAT."""
        argv = netns.exec_argv(
            plan.ns("terminal"),
            [
                sys.executable,
                "-m",
                "clarke.testbed.echo",
                plan.sat.address("gateway"),
                "--count",
                "1",
                "--timeout",
                "2",
            ],
        )
        deadline = time.monotonic() + self.LOGON_TIMEOUT_S
        while time.monotonic() < deadline:
            proc = sh.run(argv, check=False, timeout=30)
            with contextlib.suppress(ValueError):
                if json.loads(proc.stdout).get("rtts_ms"):
                    return
        raise EnvironmentProblem(
            f"no echo crossed the OpenSAND link (terminal -> gateway) within "
            f"{self.LOGON_TIMEOUT_S:.0f} s; see opensand-*.log in {run_dir}"
        )

    def wire(self, tb: Wiring, profile: LinkProfile) -> None:
        plan, run_dir = tb.plan, tb.run_dir
        self._write(plan, run_dir, profile, "link profile")
        # The SAT sends to GW and ST by UDP multicast: the emulation bridge floods it
        # rather than relying on IGMP snooping without a querier.
        netns.batch(plan.ns("satellite"), [f"link set {BRIDGE_EMU} type bridge mcast_snooping 0"])
        self._start_all(tb)

    def apply(
        self, plan: Plan, run_dir: Path, profile: LinkProfile, name: str | None = None
    ) -> None:
        """Another profile on a running testbed: OpenSAND reads its configuration only at
        start, so the three entities are stopped, the XML regenerated and the entities
        started again in order. The state file follows: the old processes leave it, the
        new ones enter it, and with `name` its profile becomes `name`."""
        from clarke.errors import InputError
        from clarke.testbed import lifecycle, procs
        from clarke.testbed.state import Store

        source = f"link profile {name!r}" if name else "link profile"
        opensand.derive(profile, source)  # refused before anything is touched
        store = Store(run_dir.parent)  # the run dir is <state dir>/<id>
        state = store.load(plan.id)
        if state is None or state.backend != self.name:
            raise InputError(f"testbed {plan.id} is not an opensand testbed in {store.root}")
        old = [p for p in state.processes if p.name.startswith("opensand-")]
        procs.stop(old)
        state.processes = [p for p in state.processes if p not in old]
        if name:
            state.profile = name
        store.save(state)
        tb = lifecycle.Builder(store, state, plan, run_dir)
        self._write(plan, run_dir, profile, source)
        self._start_all(tb)

    # --- counters --------------------------------------------------------------------
    def _counters(self, plan: Plan) -> dict[str, dict[str, dict[str, int] | None]]:
        out: dict[str, dict[str, dict[str, int] | None]] = {}
        for role in opensand_role.START_ORDER:
            ns = plan.ns(role)
            out[role] = {"emu": opensand_role.link_counters(self.emu_iface(role), ns)}
            if role != "satellite":
                out[role]["tap"] = opensand_role.link_counters(opensand.TAP_IFACE, ns)
        return out

    def _pid(self, run_dir: Path, role: str) -> int | None:
        try:
            pid = int((self.pid_dir(run_dir, role) / "opensand.pid").read_text())
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except (OSError, ValueError):
            return None
        return pid if comm == "opensand" else None

    def stats(self, plan: Plan, run_dir: Path) -> dict[str, Any]:
        """Per role: whether OpenSAND runs, its CPU seconds, the emulation interface's
        and (GW, ST) the TAP's counters since reset_stats; `bytes_onto_link` per
        direction (IP bytes, counted where the link delivers them); the mapped values."""
        try:
            base = json.loads((self.home(run_dir) / "baseline.json").read_text())
        except (OSError, ValueError):
            base = {}
        out: dict[str, Any] = {}
        counters = self._counters(plan)
        for role, devs in counters.items():
            pid = self._pid(run_dir, role)
            out[role] = {
                "entity": opensand_role.ENTITY_OF[role],
                "running": pid is not None,
                "pid": pid,
                "cpu_s": opensand_role.cpu_seconds(pid),
                **{
                    dev: opensand_role.since(now, base.get(role, {}).get(dev))
                    for dev, now in devs.items()
                },
            }
        onto: dict[str, int] = {}
        for role, direction in opensand_role.DELIVERS.items():
            tap = out[role].get("tap")
            if tap is not None:
                onto[direction] = opensand_role.ip_bytes(tap, "rx")
        out["bytes_onto_link"] = onto
        with contextlib.suppress(OSError, ValueError):
            out["link"] = json.loads((self.home(run_dir) / "link.json").read_text())
        return out

    def link_bytes(self, plan: Plan, run_dir: Path, direction: str) -> int | None:
        """IP bytes the link has carried in `direction` since the entities started: the
        receiving station's TAP rx counter (what OpenSAND delivered to the kernel there)
        less 14 bytes of Ethernet header per frame. The profiles OpenSAND takes lose
        nothing on the channel and the delay is constant, so this is what the sending
        station put onto the link, one one-way delay later. (The sending TAP's tx counts
        what entered OpenSAND, including packets its FIFO or its GSE encapsulation drop.)"""
        role = "terminal" if direction == "forward" else "gateway"
        tap = opensand_role.link_counters(opensand.TAP_IFACE, plan.ns(role))
        return None if tap is None else opensand_role.ip_bytes(tap, "rx")

    def reset_stats(self, run_dir: Path) -> None:
        """The counters cannot be zeroed: stats() reports them since this baseline."""
        from clarke.testbed.plan import plan as plan_of

        link = json.loads((self.home(run_dir) / "link.json").read_text())
        counters = self._counters(plan_of(int(link["id"])))
        (self.home(run_dir) / "baseline.json").write_text(json.dumps(counters))


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


def check_profile(backend: Backend, profile: LinkProfile, source: str) -> None:
    """Refuse a profile the backend cannot emulate (InputError naming each field), before
    anything is created. Only opensand refuses any: its generator maps every field."""
    check = getattr(backend, "check_profile", None)
    if check is not None:
        check(profile, source)


def describe_netem() -> str:
    ok, why = netem_available()
    return f"netem: {'available' if ok else 'not available'} ({why})"
