"""Cross traffic during page loads (campaign/cross.py says what each kind is): its
generators run on the cross-traffic endpoints (xclient behind the terminal, xserver
behind the gateway), which the substrate supplies (testbed/cross.py on netns; the
compose stack has none and refuses).

    bulk-cubic, bulk-bbr  iperf3 TCP, `flows` parallel streams, -C cubic|bbr
    udp-cbr               iperf3 UDP, `rate_mbps` per stream (-u -b)
    rrul                  iperf3 TCP, 4 streams each way (--bidir) plus ping every 0.2 s:
                          flent's rrul defined with iperf3, since flent's own runner needs
                          netperf, which Debian does not ship
    web                   curl on xclient fetching the cell's page (its HTML and objects)
                          again and again, `flows` at a time over HTTPS/1.1, from a second
                          origin server on xserver (the testbed's pages and certificate),
                          so the page's own server sees only the browser

The iperf3 client runs on xclient and connects to the iperf3 server on xserver, as a
user's host opens connections to a server; `forward` traffic (gateway side to terminal
side, as pages travel) is iperf3's reverse mode. Started when a cell asks for it and
kept while consecutive loads ask for the same on the same profile; confirmed running
before the load (bytes moving on xclient's LAN interface in every asked direction, then
until its rate stops growing: slow start over), measured around the load (the same
counters), stopped when another cell asks for other traffic, before a link check and at
the end of the session."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from clarke import sh, tls
from clarke.campaign.cross import CrossKind, CrossTraffic, Direction
from clarke.errors import ClarkeError
from clarke.place.procs import Proc, tail
from clarke.results.details import CrossTrafficDuring, RttSummary
from clarke.vocab import CONGESTION_CONTROLS, CongestionControl

PORT: Final = 5201
WEB_PORT: Final = 443
WEB_CONTROL: Final = "127.0.0.1:7001"  # origin's control endpoint, xserver's own loopback
WEB_LOOPS: Final = 99_999_999  # curl's URL glob: fetches the page this often at most
DURATION_S: Final = 86_400  # iperf3's longest; stopped long before by the session
START_TIMEOUT_S: Final = 30.0  # GEO: handshake and iperf3's exchange take a few RTTs
SETTLE_MAX_S: Final = 20.0
WINDOW_S: Final = 1.0
PING_INTERVAL_S: Final = 0.2
DATA_BYTES: Final = 100_000  # a data connection has sent this much by the time it settled
_PING_LINE = re.compile(r"^\[(\d+\.\d+)\].*time=([\d.]+) ms")
_TCP: Final = {
    CrossKind.bulk_cubic: CongestionControl.cubic,
    CrossKind.bulk_bbr: CongestionControl.bbr,
    CrossKind.rrul: CongestionControl.cubic,
    CrossKind.web: CongestionControl.cubic,  # origin's --tcp-cc
}


class CrossEndpoints(Protocol):
    """What a substrate supplies for cross traffic (testbed.cross.NetnsCrossEndpoints)."""

    def address(self, endpoint: str) -> str: ...
    def argv(self, endpoint: str, argv: Sequence[str]) -> list[str]: ...
    def start(self, endpoint: str, name: str, argv: Sequence[str]) -> Proc: ...
    def stop(self, started: Sequence[Proc]) -> None: ...
    def alive(self, proc: Proc) -> bool: ...
    def byte_counters(self, endpoint: str) -> tuple[int, int]: ...
    @property
    def pages_dir(self) -> Path: ...  # the testbed's built pages (web)
    @property
    def pki_dir(self) -> Path: ...  # the testbed's CA and server certificate (web)


class CrossTrafficFailed(ClarkeError):
    kind = "Cross traffic"


def iperf3_client_argv(spec: CrossTraffic, server: str) -> list[str]:
    argv = ["iperf3", "-c", server, "-p", str(PORT), "-t", str(DURATION_S)]
    argv += ["-P", str(spec.n_flows), "-i", "0"]
    way = spec.way
    argv += {Direction.forward: ["-R"], Direction.return_: [], Direction.both: ["--bidir"]}[way]
    if spec.name is CrossKind.udp_cbr:
        argv += ["-u", "-b", f"{spec.rate:g}M"]
    else:
        argv += ["-C", _TCP[spec.name]]
    return argv


def web_argv(spec: CrossTraffic, server: str, page_paths: Sequence[str], ca: Path) -> list[str]:
    """curl fetching the page's files in turn, `flows` at a time, for ever (a URL glob
    curl expands as it goes), everything to /dev/null."""
    files = ",".join(p.lstrip("/") for p in page_paths)
    return [
        "curl", "--no-progress-meter", "--http1.1", "--cacert", str(ca),
        "--resolve", f"{tls.DEFAULT_HOST}:{WEB_PORT}:{server}",
        "--parallel", "--parallel-max", str(spec.n_flows), "--output", "/dev/null",
        f"https://{tls.DEFAULT_HOST}/{{{files}}}?n=[1-{WEB_LOOPS}]",
    ]  # fmt: skip


def directions(spec: CrossTraffic) -> list[str]:
    way = spec.way
    return ["forward", "return"] if way is Direction.both else [way.value]


@dataclass
class Sample:
    at: float
    received: int  # at xclient: forward
    sent: int  # at xclient: return

    def rates_mbps(self, later: Sample) -> dict[str, float]:
        dt = max(later.at - self.at, 1e-6)
        return {
            "forward": (later.received - self.received) * 8 / dt / 1e6,
            "return": (later.sent - self.sent) * 8 / dt / 1e6,
        }


Confirmed = float | dict[str, float] | list[str]  # a figure of the start (CrossTrafficDuring)


@dataclass
class Running:
    spec: CrossTraffic
    profile: str
    page: tuple[str, ...]
    procs: list[Proc]
    # How it was confirmed running (_confirm), and its flows' congestion control.
    started: dict[str, Confirmed] = field(default_factory=dict)


class CrossTrafficDriver:
    def __init__(self, endpoints: CrossEndpoints) -> None:
        self.endpoints = endpoints
        self.running: Running | None = None

    # --- start and stop ----------------------------------------------------------------
    def ensure(self, spec: CrossTraffic, profile: str, page: Sequence[str] = ()) -> None:
        """`spec` running on `profile` (restarted when the profile changed: a warmed-up
        flow belongs to the link it warmed up on); nothing running for `none`. `page`:
        the paths of the cell's page, which web fetches."""
        now = self.running
        page = tuple(page) if spec.name is CrossKind.web else ()
        same = now is not None and (now.spec, now.profile, now.page) == (spec, profile, page)
        if now is not None and same and all(self.endpoints.alive(p) for p in now.procs):
            return
        self.stop()
        if spec.active:
            self.running = self._start(spec, profile, page)

    def stop(self) -> None:
        now, self.running = self.running, None
        if now is not None:
            self.endpoints.stop(now.procs)

    def _start(self, spec: CrossTraffic, profile: str, page: tuple[str, ...]) -> Running:
        ep = self.endpoints
        server = ep.address("xserver")
        if spec.name is CrossKind.web:
            if not page:
                raise CrossTrafficFailed("web cross traffic needs the page a cell loads")
            port, listen, name = WEB_PORT, self._web_server(server), "cross-origin"
        else:
            port, name = PORT, "cross-iperf3-server"
            listen = ["iperf3", "-s", "-1", "-p", str(PORT), "-B", server]
        run = Running(spec, profile, page, [ep.start("xserver", name, listen)])
        try:
            _wait_listening(ep, port)
            if spec.name is CrossKind.web:
                ca = tls.ensure_testbed_pki(ep.pki_dir).ca_cert
                client, name = web_argv(spec, server, page, ca), "cross-curl"
            else:
                client, name = iperf3_client_argv(spec, server), "cross-iperf3-client"
            run.procs.append(ep.start("xclient", name, client))
            if spec.name is CrossKind.rrul:
                ping = ["ping", "-D", "-n", "-i", str(PING_INTERVAL_S), server]
                run.procs.append(ep.start("xclient", "cross-ping", ping))
            run.started = self._confirm(run)
            if spec.name is not CrossKind.udp_cbr:
                run.started["cc"] = _check_cc(ep, spec, port)
        except BaseException:
            ep.stop(run.procs)
            raise
        return run

    def _web_server(self, address: str) -> list[str]:
        """A second origin on xserver, serving the testbed's pages with its certificate."""
        from clarke.server.origin import origin_binary  # only web needs it

        binary = origin_binary()
        if binary is None:
            raise CrossTrafficFailed("web cross traffic needs origin (bash ci/build.sh)")
        pki = tls.ensure_testbed_pki(self.endpoints.pki_dir)
        return [
            str(binary), "--root", str(self.endpoints.pages_dir),
            "--listen", f"{address}:{WEB_PORT}", "--cert", str(pki.cert), "--key", str(pki.key),
            "--control", WEB_CONTROL, "--tcp-cc", _TCP[CrossKind.web], "--no-alt-svc",
        ]  # fmt: skip

    def _confirm(self, run: Running) -> dict[str, Confirmed]:
        """Bytes moving in every asked direction, then until the rate stops growing."""
        asked = directions(run.spec)
        floor = 0.05 if run.spec.rate is None else min(0.05, run.spec.rate / 2)  # Mb/s
        t0 = time.monotonic()
        prev = self.sample()
        moving_at: float | None = None
        last: dict[str, float] = {}
        while True:
            time.sleep(WINDOW_S)
            self._check_alive(run)
            now = self.sample()
            rates = {d: r for d, r in prev.rates_mbps(now).items() if d in asked}
            prev = now
            elapsed = time.monotonic() - t0
            if moving_at is None:
                if all(r >= floor for r in rates.values()):
                    moving_at = elapsed
                elif elapsed > START_TIMEOUT_S:
                    raise CrossTrafficFailed(
                        f"{run.spec.label}: no bytes moving after {START_TIMEOUT_S:.0f} s "
                        f"({_fmt(rates)}); {self._logs(run)}"
                    )
            elif all(rates[d] <= 1.1 * last.get(d, 0) for d in asked) or (
                elapsed - moving_at > SETTLE_MAX_S
            ):
                return {
                    "confirmed_after_s": round(moving_at, 2),
                    "settled_after_s": round(elapsed, 2),
                    "rate_at_start_mbps": {d: round(r, 3) for d, r in rates.items()},
                }
            last = rates

    def _check_alive(self, run: Running) -> None:
        dead = [p for p in run.procs if not self.endpoints.alive(p)]
        if dead:
            raise CrossTrafficFailed(
                f"{run.spec.label}: {', '.join(p.name for p in dead)} exited; {self._logs(run)}"
            )

    def _logs(self, run: Running) -> str:
        return "; ".join(f"{p.name} log ends: {tail(p.log, 3)!r}" for p in run.procs)

    # --- around a load --------------------------------------------------------------------
    def sample(self) -> Sample:
        received, sent = self.endpoints.byte_counters("xclient")
        return Sample(time.monotonic(), received, sent)

    def before_load(self) -> tuple[Sample, float] | None:
        if self.running is None:
            return None
        return self.sample(), time.time()

    def after_load(self, before: tuple[Sample, float] | None) -> tuple[CrossTrafficDuring, str]:
        """What the cross traffic did during the load (a record's `cross_traffic`) and
        why the load does not count ("" when it does): the traffic stopped meanwhile."""
        if self.running is None or before is None:
            return CrossTrafficDuring(name="none", label="none"), ""
        run, (start, wall_start) = self.running, before
        rates = start.rates_mbps(self.sample())
        asked = directions(run.spec)
        out = CrossTrafficDuring.model_validate(
            run.spec.describe()
            | {
                "server": self.endpoints.address("xserver"),
                "achieved_mbps": {d: round(rates[d], 3) for d in asked},
                "during_s": round(time.monotonic() - start.at, 3),
                **run.started,
            }
        )
        if run.spec.name is CrossKind.rrul:
            out.ping_rtt_ms = _ping_rtts(Path(run.procs[-1].log), wall_start, time.time())
        dead = [p.name for p in run.procs if not self.endpoints.alive(p)]
        # iperf3's one-off server exits with its client: a dead server alone is no problem.
        failure = ""
        if any(not n.endswith("server") for n in dead):
            failure = f"cross traffic {run.spec.label} stopped during the load: {', '.join(dead)}"
        elif any(rates[d] <= 0 for d in asked):
            failure = f"cross traffic {run.spec.label} moved no bytes during the load"
        return out, failure


