"""Building a netns testbed's places: one namespace per role plus mgmt, the veths and
bridges between them, addresses and routes as the plan says (clarke.place.plan), and the
client's names. Every creation goes through a Builder, which records it in the state
file first (testbed/lifecycle.py removes what the state file and the plan name)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from clarke import sh
from clarke.place import netns, procs
from clarke.place.plan import (
    BRIDGE_EMU,
    BRIDGE_MGMT,
    CROSS_PLACES,
    IF_EMU,
    IF_LAN,
    IF_MGMT,
    IF_XLAN,
    ROLES,
    SAT_EMU_PORTS,
    NetnsPlan,
)
from clarke.place.procs import Proc
from clarke.testbed.state import Store, TestbedState
from clarke.tls import DEFAULT_HOST
from clarke.vocab import CongestionControl

NO_DNS_SERVER = "# Clarke testbed: no DNS server\n"
EMU_MTU = 9000  # carriers encapsulate a full 1500-byte packet plus satlink's header


@dataclass
class Builder:
    """The testbed under construction: every creation goes through here and is recorded
    in the state file first."""

    store: Store
    state: TestbedState
    plan: NetnsPlan
    run_dir: Path
    procs_started: list[Proc] = field(default_factory=list)

    def save(self) -> None:
        self.store.save(self.state)

    def namespace(self, role: str) -> str:
        """The role's namespace, made (once: `up` makes the first to claim the id)."""
        name = self.plan.ns(role)
        if name in self.state.namespaces:
            return name
        self.state.namespaces.append(name)
        self.save()
        netns.add(name)
        netns.set_owner(self.store.owner, name)
        return name

    def root_link(self, name: str) -> None:
        self.state.root_links.append(name)
        self.save()

    def start(self, role: str, name: str, argv: list[str]) -> Proc:
        """Start argv in a role's namespace, recorded in the state file at once."""
        proc = procs.start(role, name, self.plan.ns(role), argv, self.run_dir / f"{name}.log")
        self.state.processes.append(proc)
        self.save()
        return proc


def build(tb: Builder) -> None:
    """The namespaces, links and addresses of a testbed: every role's place."""
    p = tb.plan
    note = netns.add_allowed_cc(CongestionControl.cubic)
    if note:
        tb.state.host_changes.append(note)
        tb.save()
    for role in (*ROLES, "mgmt", *CROSS_PLACES):
        tb.namespace(role)
    for role in (*ROLES, "mgmt", *CROSS_PLACES):
        ns = p.ns(role)
        netns.batch(ns, ["link set lo up"])
        forwarding = "1" if role in ("terminal", "gateway") else "0"
        netns.sysctls(
            ns,
            {
                "net.ipv4.ip_forward": forwarding,
                # IPv4 only: no router solicitations or DAD on the measurement path.
                "net.ipv6.conf.all.disable_ipv6": "1",
                "net.ipv6.conf.default.disable_ipv6": "1",
            },
        )

    # mgmt: a bridge in its own namespace; one veth per role; one into the root
    # namespace for the runner (the only thing Clarke adds there: a connected /24).
    mg, mgmt_ns = p.mgmt, p.ns("mgmt")
    netns.batch(mgmt_ns, [f"link add {BRIDGE_MGMT} type bridge", f"link set {BRIDGE_MGMT} up"])
    for role in ROLES:
        netns.veth(p.ns(role), IF_MGMT, mgmt_ns, f"m-{role}")
        netns.batch(mgmt_ns, [f"link set m-{role} master {BRIDGE_MGMT}", f"link set m-{role} up"])
        netns.batch(
            p.ns(role), [f"addr add {mg.cidr(role)} dev {IF_MGMT}", f"link set {IF_MGMT} up"]
        )
        netns.sysctls(p.ns(role), {f"net.ipv4.conf.{IF_MGMT}.forwarding": "0"})
    tb.root_link(p.root_mgmt_link)
    netns.veth(None, p.root_mgmt_link, mgmt_ns, "m-runner")
    netns.set_owner(tb.store.owner, None, p.root_mgmt_link)
    netns.batch(mgmt_ns, [f"link set m-runner master {BRIDGE_MGMT}", "link set m-runner up"])
    netns.sysctls(
        None,
        {
            f"net.ipv6.conf.{p.root_mgmt_link}.disable_ipv6": "1",
            f"net.ipv4.conf.{p.root_mgmt_link}.forwarding": "0",
        },
    )
    netns.batch(
        None,
        [f"addr add {mg.cidr('runner')} dev {p.root_mgmt_link}", f"link set {p.root_mgmt_link} up"],
    )

    # The measurement path's LANs.
    for lan, a, b in ((p.st_lan, "client", "terminal"), (p.gw_lan, "server", "gateway")):
        netns.veth(p.ns(a), IF_LAN, p.ns(b), IF_LAN)
        for role in (a, b):
            netns.batch(
                p.ns(role), [f"addr add {lan.cidr(role)} dev {IF_LAN}", f"link set {IF_LAN} up"]
            )
    # The client's sends of several UDP datagrams at once (GSO: Firefox's QUIC uses it)
    # are split into datagrams as they leave the client, not first at the link's TUN
    # device (which takes no UDP super-packets): the same work, earlier, so that the
    # terminal's interface, where captures are taken (run/session/captures.py), sees the
    # datagrams the link carries.
    sh.run(netns.exec_argv(p.ns("client"), ["ethtool", "-K", IF_LAN, "tx-udp-segmentation", "off"]))
    # Client and server: one route each, to the other LAN, through their link end.
    netns.batch(p.ns("client"), [f"route add {p.gw_lan.prefix} via {p.st_lan.address('terminal')}"])
    netns.batch(p.ns("server"), [f"route add {p.st_lan.prefix} via {p.gw_lan.address('gateway')}"])

    # The emulation network: a bridge in the satellite namespace, terminal and gateway
    # on it, the satellite's address on the bridge. Offloads stay on (satlink/README.md:
    # it uses no packet sockets, and on unshaped directions it carries TSO super-packets
    # read from its TUN device, which the veths' offloads keep fast). The link
    # implementation, started by the roles' agents, does the rest.
    sat_ns = p.ns("satellite")
    netns.batch(
        sat_ns,
        [
            f"link add {BRIDGE_EMU} mtu {EMU_MTU} type bridge",
            f"addr add {p.emu.cidr('satellite')} dev {BRIDGE_EMU}",
            f"link set {BRIDGE_EMU} up",
        ],
    )
    for role, port in SAT_EMU_PORTS.items():
        netns.veth(p.ns(role), IF_EMU, sat_ns, port, mtu=EMU_MTU)
        netns.batch(sat_ns, [f"link set {port} master {BRIDGE_EMU}", f"link set {port} up"])
        netns.batch(
            p.ns(role), [f"addr add {p.emu.cidr(role)} dev {IF_EMU}", f"link set {IF_EMU} up"]
        )

    build_cross_endpoints(p)

    # The client's names, and no TCP state carried from one load to the next.
    write_client_names(p)
    for role in ("client", "server", *CROSS_PLACES):
        netns.sysctls(p.ns(role), {"net.ipv4.tcp_no_metrics_save": "1"})


