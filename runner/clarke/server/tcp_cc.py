"""TCP congestion control for a server whose software cannot set it per socket
(OpenLiteSpeed): the network namespace's default where /proc/sys is writable, and the
`congctl` attribute of the route towards the client LAN, which Linux applies to the
connections accepted from there and which needs only NET_ADMIN (inside an unprivileged
container /proc/sys is read-only)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from clarke import sh
from clarke.errors import CommandFailed, EnvironmentProblem, InputError
from clarke.json_value import JsonObject
from clarke.vocab import CONGESTION_CONTROLS

ROUTE_METRICS: Final = ("initcwnd", "initrwnd", "mtu", "advmss", "window")


def netns_argv(argv: Sequence[str], netns: str | None) -> list[str]:
    """argv run in network namespace `netns` (None: this one)."""
    return ["ip", "netns", "exec", netns, *argv] if netns else list(argv)


def _ip(netns: str | None) -> list[str]:
    return ["ip", "-n", netns] if netns else ["ip"]


def available_tcp_cc(netns: str | None = None) -> list[str]:
    text = sh.run(
        netns_argv(["cat", "/proc/sys/net/ipv4/tcp_available_congestion_control"], netns)
    ).stdout
    return text.split()


def route_dev(gateway: str, netns: str | None = None) -> str:
    """The interface the route to `gateway` leaves by."""
    out = sh.run([*_ip(netns), "-j", "route", "get", gateway]).stdout
    try:
        return str(json.loads(out)[0]["dev"])
    except (ValueError, IndexError, KeyError):
        raise CommandFailed(f"ip route get {gateway}: no interface in {out.strip()!r}") from None


def route_of(prefix: str, netns: str | None = None) -> JsonObject | None:
    out = sh.run([*_ip(netns), "-j", "route", "show", "exact", prefix]).stdout
    routes = json.loads(out or "[]")
    return routes[0] if routes else None


def _metrics_of(route: JsonObject | None) -> list[JsonObject]:
    """A route's metrics entries (ip -j gives a list of one-key objects)."""
    found = (route or {}).get("metrics", [])
    return [m for m in found if isinstance(m, dict)] if isinstance(found, list) else []


def route_congctl(prefix: str, netns: str | None = None) -> str | None:
    """The congctl on the route to `prefix` (ip -j reports it as metrics' congestion)."""
    route = route_of(prefix, netns)
    for metrics in _metrics_of(route):
        if "congestion" in metrics:
            return str(metrics["congestion"])
    return None


def _replace_route(
    client_lan: str, gateway: str, netns: str | None, metrics: dict[str, str | None]
) -> list[str]:
    """`ip route replace CLIENT_LAN via GATEWAY dev DEV ...`, keeping the route's source
    address, its congctl and its initcwnd-like metrics but for `metrics` (None: left
    out, else set)."""
    dev = route_dev(gateway, netns)
    argv = ["route", "replace", client_lan, "via", gateway, "dev", dev]
    current = route_of(client_lan, netns) or {}
    if current.get("prefsrc"):
        argv += ["src", str(current["prefsrc"])]
    kept: dict[str, str] = {}
    for found in _metrics_of(current):
        kept |= {n: str(found[n]) for n in ROUTE_METRICS if n in found}
        if "congestion" in found:
            kept["congctl"] = str(found["congestion"])
    for name, value in {**kept, **metrics}.items():
        if value is not None:
            argv += [name, value]
    sh.run([*_ip(netns), *argv])
    return ["ip", *argv]


def set_route_congctl(
    algo: str, client_lan: str, gateway: str, netns: str | None = None
) -> list[str]:
    """The route towards the clients with `congctl ALGO`, read back."""
    argv = _replace_route(client_lan, gateway, netns, {"congctl": algo})
    got = route_congctl(client_lan, netns)
    if got != algo:
        raise CommandFailed(f"{' '.join(argv)}: the route reads back congctl {got!r}, not {algo!r}")
    return argv


def route_metric(prefix: str, name: str, netns: str | None = None) -> int | None:
    """A metric of the route to `prefix` (initcwnd, initrwnd ...), None where it has none."""
    route = route_of(prefix, netns)
    for metrics in _metrics_of(route):
        if name in metrics:
            return int(str(metrics[name]))
    return None


def set_route_metric(
    name: str, value: int | None, client_lan: str, gateway: str, netns: str | None = None
) -> list[str]:
    """The route towards the clients with metric `name` (one of ROUTE_METRICS: initcwnd,
    which new connections from there start with, ...) set to `value` (None: without it,
    the kernel's own), the rest of the route kept; read back."""
    if name not in ROUTE_METRICS:
        raise InputError(f"route metric {name!r}: one of {', '.join(ROUTE_METRICS)}")
    argv = _replace_route(client_lan, gateway, netns, {name: None if value is None else str(value)})
    got = route_metric(client_lan, name, netns)
    if got != value:
        raise CommandFailed(f"{' '.join(argv)}: the route reads back {name} {got}, not {value}")
    return argv


def apply_tcp_cc(
    algo: str,
    *,
    client_lan: str | None,
    gateway: str | None,
    netns: str | None = None,
) -> JsonObject:
    """Make new TCP connections from the client LAN use `algo`: the sysctl where
    /proc/sys is writable, and the route's congctl (which wins for that route)."""
    if algo not in CONGESTION_CONTROLS:
        raise InputError(
            f"tcp_cc: {algo!r} is not allowed; allowed: {', '.join(CONGESTION_CONTROLS)}"
        )
    available = available_tcp_cc(netns)
    if algo not in available:
        raise EnvironmentProblem(
            f"TCP congestion control {algo!r} is not available in this kernel (it offers "
            f"{', '.join(available)}); on the host: modprobe tcp_{algo}"
        )
    applied: list[str] = []
    try:
        proc = sh.run(
            netns_argv(["sysctl", "-w", f"net.ipv4.tcp_congestion_control={algo}"], netns),
            check=False,
        )
        sysctl_ok = proc.returncode == 0
        sysctl_detail = (proc.stderr or proc.stdout).strip()
    except EnvironmentProblem as e:  # no sysctl binary
        sysctl_ok, sysctl_detail = False, str(e)
    if sysctl_ok:
        applied.append("sysctl")
    route: list[str] | None = None
    if client_lan and gateway:
        route = set_route_congctl(algo, client_lan, gateway, netns)
        applied.append("route congctl")
    if not applied:
        raise EnvironmentProblem(
            f"cannot set TCP congestion control {algo!r}: the sysctl is not writable here "
            f"({sysctl_detail}) and no route towards the client LAN was given"
        )
    return {
        "tcp_cc": algo,
        "mechanisms": applied,
        "sysctl": "written" if sysctl_ok else f"not writable: {sysctl_detail}",
        "route": " ".join(route) if route else None,
    }
