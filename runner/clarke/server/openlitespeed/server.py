"""OpenLiteSpeed in the testbed's server role (docs/openlitespeed.md).

`OpenLiteSpeedRole` runs OpenLiteSpeed (installed by images/openlitespeed/Dockerfile or
built by ci/openlitespeed-from-source)
behind the role agent of the compose stack's server container, with the contract of
origin's control endpoint (origin/README.md):

    POST /config        {"tcp_cc": "cubic|bbr|reno", "quic_cc": "cubic|bbr"} (any subset)
    GET /stats          {"settings", "connections": [connection records]}
    POST /stats/reset   forget the connections seen so far

How each setting reaches OpenLiteSpeed:
- QUIC congestion control: `quicCongestionCtrl` in the generated configuration
  (clarke.server.openlitespeed.config), applied by a graceful restart.
- TCP congestion control: OpenLiteSpeed has no setting for it; the kernel's choice
  applies. /proc/sys is read-only in an unprivileged container, so besides trying the
  sysctl the role sets `congctl` on the server's route towards the client LAN, which
  Linux applies to the server sockets accepted from there (needs NET_ADMIN only).

Where the connection records come from:
- the access log (written in clarke's LOG_FORMAT): requests, protocol, body bytes and
  the client's address and port, per request;
- for TCP, `ss -tin` sampled every 100 ms from POST /stats/reset to GET /stats (the
  page load): the congestion control as the kernel reports it, bytes sent and
  retransmitted, segments, cwnd, RTT; the last sample of each connection is kept until
  the next reset. Log lines join the sampled connections by the client's address and
  port.
- for HTTP/3 (clarke.server.openlitespeed.quic): the congestion controller each
  connection ran, from lsquic's debug log in the error log ("cc_source": "lsquic log"),
  and its packets and bytes on the wire from nftables counters per client socket.
  OpenLiteSpeed 1.9.1 logs HTTP/3 requests as HTTP/1.1: a request from a client socket
  that spoke QUIC to the server counts as h3.

The install is found by find_install() ($OLS_SERVER_ROOT, else /usr/local/lsws);
make_server_root() gives one install several server roots of their own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import grp
import ipaddress
import logging
import os
import pwd
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from clarke import sh, tls
from clarke.errors import ClarkeError, CommandFailed, EnvironmentProblem, InputError
from clarke.json_value import JsonObject
from clarke.place import Place, procs
from clarke.roles import health_of
from clarke.server.openlitespeed.config import DEFAULT_SERVER_ROOT, OlsSite, render, write
from clarke.server.openlitespeed.install import (
    INSTALL_ENV,
    check_master_can_reopen,
    find_install,
    install_problem,
    let_workers_in,
    make_server_root,
)
from clarke.server.openlitespeed.quic import (
    QuicWireCounter,
    merge_by_peer,
    parse_lsquic_log,
    read_new_lines,
)
from clarke.server.openlitespeed.settings import (
    QUIC_CC,
    TCP_CC,
    OlsSettings,
    settings_from_body,
)
from clarke.server.openlitespeed.stats import connection_records, read_log
from clarke.server.openlitespeed.tcp import TcpSampler, parse_listening
from clarke.server.tcp_cc import (
    apply_tcp_cc,
    available_tcp_cc,
    netns_argv,
)
from clarke.vocab import CongestionControl, Scheduler

log = logging.getLogger(__name__)

DEFAULT_PID_FILE: Final = Path("/tmp/lshttpd/lshttpd.pid")  # lswsctrl's, unless lsws_env
ERROR_LOG_KEEP_BYTES: Final = 256 * 1024 * 1024


# --- the role ------------------------------------------------------------------------------


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@dataclass(frozen=True)
class OlsPlace:
    """Where OpenLiteSpeed runs: the route towards the clients whose congctl sets TCP's
    congestion control (`client_lan` through `gateway`: both or neither), its install
    (`server_root`: bin/lswsctrl, conf/, VERSION), the network namespace of every
    command (tests), and its timings (start, the TCP sampler's interval, the wait for
    its logs to be written)."""

    client_lan: str | None = None
    gateway: str | None = None
    server_root: Path = DEFAULT_SERVER_ROOT
    netns: str | None = None
    start_timeout_s: float = 60.0
    sample_interval_s: float = 0.1
    log_flush_wait_s: float = 1.5


class OpenLiteSpeedRole:
    """The server role, filled by OpenLiteSpeed.

    site          what is served and where (OlsSite)
    settings      the congestion controls to start with
    client_lan, gateway   the route towards the clients whose congctl sets TCP's
                  congestion control (both or neither)
    server_root   OpenLiteSpeed's install (bin/lswsctrl, conf/, VERSION)
    netns         run every command in this network namespace (tests)
    """

    role = "server"
    implementation = "openlitespeed"

    def __init__(
        self, site: OlsSite, settings: OlsSettings | None = None, where: OlsPlace | None = None
    ) -> None:
        where = where or OlsPlace()
        client_lan, gateway = where.client_lan, where.gateway
        if (client_lan is None) != (gateway is None):
            raise InputError("client_lan and gateway go together: give both or neither")
        try:
            if client_lan is not None:
                client_lan = str(ipaddress.ip_network(client_lan))
            if gateway is not None:
                gateway = str(ipaddress.ip_address(gateway))
        except ValueError as e:
            raise InputError(f"client_lan / gateway: {e}") from None
        self.site, self.settings = site, settings or OlsSettings()
        self.client_lan, self.gateway = client_lan, gateway
        self.server_root, self.netns = Path(where.server_root), where.netns
        self.start_timeout_s, self.log_flush_wait_s = where.start_timeout_s, where.log_flush_wait_s
        self.tcp_applied: JsonObject | None = None
        self.restarts = 0
        self.sampler = TcpSampler(site.port, where.netns, where.sample_interval_s)
        self.quic_wire = QuicWireCounter(site.port, where.netns)
        self.quic_wire_error: str | None = None
        self._log_offset = 0
        self._error_log_offset = 0
        self._running_config: dict[str, str] | None = None
        self._version: str | None = None
        self._restarting = False
        self._lock = threading.RLock()
        self.children = procs.Children()  # besides OpenLiteSpeed: iperf3 -s for link checks
        self._started = False

    @classmethod
    def for_place(cls, place: Place) -> OpenLiteSpeedRole:
        """The role in its place: the server's address from the plan, the route towards
        the client LAN through the gateway, the testbed's certificate, and the place's
        own default congestion control to start. In a container the install is the
        server root; on a netns testbed the server root is the testbed's own
        (make_server_root under its run directory: its configuration, logs and shared
        memory are then no other testbed's)."""
        pki = tls.ensure_testbed_pki(place.pki_dir, label=place.substrate)
        site = OlsSite(
            pages_dir=place.pages_dir,
            cert_file=pki.cert,
            key_file=pki.key,
            listen_address=place.plan.addresses["server"],
        )
        root = Path(os.environ.get(INSTALL_ENV) or DEFAULT_SERVER_ROOT)
        if place.substrate == "netns":
            found = find_install()
            if found is None:
                raise EnvironmentProblem(install_problem())
            root = make_server_root(found, place.run_dir / "openlitespeed")
            site = dataclasses.replace(
                site,
                access_log=root / "logs" / "clarke-access.log",
                error_log=root / "logs" / "clarke-error.log",
                state_dir=root / "tmp" / "clarke",
            )
            let_workers_in(site, root)
        where = OlsPlace(
            client_lan=str(place.plan.st_lan.prefix),
            gateway=place.plan.next_hop("server"),
            server_root=root,
            netns=place.ns,
        )
        return cls(site, initial_settings(), where)

    # --- paths and commands ----------------------------------------------------------
    @property
    def lswsctrl(self) -> Path:
        return self.server_root / "bin" / "lswsctrl"

    @property
    def pid_file(self) -> Path:
        """lswsctrl's PIDFILE: bin/lsws_env may set it, else /tmp/lshttpd/lshttpd.pid."""
        env = self.server_root / "bin" / "lsws_env"
        with contextlib.suppress(OSError):
            m = re.search(r"^\s*PIDFILE=[\"']?([^\"'\s]+)", env.read_text(), re.MULTILINE)
            if m:
                return Path(m.group(1))
        return DEFAULT_PID_FILE

    def _ctl(self, action: str, timeout: float = 60) -> str:
        """`lswsctrl ACTION`, its output to a file: OpenLiteSpeed daemonizes without
        closing the standard output it inherits, so a pipe would never reach its end."""
        argv = netns_argv([str(self.lswsctrl), action], self.netns)
        out_path = self.site.error_log.parent / "lswsctrl.out"
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with out_path.open("ab") as out:
            start = out.tell()
            proc = sh.spawn(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise CommandFailed(f"timed out after {timeout:.0f} s: {sh.render(argv)}") from None
        with out_path.open("rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace").strip()
        if code != 0:
            raise CommandFailed(f"{sh.render(argv)} exited {code}: {text}")
        return text

    def pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.pid_file.read_text().strip())
            return pid if _pid_alive(pid) else None
        return None

    def version(self) -> str | None:
        """From the install's VERSION file, else `lshttpd -v` ("LiteSpeed/1.8.5 Open ...")."""
        if self._version is None:
            with contextlib.suppress(OSError):
                self._version = (self.server_root / "VERSION").read_text().strip() or None
        if self._version is None:
            lshttpd = self.server_root / "bin" / "lshttpd"
            with contextlib.suppress(ClarkeError):
                out = sh.run([str(lshttpd), "-v"], check=False, timeout=10).stdout
                m = re.search(r"(\d+\.\d+(?:\.\d+)*)", out)
                self._version = m.group(1) if m else None
        return self._version

    def listening(self) -> dict[str, bool]:
        """Whether OpenLiteSpeed's TCP and UDP sockets are bound on the listen port."""
        port = self.site.port
        want = {self.site.address, f"*:{port}", f"0.0.0.0:{port}", f"[::]:{port}"}
        out = {}
        for proto, flags in (("tcp", "-Hltn"), ("udp", "-Hlun")):
            argv = netns_argv(["ss", flags, "sport", "=", f":{self.site.port}"], self.netns)
            try:
                text = sh.run(argv, timeout=5).stdout
            except ClarkeError:
                text = ""
            out[proto] = any(addr in want for addr in parse_listening(text))
        return out

    def _wait_listening(self, what: str, old_pid: int | None = None) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            pid = self.pid()
            ready = pid is not None and pid != old_pid and all(self.listening().values())
            if ready:
                return
            if time.monotonic() > deadline:
                got = self.listening()
                raise EnvironmentProblem(
                    f"OpenLiteSpeed {what}: not listening on {self.site.address} (TCP "
                    f"{'yes' if got['tcp'] else 'no'}, UDP {'yes' if got['udp'] else 'no'}, "
                    f"pid {pid}) within {self.start_timeout_s:.0f} s; its error log "
                    f"{self.site.error_log} ends:\n{_tail(self.site.error_log)}"
                )
            time.sleep(0.2)

    def _prepare_logs(self) -> None:
        """The log files and the state directories exist and the workers' user can write
        them."""
        for sub in ("status", "shm"):
            (self.site.state_dir / sub).mkdir(parents=True, exist_ok=True)
        self._mark_fetched()
        # The workers write the real-time reports (statDir): observed with 1.9.1, a
        # root-owned directory makes them log "Failed to open the real time report"
        # every second.
        status = self.site.state_dir / "status"
        for path in (self.site.access_log, self.site.error_log, status):
            if path is not status:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch(exist_ok=True)
            if os.geteuid() == 0:
                with contextlib.suppress(KeyError, OSError):
                    uid = pwd.getpwnam(self.site.user).pw_uid
                    os.chown(path, uid, grp.getgrnam(self.site.group).gr_gid)

    def _mark_fetched(self) -> None:
        """OpenLiteSpeed checks for its own updates (autoupdate/release) and fetches
        QUIC.cloud's address list (tmp/download-quic-cloud-ips) a minute after start and
        every 30 minutes, unless those files are less than a day old: keep them fresh,
        so it sends nothing to the Internet (in a namespace without a route it could
        not anyway)."""
        for rel in ("autoupdate/release", "tmp/download-quic-cloud-ips"):
            path = self.server_root / rel
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()

    def _install_quic_counter(self) -> None:
        """The nftables counters for HTTP/3's wire bytes; without nft, say why once."""
        try:
            self.quic_wire.install()
            self.quic_wire_error = None
        except ClarkeError as e:
            self.quic_wire_error = f"nftables counters unavailable ({e}); install nftables"
            log.warning("%s", self.quic_wire_error)

    def _trim_error_log(self) -> int:
        """The error log's size, after emptying it if it grew past ERROR_LOG_KEEP_BYTES
        (lsquic's debug lines: OpenLiteSpeed appends with O_APPEND, so emptying the file
        under it is safe). Called between loads, never during one."""
        path = self.site.error_log
        try:
            size = path.stat().st_size
            if size > ERROR_LOG_KEEP_BYTES:
                os.truncate(path, 0)
                return 0
            return size
        except OSError:
            return 0

    def _apply_tcp(self, algo: str) -> None:
        self.tcp_applied = apply_tcp_cc(
            algo, client_lan=self.client_lan, gateway=self.gateway, netns=self.netns
        )

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Write the configuration, apply the TCP congestion control, start OpenLiteSpeed
        (lswsctrl start) and return once it listens on TCP and UDP."""
        with self._lock:
            if self.alive() and all(self.listening().values()):
                return
            if not self.lswsctrl.is_file():
                raise EnvironmentProblem(install_problem(self.server_root))
            write(self.server_root, self.site, self.settings)
            self._running_config = render(self.site, self.settings)
            self._prepare_logs()
            check_master_can_reopen([self.site.access_log, self.site.error_log])
            self._apply_tcp(self.settings.tcp_cc)
            log.warning("starting OpenLiteSpeed %s", self.version() or "(version unknown)")
            out = self._ctl("start")
            log.info("lswsctrl start: %s", out)
            self._wait_listening("start")
            self._install_quic_counter()
            self._log_offset = self.site.access_log.stat().st_size
            self._error_log_offset = self.site.error_log.stat().st_size
            self._started = True

    def stop(self) -> None:
        """lswsctrl stop (by the PID in its pid file), and the sampler."""
        with self._lock:
            self._started = False
            self.children.stop()
            self.sampler.stop()
            with contextlib.suppress(ClarkeError):
                self.quic_wire.remove()
            if self.pid() is None:
                return
            with contextlib.suppress(ClarkeError):
                self._ctl("stop", timeout=30)
            deadline = time.monotonic() + 20
            while self.pid() is not None and time.monotonic() < deadline:
                time.sleep(0.2)

    def alive(self) -> bool:
        """OpenLiteSpeed runs (during a graceful restart the pid file may name the old
        process for a moment: that counts as running)."""
        return self._restarting or self.pid() is not None

    def problem(self) -> str | None:
        """OpenLiteSpeed (or iperf3) died after it started."""
        if self._started and not self.alive():
            return "OpenLiteSpeed is not running"
        return self.children.exited()

    # --- the role agent's contract -----------------------------------------------------
    def state(self) -> JsonObject:
        return {
            "tcp_cc": self.settings.tcp_cc,
            "quic_cc": self.settings.quic_cc,
            "scheduler": Scheduler.own.value,
        }

    def settings_view(self) -> JsonObject:
        return {
            "tcp_cc": self.settings.tcp_cc,
            "quic_cc": self.settings.quic_cc,
            "quic_initial_window": None,
            "quicCongestionCtrl": self.settings.quic_congestion_ctrl,
            "tcp_cc_applied": self.tcp_applied,
        }

    def health(self) -> JsonObject:
        listening = self.listening()
        return health_of(
            self.role,
            self.implementation,
            openlitespeed={
                "version": self.version(),
                "settings": self.settings_view(),
                "listening": all(listening.values()),
                "listening_tcp": listening["tcp"],
                "listening_udp": listening["udp"],
                "running": self.alive(),
                "pid": self.pid(),
                "listen": self.site.address,
                "restarts": self.restarts,
                "quic_available": list(QUIC_CC),
                "tcp_available": available_tcp_cc(),
            },
        )

    def configure(self, body: JsonObject) -> JsonObject:
        """Apply {"tcp_cc", "quic_cc"} (any subset): checked first (InputError, nothing
        touched), then the configuration is rewritten, the TCP algorithm applied and
        OpenLiteSpeed restarted gracefully if its configuration changed."""
        with self._lock:
            new = settings_from_body(body, self.settings)
            if new == self.settings and self.tcp_applied is not None:
                return {"applied": False, "state": self.state(), "restarted": False}
            files = render(self.site, new)
            restart = files != self._running_config
            if restart:
                check_master_can_reopen([self.site.access_log, self.site.error_log])
            if self.tcp_applied is None or new.tcp_cc != self.settings.tcp_cc:
                self._apply_tcp(new.tcp_cc)
            write(self.server_root, self.site, new)
            self.settings = new
            if restart and self.pid() is not None:
                old = self.pid()
                self._restarting = True
                try:
                    out = self._ctl("restart", timeout=60)
                    log.info("lswsctrl restart: %s", out)
                    self._wait_listening("graceful restart", old_pid=old)
                finally:
                    self._restarting = False
                self.restarts += 1
            self._running_config = files
            return {
                "applied": True,
                "state": self.state(),
                "settings": self.settings_view(),
                "restarted": restart,
            }

    def stats(self) -> JsonObject:
        # OpenLiteSpeed writes its access log once a second: wait for the lines of every
        # request that ended before this call, then take a last sample, once the sampling
        # thread has stopped (its sample would be older). Sampling runs from
        # reset_stats() to here (the runner's reset, load, stats).
        time.sleep(self.log_flush_wait_s)
        self.sampler.stop()
        self.sampler.sample_now()
        got = read_log(self.site.access_log, self._log_offset)
        lsquic_lines, _, _ = read_new_lines(self.site.error_log, self._error_log_offset)
        quic_logs, _ = merge_by_peer(parse_lsquic_log(lsquic_lines))
        quic_wire = self.quic_wire.read() if self.quic_wire_error is None else {}
        records, notes = connection_records(
            self.sampler.snapshot(),
            got.lines,
            self.settings,
            self.site.address,
            quic_logs=quic_logs,
            quic_wire=quic_wire,
        )
        if self.quic_wire_error or self.quic_wire.last_error:
            notes.append(
                "HTTP/3 wire bytes not measured: "
                f"{self.quic_wire_error or self.quic_wire.last_error}"
            )
        if got.restarted:
            notes.append("the access log was rotated or truncated since the last reset")
        if self.sampler.last_error:
            notes.append(f"ss: {self.sampler.last_error}")
        return {
            "now_unix_ms": int(time.time() * 1000),
            "settings": self.settings_view(),
            "connections": records,
            "log": {
                "path": str(self.site.access_log),
                "requests": len(got.lines),
                "unparsed_lines": got.unparsed[:20],
            },
            "notes": notes,
        }

    def reset_stats(self) -> JsonObject:
        """Forget the connections and requests seen so far and sample `ss` until the next
        stats()."""
        removed = self.sampler.clear()
        try:
            self._log_offset = self.site.access_log.stat().st_size
        except OSError:
            self._log_offset = 0
        self._error_log_offset = self._trim_error_log()
        self._mark_fetched()
        if self.quic_wire_error is None:
            self.quic_wire.reset()
        self.sampler.start()
        return {"removed": removed, "log_offset": self._log_offset}


def initial_settings() -> OlsSettings:
    """The container's default TCP algorithm (compose sets it with sysctls:), and the
    same for QUIC where lsquic has it (else Cubic)."""
    try:
        tcp = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    except OSError:
        tcp = CongestionControl.cubic
    tcp = tcp if tcp in TCP_CC else CongestionControl.cubic
    return OlsSettings(tcp_cc=tcp, quic_cc=tcp if tcp in QUIC_CC else CongestionControl.cubic)
