"""One OpenSAND 8.2 entity (ST, SAT or GW) in one link role (docs/opensand.md).

`OpenSandRole` supervises the entity as a child process: it generates that entity's XML
from a link profile (clarke.link.opensand.xml), runs opensand/entrypoint.sh (in the
image: /usr/local/bin/opensand-entrypoint), which wires the entity's network and then
execs OpenSAND, and waits until `entrypoint health` answers. OpenSAND reads its
configuration only at start, so `configure` with another profile stops the entity,
regenerates its XML and starts it again (a no-op when the profile is in force); the
terminal's configure returns once it has logged on to the gateway through the
satellite (an echo crosses to the gateway's bridge address). The link roles take a
profile in the order satellite, gateway, terminal (vocab.LINK_START_ORDER).

Counters. The GW's and the ST's TAP device `opensand_tap` is where IP packets enter and
leave the emulated link, as Ethernet frames: its byte counters include the 14-byte
Ethernet header of every frame, so IP bytes are `bytes - 14 x packets`. `rx` on a TAP
counts what OpenSAND wrote to the kernel, i.e. what the link delivered at this end;
`tx` what the kernel handed to OpenSAND to send, including packets OpenSAND then drops
in its FIFO or in its GSE encapsulation. The profiles OpenSAND is given lose nothing on
the channel (lossy profiles are refused, the channel is clear sky) and the delay is
constant, so the bytes delivered at the far end are exactly the bytes put onto the
link, one one-way delay later: `bytes_onto_link` is counted by the receiving station
(vocab.RECEIVER: the terminal for forward, the gateway for return)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

from clarke import paths, sh
from clarke.errors import EnvironmentProblem, InputError
from clarke.json_value import JsonObject
from clarke.link.opensand import xml
from clarke.link.opensand.mapping import (
    BRIDGE_IFACE,
    OPENSAND_VERSION,
    TAP_IFACE,
    Entities,
    Mapping,
    derive,
    mapping_table,
)
from clarke.place import Place, procs
from clarke.profiles import LinkProfile
from clarke.roles import health_of, link_state, parse_link_config, profile_digest
from clarke.vocab import LINK_ROLES, receives, sends

log = logging.getLogger(__name__)

ENTITY_OF: Final = {"terminal": "st", "satellite": "sat", "gateway": "gw"}
ETHERNET_HEADER_BYTES: Final = 14
DEFAULT_ENTRYPOINT: Final = Path("/usr/local/bin/opensand-entrypoint")
SUPPORTED: Final = OPENSAND_VERSION  # "8.2"
HOW_TO_INSTALL: Final = (
    "install OpenSAND 8.2.0 from the OpenSAND project's Debian 12 packages with "
    "`sudo opensand/install.sh` (its own repository, or a mirror or local copy of it: "
    "docs/opensand.md, 'Getting OpenSAND'), or use --link satlink"
)
STOP_TIMEOUT_S: Final = 5.0
LOGON_TIMEOUT_S: Final = 60.0


def entrypoint_path() -> Path | None:
    """$CLARKE_OPENSAND_ENTRYPOINT or $OPENSAND_ENTRYPOINT (the image sets it), else the
    checkout's opensand/entrypoint.sh, else `opensand-entrypoint` on PATH."""
    env = os.environ.get("CLARKE_OPENSAND_ENTRYPOINT") or os.environ.get("OPENSAND_ENTRYPOINT")
    if env:
        return Path(env)
    root = paths.source_root()
    if root is not None and (root / "opensand" / "entrypoint.sh").is_file():
        return root / "opensand" / "entrypoint.sh"
    found = shutil.which("opensand-entrypoint")
    if found:
        return Path(found)
    return DEFAULT_ENTRYPOINT if DEFAULT_ENTRYPOINT.is_file() else None


# --- OpenSAND, its counters, its entrypoint ---------------------------------------------


def installed_version() -> str | None:
    """The version `opensand -V` prints ("8.2.0"), None when OpenSAND is not installed."""
    return _installed_version()


@cache
def _installed_version() -> str | None:
    try:
        proc = sh.run(["opensand", "-V"], check=False, timeout=10)
    except EnvironmentProblem:
        return None
    m = re.search(r"(\d+\.\d+(?:\.\d+)*)", proc.stdout + proc.stderr)
    return m.group(1) if m else None


