"""Link checks (`clarke testbed check`, and before and after each profile's runs of a
campaign): measure the link a testbed really has and compare it with its profile.

    RTT    ping client -> server (20 samples after one warm-up): mean, stdev, p50, p99,
           max. Expected: the profile's idle RTT plus the serialisation of an 84-byte
           echo packet in each direction. Within max(rtt_pct % of expected, rtt_ms).
           Reported, not judged, with per-packet jitter or a schedule that moves the
           idle RTT by more than that (clarke bench validate, clarke testbed
           check-schedule measure those).
    rate   The link's capacity per direction, forward (server -> client, iperf3 -R) and
           return. The profile's rate counts whole IP packets, so the link rate is
           taken from the link's counters of IP bytes sent onto the link (satlink:
           the shaping station's bytes_out, sampled every 0.25 s over the steady part
           of a transfer).
           Two flows per direction, each read on the counters: a bulk TCP transfer
           (cubic, `duration` s after `omit` s of start-up), then, where the link has
           counters and the direction a rate, a UDP flow paced at 1.1 x the profile's
           rate for `duration` s. A flow that lets the queue empty reads low and none
           reads high, so the higher reading is judged. Each fails in its own way: on a
           long link TCP's recovery from slow start's overshoot can leave the link idle
           (a GEO return link read 9.35 of 10 Mb/s), and a user-space UDP sender paused
           by the VM for longer than a short queue lasts lets it drain (LEO's 40 ms
           queue at 100 Mb/s read 94-98 Mb/s under UDP, 100.0 under TCP). Without
           counters the TCP goodput converted to the link is judged, x MTU / (MTU - 52)
           (IPv4 20 + TCP 20 + timestamps 12 bytes per 1448-byte segment at MTU 1500).
           Goodput is always reported. Within rate_pct % of the profile's rate.
           Unlimited directions and lossy profiles are reported, not judged.
    loss   ping loss; on a loss-free profile any lost echo is a failure, on a lossy one
           the expected echo loss is shown next to the measured one (20 samples cannot
           judge a rate of ~1 %)."""

from __future__ import annotations

import contextlib
import enum
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from clarke import sh
from clarke.errors import CommandFailed
from clarke.json_value import JsonObject
from clarke.place.plan import IPERF_PORT, Addresses
from clarke.profiles import BitErrors, Direction, LinkProfile, PacketLoss
from clarke.vocab import CongestionControl

MTU = 1500
TCP_IP_OVERHEAD = 52  # IPv4 + TCP + timestamp option, per segment
ECHO_BYTES = 84  # IPv4 20 + ICMP 8 + 56 bytes of payload
UDP_PAYLOAD = 1400  # below every testbed MTU: no fragments
UDP_IP_OVERHEAD = 28  # IPv4 20 + UDP 8
CAPACITY_LOAD = 1.1  # offered UDP load / the profile's rate


class CheckVerdict(enum.StrEnum):
    ok = "ok"
    fail = "fail"
    info = "info"  # measured and shown, not judged


@dataclass
class Check:
    name: str
    measured: float | None
    expected: float | None
    tolerance: float | None
    unit: str
    verdict: CheckVerdict
    reason: str = ""


@dataclass
class PingResult:
    sent: int
    rtts_ms: list[float]

    @property
    def loss(self) -> float:
        return 1 - len(self.rtts_ms) / self.sent if self.sent else 1.0

    def summary(self) -> dict[str, float]:
        r = sorted(self.rtts_ms)
        if not r:
            return {}
        return {
            "mean": statistics.fmean(r),
            "stdev": statistics.stdev(r) if len(r) > 1 else 0.0,
            "min": r[0],
            "p50": percentile(r, 50),
            "p99": percentile(r, 99),
            "max": r[-1],
        }


