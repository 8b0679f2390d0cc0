"""OpenSAND 8.2 as the terminal, satellite or gateway role (docs/opensand.md).

`OpenSandRole` supervises one OpenSAND entity (ST, SAT or GW) as a child process: it
generates that entity's XML from a link profile (`clarke.link.opensand`), runs the
opensand image's entrypoint (`opensand/entrypoint.sh`, installed in the image as
/usr/local/bin/opensand-entrypoint), which wires the entity's network and then execs
OpenSAND, and waits until `entrypoint health` answers. `configure` applies another
profile: OpenSAND reads its configuration only at start, so the entity is stopped,
regenerated and started again; the call returns once it runs again. It serves the role
agent in the compose stack (`clarke serve ROLE --implementation opensand`) and runs in a
network namespace too (`netns=`, for tests).

The link roles' agent contract, the same whatever emulates the link:

    POST /config  {"name": "geo", "profile": LinkProfile.model_dump(by_alias=True,
                   mode="json")}  ->  {"applied": "geo", ...}
    GET /stats    {"running", "restarts", "profile", "tap": {...}, "emu": {...},
                   "bytes_onto_link": {direction: bytes}, "cpu_s", ...}

The runner configures the satellite, then the gateway, then the terminal (OpenSAND's
start order: the terminal logs on to the gateway through the satellite).

Counters. The GW's and the ST's TAP device `opensand_tap` is where IP packets enter and
leave the emulated link, as Ethernet frames: its byte counters include the 14-byte
Ethernet header of every frame (the kernel counts the whole frame a TAP reader or writer
moves), so IP bytes are `bytes - 14 x packets`. `rx` on a TAP counts what OpenSAND wrote
to the kernel, i.e. what the link delivered at this end; `tx` what the kernel handed to
OpenSAND to send, including packets OpenSAND then drops in its FIFO or in its GSE
encapsulation. The profiles OpenSAND is given here lose nothing on the channel (lossy
profiles are refused, the channel is clear sky) and the delay is constant, so the bytes
delivered at the far end are exactly the bytes put onto the link, one one-way delay
later: `bytes_onto_link` is counted by the receiving station (the terminal for forward,
the gateway for return)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from clarke import __version__, sh
from clarke.agent.roles import link_profile_of
from clarke.errors import EnvironmentProblem, InputError
from clarke.link import opensand, profiles
from clarke.link.profiles import LinkProfile

if TYPE_CHECKING:
    from clarke.testbed.plan import Addresses

log = logging.getLogger(__name__)

ENTITY_OF: Final = {"terminal": "st", "satellite": "sat", "gateway": "gw"}
START_ORDER: Final = ("satellite", "gateway", "terminal")
# The direction whose packets a station's TAP device receives from the link.
DELIVERS: Final = {"terminal": "forward", "gateway": "return"}
ETHERNET_HEADER_BYTES: Final = 14
DEFAULT_ENTRYPOINT: Final = Path("/usr/local/bin/opensand-entrypoint")
SUPPORTED: Final = opensand.OPENSAND_VERSION  # "8.2"
HOW_TO_INSTALL: Final = (
    "install OpenSAND 8.2.0 from the OpenSAND project's Debian 12 (bookworm) packages "
    "(the CNES net4sat-packages repository: packages opensand, opensand-core and their "
    "libopensand-* and librle dependencies; docs/opensand.md), or use --backend satlink"
)
STOP_TIMEOUT_S: Final = 5.0


# --- helpers shared with the netns backend (clarke.testbed.backends.OpenSand) ---------


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
    from clarke.testbed.procs import cpu_ticks

    ticks = cpu_ticks(pid)
    return None if ticks is None else ticks / os.sysconf("SC_CLK_TCK")


# --- the role ----------------------------------------------------------------------------


class OpenSandRole:
    """terminal, satellite or gateway, filled by one OpenSAND 8.2 entity.

    role            terminal | satellite | gateway (entity ST, SAT, GW)
    entities        the emulation-network addresses (and ids) of all three entities
    emu_iface       this entity's interface on the emulation network
    config_dir      where the entity's XML is written (<config_dir>/<st|sat|gw>/)
    profile_name, profile   the initial link profile (profile None: the shipped one)
    link_end        GW and ST: bridge addresses and the remote LAN(s) (LinkEnd)
    run_dir         the entrypoint's OPENSAND_RUN_DIR (pid file) and the entity's log
    entrypoint      opensand/entrypoint.sh (in the image: /usr/local/bin/opensand-entrypoint)
    netns           run the entity in this network namespace (None: here)
    """

    implementation = "opensand"

    def __init__(
        self,
        role: str,
        entities: opensand.Entities,
        *,
        emu_iface: str,
        config_dir: Path,
        profile_name: str,
        profile: LinkProfile | None = None,
        link_end: LinkEnd | None = None,
        run_dir: Path = Path("/run/opensand"),
        entrypoint: Path = DEFAULT_ENTRYPOINT,
        netns: str | None = None,
        start_timeout_s: float = 60.0,
    ) -> None:
        if role not in ENTITY_OF:
            raise InputError(f"OpenSAND role must be one of {', '.join(ENTITY_OF)}, not {role!r}")
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
        self.entities, self.emu_iface, self.link_end = entities, emu_iface, link_end
        self.config_dir, self.run_dir = Path(config_dir), Path(run_dir)
        self.entrypoint, self.netns = Path(entrypoint), netns
        self.start_timeout_s = start_timeout_s
        self.profile_name = profile_name
        self.profile = profile if profile is not None else profiles.load(profile_name)
        self.mapping = opensand.derive(self.profile, f"link profile {profile_name!r}")
        self.restarts = 0
        self._starts = 0
        self._child: subprocess.Popen[bytes] | None = None
        self._baseline: dict[str, dict[str, int] | None] = {}
        self._lock = threading.RLock()

    @classmethod
    def for_compose(
        cls, role: str, plan: Addresses, profile_name: str, profile: LinkProfile | None = None
    ) -> OpenSandRole:
        """The role in its container of the compose stack: addresses from the plan, the
        interfaces found by their addresses, paths from the image's environment
        (OPENSAND_CONFIG_DIR, OPENSAND_RUN_DIR, OPENSAND_ENTRYPOINT)."""
        from clarke.compose import containers

        entities = opensand.Entities(
            gw_emu=plan.emu.address("gateway"),
            st_emu=plan.emu.address("terminal"),
            sat_emu=plan.emu.address("satellite"),
        )
        end = None
        if role in ("terminal", "gateway"):
            peer = "gateway" if role == "terminal" else "terminal"
            lan = plan.st_lan if role == "terminal" else plan.gw_lan
            end = LinkEnd(
                br_address=plan.sat.cidr(role),
                peer_br_address=plan.sat.address(peer),
                remote_lans=(str(plan.remote_lan(role).prefix),),
                lan_iface=containers.interface_of(lan.address(role)),
            )
        env = os.environ
        return cls(
            role,
            entities,
            emu_iface=containers.interface_of(plan.emu.address(role)),
            config_dir=Path(env.get("OPENSAND_CONFIG_DIR") or "/etc/opensand"),
            run_dir=Path(env.get("OPENSAND_RUN_DIR") or "/run/opensand"),
            entrypoint=Path(env.get("OPENSAND_ENTRYPOINT") or DEFAULT_ENTRYPOINT),
            profile_name=profile_name,
            profile=profile,
            link_end=end,
        )

    # --- paths and commands ----------------------------------------------------------
    @property
    def log_path(self) -> Path:
        return self.run_dir / f"opensand-{self.entity}.log"

    @property
    def pid_file(self) -> Path:
        return self.run_dir / "opensand.pid"

    def _in_ns(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else list(argv)

    def _env(self) -> dict[str, str]:
        return entrypoint_env(
            self.entity, self.config_dir, self.run_dir, self.emu_iface, self.link_end
        )

    def _generate(self, profile: LinkProfile, name: str) -> dict[str, str]:
        """This entity's files; InputError (naming the field) for what OpenSAND cannot
        emulate, before anything is touched."""
        files = opensand.generate(profile, self.entities, f"link profile {name!r}")
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
            opensand.mapping_table(profile, f"link profile {name!r}"), encoding="utf-8"
        )

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Write the current profile's XML and start the entity; returns when
        `entrypoint health` answers (EnvironmentProblem with the log's tail if not)."""
        with self._lock:
            if self.alive():
                return
            if not self.entrypoint.is_file():
                raise EnvironmentProblem(
                    f"the OpenSAND entrypoint {self.entrypoint} is missing (opensand/entrypoint.sh)"
                )
            require_opensand()
            files = self._generate(self.profile, self.profile_name)
            self._write(files, self.profile, self.profile_name)
            self._spawn()

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
        ns = ["-n", self.netns] if self.netns else []
        if self.link_end is not None:
            for dev in (opensand.TAP_IFACE, opensand.BRIDGE_IFACE):
                sh.run(["ip", *ns, "link", "del", "dev", dev], check=False)
        sh.run(["ip", *ns, "route", "del", "224.0.0.0/4", "dev", self.emu_iface], check=False)

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

    # --- the role agent's contract -----------------------------------------------------
    def health(self) -> dict[str, Any]:
        child = self._child
        return {
            "role": self.role,
            "implementation": self.implementation,
            "clarke": __version__,
            "opensand": {
                "version": installed_version(),
                "running": self.alive(),
                "profile": self.profile_name,
                "entity": self.entity,
                "pid": child.pid if child is not None and self.alive() else None,
            },
        }

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        """Apply a link profile: validate and generate first (InputError, nothing
        touched), then stop the entity, write its XML and start it again."""
        profile = link_profile_of(body)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise InputError('POST /config for a link role needs "name": the profile\'s name')
        files = self._generate(profile, name)
        mapping = opensand.derive(profile, f"link profile {name!r}")
        with self._lock:
            self._stop_child()
            self._write(files, profile, name)
            self.profile_name, self.profile, self.mapping = name, profile, mapping
            self._spawn()
        return {
            "applied": name,
            "role": self.role,
            "implementation": self.implementation,
            "restarts": self.restarts,
            "delay_value_ms": mapping.delay_value_ms,
            "expected_rtt_ms": mapping.expected_rtt_ms,
        }

    def _counters(self) -> dict[str, dict[str, int] | None]:
        out = {"emu": link_counters(self.emu_iface, self.netns)}
        if self.link_end is not None:
            out["tap"] = link_counters(opensand.TAP_IFACE, self.netns)
        return out

    def stats(self) -> dict[str, Any]:
        counters = {k: since(v, self._baseline.get(k)) for k, v in self._counters().items()}
        child = self._child
        running = self.alive()
        out: dict[str, Any] = {
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
        if tap is not None:
            out["bytes_onto_link"] = {DELIVERS[self.role]: ip_bytes(tap, "rx")}
            out["bytes_into_opensand"] = {
                ("return" if self.role == "terminal" else "forward"): ip_bytes(tap, "tx")
            }
        return out

    def reset_stats(self) -> dict[str, Any]:
        self._baseline = self._counters()
        return {"reset": True, "role": self.role}


def wait_for(ready: Callable[[], bool], timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return True
        time.sleep(interval)
    return ready()