def require_opensand() -> str:
    """OpenSAND 8.2's version, or EnvironmentProblem saying how to get it."""
    version = installed_version()
    if version is None:
        raise EnvironmentProblem(
            f"OpenSAND is not installed (no `opensand` on PATH): {HOW_TO_INSTALL}"
        )
    if version != SUPPORTED and not version.startswith(f"{SUPPORTED}."):
        raise EnvironmentProblem(
            f"OpenSAND {version} is installed; Clarke's configuration is made for OpenSAND "
            f"{SUPPORTED} (its XML schema changes between releases): {HOW_TO_INSTALL}"
        )
    return version


def link_counters(dev: str, ns: str | None = None) -> dict[str, int] | None:
    """A device's byte, packet and drop counters (`ip -s -j link show`), None if absent."""
    argv = ["ip", *(["-n", ns] if ns else []), "-s", "-j", "link", "show", "dev", dev]
    proc = sh.run(argv, check=False)
    if proc.returncode != 0:
        return None
    try:
        stats = json.loads(proc.stdout)[0]["stats64"]
    except (ValueError, IndexError, KeyError):
        return None
    return {
        f"{way}_{name}": int(stats[way][name])
        for way in ("rx", "tx")
        for name in ("bytes", "packets", "dropped", "errors")
    }


def ip_bytes(counters: dict[str, int], way: str) -> int:
    """IP bytes through a TAP device in one way (rx or tx): its byte counter counts whole
    Ethernet frames, so the 14-byte header of every frame comes off."""
    return counters[f"{way}_bytes"] - ETHERNET_HEADER_BYTES * counters[f"{way}_packets"]


def since(now: dict[str, int] | None, base: dict[str, int] | None) -> dict[str, int] | None:
    """Counters since a baseline; the raw ones when the device was made anew since."""
    if now is None or base is None or any(now.get(k, 0) < v for k, v in base.items()):
        return now
    return {k: v - base.get(k, 0) for k, v in now.items()}


@dataclass(frozen=True)
class LinkEnd:
    """GW and ST: the entity's end of the TAP network (bridge opensand_br)."""

    br_address: str  # this entity's address on opensand_br, CIDR
    peer_br_address: str  # the other ground entity's bridge address
    remote_lans: tuple[str, ...]  # prefixes behind the other ground entity
    lan_iface: str | None = None  # this entity's LAN interface (forwarding on)


def entrypoint_env(
    entity: str, config_dir: Path, run_dir: Path, emu_iface: str, end: LinkEnd | None
) -> dict[str, str]:
    """The environment opensand/entrypoint.sh documents, for one entity."""
    env = {
        "OPENSAND_ROLE": entity,
        "OPENSAND_CONFIG_DIR": str(config_dir),
        "OPENSAND_RUN_DIR": str(run_dir),
        "OPENSAND_EMU_IFACE": emu_iface,
        # OpenSAND's own warnings go to the entity's log, not to a syslog nobody reads.
        "OPENSAND_VERBOSE": "1",
    }
    if end is not None:
        env |= {
            "OPENSAND_BR_ADDRESS": end.br_address,
            "OPENSAND_PEER_BR_ADDRESS": end.peer_br_address,
            "OPENSAND_REMOTE_LAN": ",".join(end.remote_lans),
        }
        if end.lan_iface:
            env["OPENSAND_LAN_IFACE"] = end.lan_iface
    return env


def health_ok(entrypoint: Path, entity: str, run_dir: Path, ns: str | None = None) -> bool:
    """`entrypoint.sh health`: the entity's OpenSAND runs (and for GW / ST its TAP is up)."""
    argv = ["env", f"OPENSAND_ROLE={entity}", f"OPENSAND_RUN_DIR={run_dir}", str(entrypoint)]
    argv.append("health")
    if ns:
        argv = ["ip", "netns", "exec", ns, *argv]
    return sh.run(argv, check=False, timeout=15).returncode == 0


def tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def cpu_seconds(pid: int | None) -> float | None:
    """utime + stime of a process in seconds."""
    if pid is None:
        return None
    ticks = procs.cpu_ticks(pid)
    return None if ticks is None else ticks / os.sysconf("SC_CLK_TCK")