@dataclass
class IperfResult:
    direction: str  # forward (server -> client) or return (client -> server)
    goodput_bps: float
    seconds: float
    bytes: int
    retransmits: int | None
    cc: str
    link_bps: float | None = None  # from the link's counters, when it has them
    protocol: str = "tcp"  # tcp: bulk transfer; udp: paced at offered_bps
    offered_bps: float | None = None  # udp: the offered load in IP bytes
    lost_percent: float | None = None  # udp: datagrams dropped or still queued at the end

    @property
    def wire_bps(self) -> float:
        """Goodput converted to IP bytes on the link."""
        if self.protocol == "udp":
            return self.goodput_bps * (UDP_PAYLOAD + UDP_IP_OVERHEAD) / UDP_PAYLOAD
        return self.goodput_bps * MTU / (MTU - TCP_IP_OVERHEAD)

    @property
    def rate_bps(self) -> float:
        """What is compared with the profile: the link counters' rate if known, else the
        goodput converted to the link."""
        return self.link_bps if self.link_bps is not None else self.wire_bps


@dataclass
class Report:
    id: int | str
    profile: str
    link: str
    checks: list[Check] = field(default_factory=list)
    ping: JsonObject = field(default_factory=dict)
    throughput: dict[str, dict[str, Any]] = field(default_factory=dict)
    link_stats: JsonObject = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.verdict is not CheckVerdict.fail for c in self.checks)

    def to_dict(self) -> JsonObject:
        d = asdict(self)
        d["ok"] = self.ok
        return d


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


# A link byte counter's reading: bytes, or (bytes, seconds on the counter's own clock).
Counted = int | tuple[int, float]


@dataclass
class Probe:
    """Where the measurements run, so that one check serves both substrates: commands at
    the client end (netns: `ip netns exec` into the client; compose: the runner's own
    container, which is the client), iperf3 -s at the server (the server role runs it),
    and the link's own byte counters through the link roles' agents."""

    addresses: Addresses
    at_client: Callable[[list[str]], list[str]]
    link_bytes: Callable[[str], Counted | None] | None = None
    reset_link: Callable[[], None] = lambda: None
    link_stats: Callable[[], JsonObject] = dict


def ping(probe: Probe, count: int = 20, interval: float = 0.2, warmup: int = 1) -> PingResult:
    """Echo requests from the client to the server (clarke.place.echo, microsecond
    RTTs); the warm-up ones are not counted."""
    target = probe.addresses.addresses["server"]
    timeout = 10 + (count + warmup) * interval + 10
    argv = [
        sys.executable,
        "-m",
        "clarke.place.echo",
        target,
        "--count",
        str(count + warmup),
        "--interval",
        str(interval),
    ]
    proc = sh.run(probe.at_client(argv), timeout=timeout)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise CommandFailed(f"echo printed no JSON: {proc.stderr.strip()[-500:]}") from None
    lost = set(data["lost"])
    rtts = iter(data["rtts_ms"])
    by_seq = {seq: next(rtts) for seq in range(count + warmup) if seq not in lost}
    return PingResult(sent=count, rtts_ms=[v for k, v in sorted(by_seq.items()) if k >= warmup])


