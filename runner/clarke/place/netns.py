"""Namespaces, veths, bridges, addresses, routes and sysctls, all through clarke.sh.

Thin wrappers over `ip` and `sysctl`; they know nothing of roles (plan.py
does) and nothing of state (lifecycle.py does)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from clarke import sh
from clarke.errors import CommandFailed, EnvironmentProblem

TUN = Path("/dev/net/tun")


def require_root_and_tun() -> None:
    if os.geteuid() != 0:
        raise EnvironmentProblem(
            "the netns testbed needs root (network namespaces, TUN devices, sysctls); "
            "run as root, e.g. with sudo"
        )
    if not TUN.exists():
        raise EnvironmentProblem(
            f"{TUN} is missing: the kernel has no TUN/TAP support or the device "
            "node is not there (modprobe tun; mknod /dev/net/tun c 10 200)"
        )
    for tool in ("ip", "sysctl"):
        if shutil.which(tool) is None:
            raise EnvironmentProblem(f"{tool} is not installed (Debian: iproute2, procps)")


def namespaces() -> list[str]:
    out = sh.run(["ip", "-j", "netns", "list"]).stdout.strip()
    if not out:
        return []
    return [entry["name"] for entry in json.loads(out)]


def add(ns: str) -> None:
    sh.run(["ip", "netns", "add", ns])


def set_owner(owner: str, ns: str | None, dev: str = "lo") -> None:
    """Tag a namespace (its loopback) or a root-namespace link with its owner, the state
    dir, so that `down --all` of one state dir never touches another's testbeds."""
    batch(ns, [f'link set dev {dev} alias "{owner}"'])


def owner(ns: str | None, dev: str = "lo") -> str | None:
    argv = ["ip", *(["-n", ns] if ns else []), "-j", "link", "show", "dev", dev]
    proc = sh.run(argv, check=False)
    if proc.returncode != 0:
        return None
    try:
        return json.loads(proc.stdout)[0].get("ifalias") or None
    except (json.JSONDecodeError, IndexError):
        return None


def delete(ns: str) -> None:
    if ns in namespaces():
        sh.run(["ip", "netns", "delete", ns])


def exec_argv(ns: str, argv: Sequence[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


def ip(ns: str | None) -> list[str]:
    """`ip`, in namespace ns (None: the caller's own)."""
    return ["ip", "-n", ns] if ns else ["ip"]


def addresses(ns: str | None = None) -> dict[str, str]:
    """The IPv4 addresses in a namespace (None: the caller's own): {address: interface}."""
    out = sh.run([*ip(ns), "-j", "-4", "addr", "show"]).stdout
    return {
        a["local"]: link["ifname"]
        for link in json.loads(out or "[]")
        for a in link.get("addr_info", [])
        if a.get("family") == "inet"
    }


def interface_of(address: str, ns: str | None = None) -> str:
    """The interface that holds `address` (Docker names a container's interfaces eth0,
    eth1 … in an order of its own, so the address from the plan is what identifies a
    network, on both substrates)."""
    found = addresses(ns)
    if address not in found:
        have = ", ".join(sorted(found)) or "none"
        raise EnvironmentProblem(
            f"no interface has the address {address} here (there are: {have}); is this "
            "place attached to the networks the testbed plan gives its role?"
        )
    return found[address]


def batch(ns: str | None, commands: Sequence[str]) -> None:
    """Several `ip` commands in one process (`ip -batch`), in namespace ns (None: root)."""
    if not commands:
        return
    argv = ["ip", *(["-n", ns] if ns else []), "-batch", "-"]
    sh.run(argv, input="\n".join(commands) + "\n")


def veth(ns_a: str | None, name_a: str, ns_b: str | None, name_b: str, mtu: int = 1500) -> None:
    """A veth pair created directly in its two namespaces (None: root), so equal names
    in different testbeds never clash in the root namespace."""
    argv = ["ip", "link", "add", name_a]
    if ns_a:
        argv += ["netns", ns_a]
    argv += ["mtu", str(mtu), "type", "veth", "peer", "name", name_b]
    if ns_b:
        argv += ["netns", ns_b]
    argv += ["mtu", str(mtu)]
    sh.run(argv)


def link_exists(name: str, ns: str | None = None) -> bool:
    argv = ["ip", *(["-n", ns] if ns else []), "link", "show", "dev", name]
    return sh.run(argv, check=False).returncode == 0


def delete_link(name: str, ns: str | None = None) -> None:
    """Delete a link if it exists. A veth whose peer's namespace was just deleted goes
    away by itself, asynchronously: wait for that briefly, then delete what is left."""
    for _ in range(20):
        if not link_exists(name, ns):
            return
        time.sleep(0.05)
    proc = sh.run(["ip", *(["-n", ns] if ns else []), "link", "delete", "dev", name], check=False)
    if proc.returncode != 0 and link_exists(name, ns):
        raise CommandFailed(f"ip link delete dev {name}: {proc.stderr.strip()}")


def pids(ns: str) -> list[int]:
    proc = sh.run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def sysctls(ns: str | None, values: dict[str, str]) -> None:
    argv = ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in values.items())]
    sh.run(exec_argv(ns, argv) if ns else argv)


def read_sysctl(key: str, ns: str | None = None) -> str:
    argv = ["sysctl", "-n", key]
    return sh.run(exec_argv(ns, argv) if ns else argv).stdout.strip()


def add_allowed_cc(cc: str) -> str | None:
    """Allow congestion control `cc` for namespaces (a root-namespace-only sysctl). Returns
    a note of the change made, or None when it was already allowed."""
    key = "net.ipv4.tcp_allowed_congestion_control"
    allowed = read_sysctl(key).split()
    if cc in allowed:
        return None
    available = read_sysctl("net.ipv4.tcp_available_congestion_control").split()
    if cc not in available:
        sh.run(["modprobe", f"tcp_{cc}"], check=False)
        available = read_sysctl("net.ipv4.tcp_available_congestion_control").split()
        if cc not in available:
            return None
    sysctls(None, {key: " ".join([*allowed, cc])})
    return f"{key}: added {cc} (was {' '.join(allowed)!r})"