def metrics_of(during: CrossTrafficDuring | None) -> dict[str, float]:
    """The record's fields for the achieved rates (cross_forward_mbps, cross_return_mbps)
    and the rrul probe's median RTT."""
    if during is None:
        return {}
    out = {f"cross_{d}_mbps": v for d, v in during.achieved_mbps.items()}
    p50 = during.ping_rtt_ms.p50 if during.ping_rtt_ms is not None else None
    if isinstance(p50, float):
        out["cross_ping_p50_ms"] = p50
    return out


def _fmt(rates: dict[str, float]) -> str:
    return ", ".join(f"{d} {r:.3f} Mb/s" for d, r in rates.items())


def _wait_listening(ep: CrossEndpoints, port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = sh.run(ep.argv("xserver", ["ss", "-Hltn", f"sport = :{port}"]), check=False)
        if out.stdout.strip():
            return
        time.sleep(0.1)
    raise CrossTrafficFailed(f"iperf3 on xserver does not listen on port {port}")


def _check_cc(ep: CrossEndpoints, spec: CrossTraffic, port: int = PORT) -> list[str]:
    """The congestion control of the flows' senders, read from the kernel (ss -ti, data
    connections only: iperf3's control connection carries a few bytes and keeps the
    default): a flow that runs another than asked fails the start, as a page load that
    fell back would."""
    want = _TCP[spec.name]
    # web's connections all carry data; iperf3's control connection must not count
    least = 1 if spec.name is CrossKind.web else DATA_BYTES
    senders = {"forward": ("xserver", "sport"), "return": ("xclient", "dport")}
    seen: set[str] = set()
    for d in directions(spec):
        endpoint, match = senders[d]
        argv = ep.argv(endpoint, ["ss", "-tin", "state", "established", f"{match} = :{port}"])
        for sock in _sockets(sh.run(argv, check=False).stdout):
            acked = re.search(r"bytes_acked:(\d+)", sock)
            if acked and int(acked.group(1)) >= least:
                seen |= {w for w in sock.split() if w in CONGESTION_CONTROLS}
    if seen != {want}:
        raise CrossTrafficFailed(
            f"{spec.label}: the flows run {', '.join(sorted(seen)) or 'nothing'}, not {want}"
        )
    return sorted(seen)


def _sockets(ss_out: str) -> list[str]:
    """ss -i prints a socket's line, then its details indented: one text per socket."""
    out: list[str] = []
    for line in ss_out.splitlines()[1:]:  # the header
        if line[:1].isspace() and out:
            out[-1] += " " + line.strip()
        elif line.strip():
            out.append(line.strip())
    return out


def _ping_rtts(log: Path, start: float, end: float) -> RttSummary:
    rtts = []
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        m = _PING_LINE.match(line)
        if m and start <= float(m.group(1)) <= end:
            rtts.append(float(m.group(2)))
    if not rtts:
        return RttSummary(n=0)
    return RttSummary(n=len(rtts), p50=statistics.median(rtts), max=max(rtts))
