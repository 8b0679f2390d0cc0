"""satlink, Clarke's built-in user-space link emulator (satlink/README.md), in one link
role: `satlink sat` relays between the stations; `satlink st` and `satlink gw` carry
IP packets between a TUN device (sat0) and UDP carriers to the satellite on the
emulation network, and shape the direction they send. No kernel qdisc is needed.

The station is started by its first configure (with that profile as --config) and
takes every later profile at run time through its control socket, so a change of
profile never restarts it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from clarke import paths
from clarke.control_socket import answers, ask
from clarke.errors import EnvironmentProblem
from clarke.json_value import JsonObject, object_at
from clarke.place import Place, netns, procs
from clarke.place.plan import EMU_PORT, IF_SAT
from clarke.profiles import LinkProfile
from clarke.roles import (
    Implementation,
    ProfileInForce,
    RoleProcess,
    health_of,
)
from clarke.vocab import sends

START_TIMEOUT_S = 15.0
SPEAKER = "satlink"


def satlink_binary() -> Path | None:
    """$CLARKE_SATLINK, else the checkout's release build, else `satlink` on PATH."""
    return paths.rust_binary("satlink", "CLARKE_SATLINK")


def argv(binary: Path, place: Place, config: Path, control: Path) -> list[str]:
    """The satlink command of one link role."""
    plan, role = place.plan, place.role
    common = ["--config", str(config), "--control", str(control)]
    emu = f"{plan.emu.address(role)}:{EMU_PORT}"
    if role == "satellite":
        return [
            str(binary), "sat", "--emu-bind", emu,
            "--gw", plan.emu_endpoint("gateway"), "--st", plan.emu_endpoint("terminal"),
            *common,
        ]  # fmt: skip
    kind = "st" if role == "terminal" else "gw"
    return [
        str(binary), kind, "--dev", IF_SAT, "--emu-bind", emu,
        "--sat", plan.emu_endpoint("satellite"), *common,
    ]  # fmt: skip


class SatlinkStation:
    """One satlink process in one link role."""

    implementation = "satlink"

    def __init__(self, place: Place, binary: Path) -> None:
        self.place, self.role, self.binary = place, place.role, binary
        self.control = place.run_dir / "satlink.sock"
        self.config = place.run_dir / "link.json"
        self.children = procs.Children()
        self.in_force = ProfileInForce()

    def _running(self) -> bool:
        return "satlink" in self.children.procs and self.children.exited() is None

    def _start(self, config: JsonObject) -> None:
        self.place.run_dir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(json.dumps(config, indent=2))
        self.control.unlink(missing_ok=True)
        cmd = self.place.argv(argv(self.binary, self.place, self.config, self.control))
        log = self.place.run_dir / "satlink.log"
        self.children.spawn("satlink", cmd, log=log)
        self.children.started(
            "satlink",
            lambda: answers(self.control, SPEAKER),
            f"satlink {self.role}",
            START_TIMEOUT_S,
            lambda: f"its log {log} ends:\n{procs.tail(log)}",
        )
        if self.role != "satellite":
            # The TUN device gets the link end's address; the remote LANs go into it.
            plan = self.place.plan
            netns.batch(
                self.place.ns,
                [
                    f"addr replace {plan.sat.cidr(self.role)} dev {IF_SAT}",
                    f"link set {IF_SAT} up",
                    *(f"route replace {p} dev {IF_SAT}" for p in plan.remote_prefixes(self.role)),
                ],
            )

    # --- the contract --------------------------------------------------------------------
    def state(self) -> JsonObject:
        return self.in_force.state(self._running())

    def configure(self, body: JsonObject) -> JsonObject:
        return self.in_force.configure(body, self._running, self._put_in_force)

    def _put_in_force(self, name: str, profile: LinkProfile) -> None:
        config = profile.to_satlink_config(name=name)
        if self._running():
            ask(self.control, {"cmd": "set", "config": config}, SPEAKER)
            self.config.write_text(json.dumps(config, indent=2))
        else:
            self._start(config)

    def health(self) -> JsonObject:
        return health_of(
            self.role,
            self.implementation,
            satlink=ask(self.control, {"cmd": "health"}, SPEAKER) if self._running() else {},
        )

    def stats(self) -> JsonObject:
        if not self._running():
            return {"running": False}
        stats = ask(self.control, {"cmd": "stats"}, SPEAKER)
        # A station's `bytes_out` of the direction it shapes are the IP bytes it put onto
        # the link; the satellite only relays.
        direction = sends(self.role)
        if direction and isinstance(stats.get(direction), dict):
            stats["bytes_onto_link"] = {direction: object_at(stats, direction).get("bytes_out")}
            # When satlink read its counters, on its own clock (seconds): rates from
            # samples of them do not depend on how long a request took to get here.
            stats["counted_at_s"] = stats.get("uptime_s")
        return stats

    def reset_stats(self) -> JsonObject:
        return ask(self.control, {"cmd": "reset_stats"}, SPEAKER) if self._running() else {}

    def problem(self) -> str | None:
        """satlink died (not while a configure starts it: a satlink that exits during
        start-up is that configure's answer, and the agent, which stops on a problem,
        would otherwise stop before giving it)."""
        return self.in_force.when_idle(self.children.exited)

    def stop(self) -> None:
        self.children.stop()


class Satlink(Implementation):
    kind = "link"
    name = "satlink"
    summary = "Clarke's built-in emulator (satlink/): no kernel qdisc needed; the default"
    install = (
        "build it with `cargo build --release` in satlink/ (ci/build.sh), or set CLARKE_SATLINK"
    )

    def check_environment(self) -> None:
        binary = satlink_binary()
        if binary is None or not os.access(binary, os.X_OK):
            where = binary or "satlink/target/release/satlink"
            raise EnvironmentProblem(f"the satlink binary is missing ({where}): {self.install}")

    def start(self, place: Place) -> RoleProcess:
        self.check_environment()
        binary = satlink_binary()
        assert binary is not None
        return SatlinkStation(place, binary)
