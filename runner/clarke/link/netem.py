"""Linux `tc netem` in the link roles, where the kernel has it: each station shapes the
direction it sends (vocab.SENDER) with a netem qdisc on its emulation-network interface
and routes the remote LAN to the other station across the emulation network; the
satellite only bridges."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from functools import cache

from clarke import sh
from clarke.errors import ClarkeError, EnvironmentProblem, ValidationFailed
from clarke.json_value import JsonObject
from clarke.place import Place, netns
from clarke.profiles import BitErrors, Direction, LinkProfile, PacketLoss
from clarke.roles import (
    Implementation,
    ProfileInForce,
    RoleProcess,
    health_of,
)
from clarke.vocab import QueueDiscipline, sends

PROBE_PREFIX = "clkprobe-"
MTU_BYTES = 1500


@cache
def netem_available() -> tuple[bool, str]:
    """Try a netem qdisc in a scratch namespace; (available, reason)."""
    if os.geteuid() != 0 or shutil.which("tc") is None:
        return False, "cannot probe for the netem qdisc (needs root and tc)"
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
        return False, f"the netem qdisc probe failed: {e}"
    finally:
        with contextlib.suppress(ClarkeError):
            netns.delete(ns)


def describe() -> str:
    ok, why = netem_available()
    return f"netem: {'available' if ok else 'not available'} ({why})"


def netem_args(d: Direction) -> list[str]:
    """One direction as netem arguments. netem has no bit error rate: a BER becomes the
    loss probability of a 1500-byte packet."""
    args = ["delay", f"{d.one_way_delay_ms}ms"]
    rate = d.rate_mbps or 1000
    if d.rate_mbps > 0:
        args += ["rate", f"{d.rate_mbps}mbit"]
    bound = d.queue.bound()
    if bound.bytes is not None:
        limit = max(1, bound.bytes // MTU_BYTES)
    elif bound.packets is not None:
        limit = bound.packets
    else:
        limit = max(1, int(rate * 1e6 * (bound.ms or 0) / 1000 / 8 / MTU_BYTES))
    # netem's limit also holds the packets in flight on the delay line.
    in_flight = int(rate * 1e6 * d.one_way_delay_ms / 1000 / 8 / MTU_BYTES)
    args += ["limit", str(limit + in_flight)]
    if isinstance(d.loss, PacketLoss):
        args += ["loss", f"{100 * d.loss.packet_rate:.6f}%"]
    elif isinstance(d.loss, BitErrors):
        loss = 1 - (1 - d.loss.bit_error_rate) ** (MTU_BYTES * 8)
        args += ["loss", f"{100 * loss:.6f}%"]
    return args


def direction_of(profile: LinkProfile, direction: str) -> Direction:
    return profile.forward if direction == "forward" else profile.return_


class NetemStation:
    """One link role on netem: a station's qdisc and route, or the satellite's bridge."""

    implementation = "netem"

    def __init__(self, place: Place) -> None:
        self.place, self.role = place, place.role
        self.direction = sends(self.role)
        self.in_force = ProfileInForce()
        self.wired = False

    def _tc(self, verb: str, d: Direction) -> None:
        dev = self.place.iface("emu")
        sh.run(self.place.argv(["tc", "qdisc", verb, "dev", dev, "root", "netem", *netem_args(d)]))

    def state(self) -> JsonObject:
        return self.in_force.state(True)

    def configure(self, body: JsonObject) -> JsonObject:
        return self.in_force.configure(body, lambda: True, self._put_in_force)

    def _put_in_force(self, name: str, profile: LinkProfile) -> None:
        if self.direction is None:
            return
        d = direction_of(profile, self.direction)
        if self.wired:
            self._tc("change", d)
            return
        plan = self.place.plan
        peer = "gateway" if self.role == "terminal" else "terminal"
        via = plan.emu.address(peer)
        netns.batch(
            self.place.ns,
            [f"route replace {p} via {via}" for p in plan.remote_prefixes(self.role)],
        )
        self._tc("replace", d)
        self.wired = True

    def health(self) -> JsonObject:
        return health_of(
            self.role,
            self.implementation,
            netem={"version": sh.run(["tc", "-V"], check=False).stdout.strip()},
        )

    def stats(self) -> JsonObject:
        if self.direction is None or not self.wired:
            return {}
        dev = self.place.iface("emu")
        proc = sh.run(self.place.argv(["tc", "-s", "-j", "qdisc", "show", "dev", dev]), check=False)
        try:
            qdiscs = json.loads(proc.stdout or "[]")
        except json.JSONDecodeError:
            return {"error": proc.stderr.strip()}
        out: JsonObject = {"qdiscs": qdiscs}
        netem = next((q for q in qdiscs if q.get("kind") == "netem"), None)
        if netem is not None:
            out["bytes_onto_link"] = {self.direction: int(netem.get("bytes", 0))}
            out["drops"] = int(netem.get("drops", 0))
        return out

    def reset_stats(self) -> JsonObject:
        return {}  # qdisc counters cannot be zeroed; rates come from differences

    def problem(self) -> str | None:
        return None

    def stop(self) -> None:
        if self.direction is not None and self.wired:
            with contextlib.suppress(ClarkeError):
                dev = self.place.iface("emu")
                sh.run(self.place.argv(["tc", "qdisc", "del", "dev", dev, "root"]), check=False)
            self.wired = False


class Netem(Implementation):
    kind = "link"
    name = "netem"
    summary = "Linux tc netem on the stations' emulation interfaces, where the kernel has it"
    install = "a kernel with the netem qdisc (sch_netem: modprobe sch_netem), or use --link satlink"

    def check_environment(self) -> None:
        ok, why = netem_available()
        if not ok:
            raise EnvironmentProblem(f"the netem link is not available: {why}; {self.install}")

    def check_profile(self, profile: LinkProfile, source: str = "link profile") -> None:
        """A netem qdisc holds one fixed configuration: a scheduled profile is refused;
        its queue is drop-tail (netem's own limit), so is any other discipline; its jitter
        reorders, so a profile's jitter is refused too."""
        problems = []
        if profile.scheduled:
            problems.append(
                "schedule: netem applies a fixed profile and cannot follow a link "
                "schedule (docs/schedules.md); use --link satlink"
            )
        for name, d in (("forward", profile.forward), ("return", profile.return_)):
            if d.jitter is not None:
                problems.append(
                    f"{name}.jitter: cannot be emulated: netem's jitter lets packets "
                    "overtake each other (its queue orders them by send time) and draws "
                    "from normal or Pareto tables only; use --link satlink"
                )
            if d.queue.discipline is not QueueDiscipline.drop_tail:
                problems.append(
                    f"{name}.queue.discipline: {d.queue.discipline} cannot be emulated: "
                    "netem's queue is drop-tail only (its limit), and a codel or fq_codel "
                    "qdisc would sit in front of netem's delay line, not of its rate; use "
                    "--link satlink (docs/queues.md)"
                )
        if problems:
            raise ValidationFailed(f"{source} (netem link)", problems)

    def start(self, place: Place) -> RoleProcess:
        if place.role != "satellite":
            self.check_environment()
        return NetemStation(place)