def build_cross_endpoints(p: NetnsPlan) -> None:
    """The cross-traffic endpoints: xclient behind the terminal, xserver behind the
    gateway, each on its own LAN (`xlan`), so that what they send shares the link but
    not the browser's LAN, host stack or the capture taken at the terminal's `lan`. The
    link implementations route the far cross LAN into the link (Addresses.remote_prefixes);
    each endpoint has one route, to the other's LAN, through its link end. Two namespaces
    and two veths: cheap enough to build with every testbed."""
    assert p.cross_lans is not None
    routes = {"xclient": p.cross_lans["xserver"], "xserver": p.cross_lans["xclient"]}
    for endpoint, link_end in CROSS_PLACES.items():
        lan = p.cross_lans[endpoint]
        netns.veth(p.ns(endpoint), IF_XLAN, p.ns(link_end), IF_XLAN)
        for member in (endpoint, link_end):
            netns.batch(
                p.ns(member),
                [f"addr add {lan.cidr(member)} dev {IF_XLAN}", f"link set {IF_XLAN} up"],
            )
        netns.batch(
            p.ns(endpoint), [f"route add {routes[endpoint].prefix} via {lan.address(link_end)}"]
        )


def netns_etc(plan: NetnsPlan, role: str = "client") -> Path:
    """`ip netns exec` bind-mounts the files in /etc/netns/<namespace>/ over /etc."""
    return Path("/etc/netns") / plan.ns(role)


def write_client_names(plan: NetnsPlan) -> None:
    """The client's names: the test host resolves to the server; nothing else resolves,
    and there is no DNS server, so anything a browser tries to reach outside the page
    fails inside the client and never crosses the link. Written before the client's
    agent starts: `ip netns exec` mounts it for the agent and the browsers it starts.
    A recorded site's names come from a resolver across the link (agent/names_slot.py:
    the client's stub), which points resolv.conf at it while it runs."""
    etc = netns_etc(plan)
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "hosts").write_text(f"127.0.0.1 localhost\n{plan.addresses['server']} {DEFAULT_HOST}\n")
    (etc / "resolv.conf").write_text(NO_DNS_SERVER)


def remove_etc(plan: NetnsPlan) -> None:
    for role in plan.namespaces:
        shutil.rmtree(netns_etc(plan, role), ignore_errors=True)