def iperf(
    probe: Probe,
    reverse: bool,
    duration: float = 10,
    omit: float = 4,
    cc: str = CongestionControl.cubic,
    port: int = IPERF_PORT,
    udp_bps: float | None = None,
) -> IperfResult:
    """One bulk TCP transfer, or with udp_bps a UDP flow paced at that many bits/s of
    IP packets; reverse=True is the forward link (server -> client). Where the link
    counts the IP bytes it puts on the link in this direction (probe.link_bytes), the
    counter is sampled every 0.25 s and the link rate over the steady part of the
    transfer (from `omit` s after data started flowing, for duration - 1 s) is
    computed from it."""
    direction = "forward" if reverse else "return"
    link_bytes = probe.link_bytes
    argv = [
        "iperf3",
        "-c",
        probe.addresses.addresses["server"],
        "-p",
        str(port),
        "-J",
        "-t",
        str(duration),
        "--connect-timeout",
        "10000",
    ]
    if udp_bps is None:
        argv += ["-O", str(omit), "-C", cc]
    else:
        payload_bps = udp_bps * UDP_PAYLOAD / (UDP_PAYLOAD + UDP_IP_OVERHEAD)
        argv += ["-u", "-b", f"{payload_bps:.0f}", "-l", str(UDP_PAYLOAD)]
    if reverse:
        argv.append("-R")
    popen = sh.spawn(
        probe.at_client(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    samples: list[tuple[float, int]] = []
    try:
        deadline = time.monotonic() + duration + omit + 60
        while popen.poll() is None and time.monotonic() < deadline:
            if link_bytes is not None:
                # The counter was read somewhere inside the call (an agent request can
                # take tens of ms on a busy host): its own clock where it has one, else
                # the call's midpoint.
                t0 = time.monotonic()
                got = link_bytes(direction)
                if isinstance(got, tuple):
                    samples.append((got[1], got[0]))
                elif got is not None:
                    samples.append(((t0 + time.monotonic()) / 2, got))
            time.sleep(0.25)
        try:
            stdout, stderr = popen.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            raise CommandFailed(
                f"iperf3 to {probe.addresses.addresses['server']} did not finish within "
                f"{duration + omit + 65:.0f} s: is iperf3 -s running at the server, does "
                "the link carry TCP?"
            ) from None
    finally:
        if popen.poll() is None:
            popen.kill()
            popen.communicate()
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError:
        raise CommandFailed(f"iperf3 printed no JSON: {(stderr or stdout)[-500:]!r}") from None
    if "error" in data:
        raise CommandFailed(f"iperf3: {data['error']}")
    recv = data["end"].get("sum_received") or data["end"]["sum"]
    sent = data["end"].get("sum_sent", {})
    if udp_bps is not None:
        return IperfResult(
            direction=direction,
            goodput_bps=float(recv["bits_per_second"]),
            seconds=float(recv["seconds"]),
            bytes=int(recv["bytes"]),
            retransmits=None,
            cc="udp",
            link_bps=steady_rate(samples, omit, duration),
            protocol="udp",
            offered_bps=udp_bps,
            lost_percent=recv.get("lost_percent"),
        )
    # iperf3's own receiver figure. Informational: over 10 s it is off by up to a queue's
    # worth of data either way (bytes queued before the omitted start arrive inside the
    # window; the receiver's clock runs until the queue has drained).
    return IperfResult(
        direction=direction,
        goodput_bps=float(recv["bits_per_second"]),
        seconds=float(recv["seconds"]),
        bytes=int(recv["bytes"]),
        retransmits=sent.get("retransmits"),
        cc=data["end"].get("sender_tcp_congestion") or cc,
        link_bps=steady_rate(samples, omit, duration),
    )


def steady_rate(samples: list[tuple[float, int]], omit: float, duration: float) -> float | None:
    """Bits/s between `omit` s after the counter first moved by more than 64 KB (data,
    not iperf3's control exchange) and duration - 1 s later, or the last reading after
    which the counter still moved, whichever is first: a link that starts carrying the
    flow late (capacity on demand grants it a round trip after it began) reaches those
    64 KB late, and the window must not run on past the flow's end into an idle link."""
    if len(samples) < 3:
        return None
    t_first, b_first = samples[0]
    start = next((t for t, b in samples if b - b_first > 65536), None)
    if start is None:
        return None
    last = samples[-1][1]
    still_moving = max((t for t, b in samples if b < last), default=start)
    t0, t1 = start + omit, min(start + omit + duration - 1, still_moving)
    window = [(t, b) for t, b in samples if t0 <= t <= t1]
    if len(window) < 2 or window[-1][0] - window[0][0] < 1:
        return None
    (ta, ba), (tb, bb) = window[0], window[-1]
    return (bb - ba) * 8 / (tb - ta)


def expected_rtt_ms(profile: LinkProfile) -> float:
    ser = sum(
        ECHO_BYTES * 8 / (d.rate_mbps * 1e6) * 1e3
        for d in (profile.forward, profile.return_)
        if d.rate_mbps > 0
    )
    return profile.idle_rtt_ms + ser


def packet_loss(d: Direction, size: int) -> float:
    if isinstance(d.loss, PacketLoss):
        return d.loss.packet_rate
    if isinstance(d.loss, BitErrors):
        return 1 - (1 - d.loss.bit_error_rate) ** (size * 8)
    return 0.0


def rtt_checks(profile: LinkProfile, result: PingResult) -> list[Check]:
    """The median RTT is judged: it is the link's delay, while this VM wakes a timer
    15-70 ms late now and then, and one such echo moves the mean of 10-20 by a
    millisecond or more. Mean, stdev and p99 are shown (the benchmark judges those)."""
    s = result.summary()
    exp = expected_rtt_ms(profile)
    tol = max(profile.tolerance.rtt_pct / 100 * exp, profile.tolerance.rtt_ms)
    if not s:
        return [Check("rtt p50", None, exp, tol, "ms", CheckVerdict.fail, "no echo reply at all")]
    p50 = s["p50"]
    moves = _rtt_moves(profile, tol)
    if moves:
        return [
            Check("rtt p50", p50, exp, tol, "ms", CheckVerdict.info, moves),
            Check("rtt mean", s["mean"], exp, None, "ms", CheckVerdict.info),
            Check("rtt stdev", s["stdev"], None, None, "ms", CheckVerdict.info),
            Check("rtt p99", s["p99"], None, None, "ms", CheckVerdict.info),
        ]
    ok = abs(p50 - exp) <= tol
    return [
        Check(
            "rtt p50",
            p50,
            exp,
            tol,
            "ms",
            CheckVerdict.ok if ok else CheckVerdict.fail,
            "" if ok else f"off by {p50 - exp:+.2f} ms",
        ),
        Check("rtt mean", s["mean"], exp, None, "ms", CheckVerdict.info),
        Check("rtt stdev", s["stdev"], None, None, "ms", CheckVerdict.info),
        Check("rtt p99", s["p99"], None, None, "ms", CheckVerdict.info),
    ]


def _rtt_moves(profile: LinkProfile, tol: float) -> str:
    """Why the idle RTT of the profile's blocks cannot be judged ("" when it can): per-
    packet jitter, or a schedule that moves the RTT by more than the tolerance."""
    if profile.jittery:
        return "per-packet jitter: reported, not judged (clarke bench validate measures it)"
    if profile.return_.dama is not None:
        return (
            "capacity on demand on the return link: an echo's wait for its capacity depends "
            "on the traffic before it; reported, not judged"
        )
    fwd, ret = profile.in_force("forward"), profile.in_force("return")
    rtts = [f[1] + r[1] for f, r in zip(fwd, ret, strict=True)]
    if rtts and max(rtts) - min(rtts) > tol:
        return (
            f"the schedule moves the idle RTT from {min(rtts):.1f} to {max(rtts):.1f} ms: "
            "reported, not judged (clarke testbed check-schedule follows it)"
        )
    return ""


def loss_check(profile: LinkProfile, result: PingResult) -> Check:
    expected = 1 - (1 - packet_loss(profile.forward, ECHO_BYTES)) * (
        1 - packet_loss(profile.return_, ECHO_BYTES)
    )
    if profile.lossy:
        why = f"{result.sent} echoes cannot judge a loss rate of {expected:.2%}"
        return Check("echo loss", result.loss, expected, None, "", CheckVerdict.info, why)
    ok = result.loss == 0
    lost = result.sent - len(result.rtts_ms)
    why = "" if ok else f"{lost} of {result.sent} lost on a loss-free profile"
    verdict = CheckVerdict.ok if ok else CheckVerdict.fail
    return Check("echo loss", result.loss, 0.0, 0.0, "", verdict, why)


def rate_check(profile: LinkProfile, r: IperfResult) -> Check:
    d = profile.forward if r.direction == "forward" else profile.return_
    name = f"{r.direction} rate"
    measured = r.rate_bps / 1e6
    if d.rate_mbps == 0:
        return Check(
            name, measured, None, None, "Mb/s", CheckVerdict.info, "unlimited in the profile"
        )
    tol = profile.tolerance.rate_pct / 100 * d.rate_mbps
    if profile.lossy:
        why = "a lossy link: reported, not judged"
        return Check(name, measured, d.rate_mbps, tol, "Mb/s", CheckVerdict.info, why)
    ok = abs(measured - d.rate_mbps) <= tol
    why = "" if ok else f"off by {100 * (measured / d.rate_mbps - 1):+.1f} %"
    verdict = CheckVerdict.ok if ok else CheckVerdict.fail
    return Check(name, measured, d.rate_mbps, tol, "Mb/s", verdict, why)


@dataclass(frozen=True)
class CheckLevel:
    """How long a link check measures: pings, and seconds of iperf3 per direction of
    which the first `omit` (slow start) are left out; `unlimited_rates`: whether a
    direction the profile does not limit is measured too (shown, never judged: a flow
    at whatever rate two cores push through the emulator, which takes both of them)."""

    samples: int = 20
    duration: float = 10
    omit: float = 4
    unlimited_rates: bool = True


LINK_CHECKS = {"full": CheckLevel(20, 10, 4), "quick": CheckLevel(10, 5, 2, False)}


def check_link(
    probe: Probe, report: Report, profile: LinkProfile, level: CheckLevel = CheckLevel()
) -> Report:
    """`report` (the testbed, profile and link it is of) filled in: the link measured
    against `profile` as `level` says, each figure judged."""
    duration, omit = level.duration, level.omit
    with contextlib.suppress(Exception):
        probe.reset_link()
    pr = ping(probe, count=level.samples)
    report.ping = {
        "sent": pr.sent,
        "received": len(pr.rtts_ms),
        "rtts_ms": pr.rtts_ms,
        **pr.summary(),
    }
    report.checks += rtt_checks(profile, pr)
    report.checks.append(loss_check(profile, pr))
    for reverse in (True, False):
        unlimited = (profile.forward if reverse else profile.return_).rate_mbps <= 0
        if unlimited and not level.unlimited_rates:
            name = f"{'forward' if reverse else 'return'} rate"
            why = "unlimited in the profile: not measured by the quick check"
            report.checks.append(Check(name, None, None, None, "Mb/s", CheckVerdict.info, why))
            continue
        tcp = iperf(probe, reverse, duration=duration, omit=omit)
        udp_error = None
        try:
            udp = capacity(probe, profile, reverse, duration)
        except CommandFailed as e:
            # The second reading failing must not cost the first one.
            udp, udp_error = None, str(e)
        judged = higher(tcp, udp)
        report.throughput[tcp.direction] = asdict(tcp) | {
            "wire_bps": tcp.wire_bps,
            "tcp_rate_bps": tcp.rate_bps,
            "rate_bps": judged.rate_bps,
            "rate_from": "link counters" if judged.link_bps is not None else "goodput",
            "rate_method": judged.protocol,
            "capacity": asdict(udp) if udp is not None else None,
            "capacity_error": udp_error,
        }
        report.checks.append(rate_check(profile, judged))
    with contextlib.suppress(Exception):
        report.link_stats = probe.link_stats()
    return report


def capacity(
    probe: Probe, profile: LinkProfile, reverse: bool, duration: float
) -> IperfResult | None:
    """The link's own rate in one direction, from its counters under a paced UDP flow
    at CAPACITY_LOAD x the profile's rate; None where that cannot be measured (an
    unlimited direction, no link counters). Afterwards it waits until the link has
    carried what the flow queued (a link's buffers can hold more than the profile's
    queue: OpenSAND's do), so that what follows starts on an idle link."""
    d = profile.forward if reverse else profile.return_
    if d.rate_mbps <= 0 or probe.link_bytes is None:
        return None
    direction = "forward" if reverse else "return"
    # What a previous flow left queued must not count as this flow's start.
    wait_until_idle(probe, direction)
    try:
        r = iperf(
            probe, reverse, duration=duration, omit=1.0, udp_bps=CAPACITY_LOAD * d.rate_mbps * 1e6
        )
    finally:
        wait_until_idle(probe, direction)
    return r if r.link_bps is not None else None


def wait_until_idle(
    probe: Probe, direction: str, quiet_s: float = 0.5, limit_s: float = 60
) -> None:
    """Until the link's byte counter in `direction` has not moved for quiet_s (at most
    limit_s)."""
    link_bytes = probe.link_bytes
    if link_bytes is None:
        return

    def reading() -> int | None:
        got = link_bytes(direction)
        return got[0] if isinstance(got, tuple) else got

    deadline = time.monotonic() + limit_s
    last = reading()
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = reading()
        if now == last:
            return
        last = now


def higher(tcp: IperfResult, udp: IperfResult | None) -> IperfResult:
    """The flow whose reading is judged. Each flow's counter reading is a lower bound of
    the link's rate (a flow that lets the queue empty reads low, none reads high), so
    the higher one: TCP's loss recovery on a long link, or a paced sender paused by the
    VM for longer than a short queue lasts, only ever costs one of them."""
    return udp if udp is not None and udp.rate_bps > tcp.rate_bps else tcp


def render(report: Report) -> str:
    lines = [f"testbed {report.id}: profile {report.profile}, link {report.link}"]
    if report.ping:
        p = report.ping
        if "mean" in p:
            lines.append(
                f"  ping {p['received']}/{p['sent']}: mean {p['mean']:.2f} ms, stdev "
                f"{p['stdev']:.2f}, p50 {p['p50']:.2f}, p99 {p['p99']:.2f}, max {p['max']:.2f}"
            )
    for name, t in report.throughput.items():
        lines.append(
            f"  {name}: TCP goodput {t['goodput_bps'] / 1e6:.3f} Mb/s (x 1500/1448 = "
            f"{t['wire_bps'] / 1e6:.3f}), link rate {t['tcp_rate_bps'] / 1e6:.3f} Mb/s "
            f"({t['cc']}, {t['seconds']:.0f} s, retransmits {t['retransmits']})"
        )
        judged = f"{t['rate_bps'] / 1e6:.3f} Mb/s from {t['rate_from']}"
        if cap := t.get("capacity"):
            lines.append(
                f"  {name}: UDP at {cap['offered_bps'] / 1e6:.3f} Mb/s offered, link rate "
                f"{cap['link_bps'] / 1e6:.3f} Mb/s ("
                f"{cap['lost_percent'] or 0:.1f} % of datagrams dropped or still queued at the end)"
            )
        if t.get("capacity_error"):
            lines.append(f"  {name}: UDP flow failed: {t['capacity_error']}")
        lines.append(f"  {name}: judged {judged} ({t['rate_method']}, the higher)")
    lines.append(f"  {'check':<20}{'measured':>12}{'expected':>12}{'tolerance':>12}  verdict")
    for c in report.checks:
        pct = c.name.endswith("loss")

        def fmt(v: float | None, pct: bool = pct) -> str:
            return "-" if v is None else (f"{v:.2%}" if pct else f"{v:.3f}")

        tol = "-" if c.tolerance is None else f"±{fmt(c.tolerance)}"
        label = f"{c.name} ({c.unit})" if c.unit else c.name
        reason = f": {c.reason}" if c.reason else ""
        lines.append(
            f"  {label:<20}{fmt(c.measured):>12}{fmt(c.expected):>12}{tol:>12}  "
            f"{c.verdict.value}{reason}"
        )
    lines.append("  => " + ("within tolerance" if report.ok else "OUTSIDE TOLERANCE"))
    return "\n".join(lines)