# --- the role ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EntitySetup:
    """Where an entity runs: its emulation interface, its configuration and run
    directories, the entrypoint that starts OpenSAND, its bridge and LAN (`link_end`:
    None for the satellite), the network namespace of its commands (tests) and how long
    it may take to start."""

    emu_iface: str
    config_dir: Path
    link_end: LinkEnd | None = None
    run_dir: Path = Path("/run/opensand")
    entrypoint: Path = DEFAULT_ENTRYPOINT
    netns: str | None = None
    start_timeout_s: float = 60.0


class OpenSandRole:
    """terminal, satellite or gateway, filled by one OpenSAND 8.2 entity.

    role            terminal | satellite | gateway (entity ST, SAT, GW)
    entities        the emulation-network addresses (and ids) of all three entities
    emu_iface       this entity's interface on the emulation network
    config_dir      where the entity's XML is written (<config_dir>/<st|sat|gw>/)
    link_end        GW and ST: bridge addresses and the remote LAN(s) (LinkEnd)
    run_dir         the entrypoint's OPENSAND_RUN_DIR (pid file) and the entity's log
    entrypoint      opensand/entrypoint.sh (in the image: /usr/local/bin/opensand-entrypoint)
    netns           run the entity in this network namespace (None: here)

    Nothing runs until the first configure names a profile."""

    implementation = "opensand"

    def __init__(self, role: str, entities: Entities, setup: EntitySetup) -> None:
        if role not in ENTITY_OF:
            raise InputError(f"OpenSAND role must be one of {', '.join(LINK_ROLES)}, not {role!r}")
        link_end = setup.link_end
        if (role == "satellite") != (link_end is None):
            raise InputError(
                f"OpenSAND {role}: "
                + (
                    "the satellite has no bridge or LAN (link_end must be None)"
                    if role == "satellite"
                    else "needs its bridge addresses and remote LAN (link_end)"
                )
            )
        self.role, self.entity = role, ENTITY_OF[role]
        self.entities, self.emu_iface, self.link_end = entities, setup.emu_iface, link_end
        self.config_dir, self.run_dir = Path(setup.config_dir), Path(setup.run_dir)
        self.entrypoint, self.netns = Path(setup.entrypoint), setup.netns
        self.start_timeout_s = setup.start_timeout_s
        self.profile_name: str | None = None
        self.digest: str | None = None
        self.mapping: Mapping | None = None
        self.restarts = 0
        self._starts = 0
        self._child: subprocess.Popen[bytes] | None = None
        self._baseline: dict[str, dict[str, int] | None] = {}
        self._lock = threading.RLock()

    @classmethod
    def for_place(cls, place: Place, entrypoint: Path) -> OpenSandRole:
        """The role in its place: addresses from the plan, interfaces found by their
        addresses; the image's OPENSAND_CONFIG_DIR and OPENSAND_RUN_DIR where set (its
        health check reads the latter), else the role's run dir."""
        plan, role = place.plan, place.role
        entities = Entities(
            gw_emu=plan.emu.address("gateway"),
            st_emu=plan.emu.address("terminal"),
            sat_emu=plan.emu.address("satellite"),
        )
        end = None
        if role != "satellite":
            peer = "gateway" if role == "terminal" else "terminal"
            end = LinkEnd(
                br_address=plan.sat.cidr(role),
                peer_br_address=plan.sat.address(peer),
                remote_lans=tuple(plan.remote_prefixes(role)),
                lan_iface=place.iface("st-lan" if role == "terminal" else "gw-lan"),
            )
        env = os.environ
        setup = EntitySetup(
            emu_iface=place.iface("emu"),
            config_dir=Path(env.get("OPENSAND_CONFIG_DIR") or place.run_dir / "xml"),
            run_dir=Path(env.get("OPENSAND_RUN_DIR") or place.run_dir / "opensand"),
            entrypoint=entrypoint,
            link_end=end,
            netns=place.ns,
        )
        return cls(role, entities, setup)

    # --- paths and commands ----------------------------------------------------------
    @property
    def log_path(self) -> Path:
        return self.run_dir / f"opensand-{self.entity}.log"

    @property
    def pid_file(self) -> Path:
        return self.run_dir / "opensand.pid"

    def _in_ns(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else list(argv)

    def _ip(self) -> list[str]:
        return ["ip", "-n", self.netns] if self.netns else ["ip"]

    def _env(self) -> dict[str, str]:
        return entrypoint_env(
            self.entity, self.config_dir, self.run_dir, self.emu_iface, self.link_end
        )

    def _generate(self, profile: LinkProfile, name: str) -> dict[str, str]:
        """This entity's files; InputError (naming the field) for what OpenSAND cannot
        emulate, before anything is touched."""
        files = xml.generate(
            profile, self.entities, f"link profile {name!r}", self.config_dir.resolve()
        )
        prefix = f"{self.entity}/"
        return {rel: text for rel, text in files.items() if rel.startswith(prefix)}

    def _write(self, files: dict[str, str], profile: LinkProfile, name: str) -> None:
        for rel, text in files.items():
            path = self.config_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        (self.config_dir / "MAPPING.md").write_text(
            mapping_table(profile, f"link profile {name!r}"), encoding="utf-8"
        )

    def _flood_multicast(self) -> None:
        """The SAT sends to GW and ST by UDP multicast: a bridge that holds the
        satellite's emulation address (netns) floods it rather than relying on IGMP
        snooping without a querier."""
        out = sh.run([*self._ip(), "-d", "-j", "link", "show", "dev", self.emu_iface]).stdout
        with contextlib.suppress(ValueError, IndexError, KeyError):
            if json.loads(out)[0]["linkinfo"]["info_kind"] == "bridge":
                sh.run(
                    [*self._ip(), "link", "set", "dev", self.emu_iface, "type", "bridge",
                     "mcast_snooping", "0"]
                )  # fmt: skip

    # --- lifecycle -------------------------------------------------------------------
    def _spawn(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.pid_file.unlink(missing_ok=True)
        with self.log_path.open("ab") as out:
            out.write(f"# profile {self.profile_name}: {self.entrypoint}\n".encode())
            out.flush()
            child = sh.spawn(
                self._in_ns([str(self.entrypoint)]),
                env={**os.environ, **self._env()},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: a Ctrl-C to the agent stays ours
            )
        self._child = child
        self._starts += 1
        self.restarts = self._starts - 1
        self._baseline = {}  # a new TAP device: its counters start from zero
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if child.poll() is not None:
                self._child = None
                raise self._failed(f"exited during start-up ({child.returncode})")
            if health_ok(self.entrypoint, self.entity, self.run_dir, self.netns):
                log.info("OpenSAND %s running (pid %d)", self.entity, child.pid)
                return
            if time.monotonic() > deadline:
                self._stop_child()
                raise self._failed(f"did not answer health within {self.start_timeout_s:.0f} s")
            time.sleep(0.2)

    def _wait_logon(self) -> None:
        """The terminal: until an echo crosses the link to the gateway's bridge address
        (the ST has logged on to the GW through the SAT)."""
        assert self.link_end is not None
        argv = self._in_ns(
            [sys.executable, "-m", "clarke.place.echo", self.link_end.peer_br_address,
             "--count", "1", "--timeout", "2"]
        )  # fmt: skip
        deadline = time.monotonic() + LOGON_TIMEOUT_S
        while time.monotonic() < deadline:
            proc = sh.run(argv, check=False, timeout=30)
            with contextlib.suppress(ValueError):
                if json.loads(proc.stdout).get("rtts_ms"):
                    return
        raise self._failed(
            f"did not log on: no echo crossed the link to the gateway within "
            f"{LOGON_TIMEOUT_S:.0f} s"
        )

    def _failed(self, what: str) -> EnvironmentProblem:
        text = tail(self.log_path)
        log.error("OpenSAND %s %s; its log %s ends:\n%s", self.entity, what, self.log_path, text)
        return EnvironmentProblem(
            f"OpenSAND {self.entity} ({self.role}) {what}; its log {self.log_path} ends:\n{text}"
        )

    def _stop_child(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if child.poll() is None:
            # Its own process group (start_new_session): OpenSAND, or the entrypoint
            # and an `opensand -c` it is running.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
            try:
                child.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait(timeout=STOP_TIMEOUT_S)
        self.pid_file.unlink(missing_ok=True)

    def _unwire(self) -> None:
        """Remove what the entrypoint made: TAP and bridge (their routes and neighbour go
        with them) and the multicast route on the emulation interface."""
        if self.link_end is not None:
            for dev in (TAP_IFACE, BRIDGE_IFACE):
                sh.run([*self._ip(), "link", "del", "dev", dev], check=False)
        sh.run([*self._ip(), "route", "del", "224.0.0.0/4", "dev", self.emu_iface], check=False)

    def stop(self) -> None:
        """Stop the entity (SIGTERM, SIGKILL after 5 s) and remove what the entrypoint
        made: TAP, bridge, multicast route, pid and role files."""
        with self._lock:
            self._stop_child()
            self._unwire()
            (self.run_dir / "opensand.role").unlink(missing_ok=True)

    def alive(self) -> bool:
        child = self._child
        return child is not None and child.poll() is None

    def problem(self) -> str | None:
        """The entity died (not while a configure restarts it)."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            child = self._child
            if child is not None and child.poll() is not None:
                return f"OpenSAND {self.entity} exited ({child.returncode})"
            return None
        finally:
            self._lock.release()

    # --- the role agent's contract -----------------------------------------------------
    def state(self) -> JsonObject:
        return link_state(self.profile_name, self.digest, self.alive())

    def health(self) -> JsonObject:
        child = self._child
        return health_of(
            self.role,
            self.implementation,
            opensand={
                "version": installed_version(),
                "running": self.alive(),
                "profile": self.profile_name,
                "entity": self.entity,
                "pid": child.pid if child is not None and self.alive() else None,
            },
        )

    def configure(self, body: JsonObject) -> JsonObject:
        """Apply a link profile: validate and generate first (InputError, nothing
        touched), then, unless it is in force already, stop the entity, write its XML
        and start it again."""
        name, profile = parse_link_config(body)
        files = self._generate(profile, name)
        mapping = derive(profile, f"link profile {name!r}")
        digest = profile_digest(profile)
        with self._lock:
            if self.alive() and (name, digest) == (self.profile_name, self.digest):
                return {"applied": False, "state": self.state()}
            self._stop_child()
            if self.role == "satellite" and self._starts == 0:
                self._flood_multicast()
            self._write(files, profile, name)
            self.profile_name, self.digest, self.mapping = name, digest, mapping
            self._spawn()
            if self.role == "terminal":
                self._wait_logon()
        return {
            "applied": True,
            "state": self.state(),
            "role": self.role,
            "implementation": self.implementation,
            "restarts": self.restarts,
            "delay_value_ms": mapping.delay_value_ms,
            "expected_rtt_ms": mapping.expected_rtt_ms,
        }

    def _counters(self) -> tuple[dict[str, dict[str, int] | None], float]:
        """The devices' counters, and when the TAP's (the link's) were read: the middle of
        that `ip` call on this host's monotonic clock, so that rates from samples do not
        depend on how long an agent request took on a busy host."""
        out = {"emu": link_counters(self.emu_iface, self.netns)}
        started = time.monotonic()
        if self.link_end is not None:
            out["tap"] = link_counters(TAP_IFACE, self.netns)
        return out, (started + time.monotonic()) / 2

    def stats(self) -> JsonObject:
        now, counted_at_s = self._counters()
        counters = {k: since(v, self._baseline.get(k)) for k, v in now.items()}
        child = self._child
        running = self.alive()
        out: JsonObject = {
            "role": self.role,
            "implementation": self.implementation,
            "entity": self.entity,
            "running": running,
            "restarts": self.restarts,
            "profile": self.profile_name,
            "cpu_s": cpu_seconds(child.pid) if child is not None and running else None,
            **counters,
        }
        tap = counters.get("tap")
        delivered, sent = receives(self.role), sends(self.role)
        if tap is not None and delivered and sent:
            out["bytes_onto_link"] = {delivered: ip_bytes(tap, "rx")}
            out["bytes_into_opensand"] = {sent: ip_bytes(tap, "tx")}
            out["counted_at_s"] = counted_at_s
        if self.mapping is not None:
            out["link"] = {
                "delay_value_ms": self.mapping.delay_value_ms,
                "expected_rtt_ms": self.mapping.expected_rtt_ms,
                "forward_bandwidth_khz": self.mapping.forward_bandwidth_khz,
                "cra_kbps": self.mapping.cra_kbps,
            }
        return out

    def reset_stats(self) -> JsonObject:
        self._baseline, _ = self._counters()
        return {"reset": True, "role": self.role}
