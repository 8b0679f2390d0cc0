"""The testbed plan: roles, networks, namespace and interface names, and addresses per
testbed id. THE one place these are defined; netns, compose and analysis import it.

    client ──st-lan── terminal ══emu══ satellite ══emu══ gateway ──gw-lan── server
                         └───────────── sat (TUN, L3) ──────────┘

Testbed id N (0..63) owns four /24s of 198.18.0.0/16 and one /24 of 198.19.0.0/16:

    network  prefix              members
    st-lan   198.18.(4N).0/24    terminal .1, client .2
    emu      198.18.(4N+1).0/24  terminal .1, satellite .2 (on a bridge), gateway .3
    gw-lan   198.18.(4N+2).0/24  gateway .1, server .2
    sat      198.18.(4N+3).0/24  the emulated link's L3 ends: terminal .1, gateway .2
    mgmt     198.19.N.0/24       runner (root namespace) .1, client .2, terminal .3,
                                 satellite .4, gateway .5, server .6
    xst-lan  198.19.(64+N).0/25    cross traffic behind the terminal: terminal .1, xclient .2
    xgw-lan  198.19.(64+N).128/25  cross traffic behind the gateway: gateway .129, xserver .130

The compose substrate (docker-compose.yml) has one testbed per Compose project, on
fixed networks 198.19.128.0/24 .. 198.19.133.0/24 (ComposePlan below; the compose file
repeats these addresses and a test checks that they agree). 198.19.64.0 .. 198.19.127.0
are the netns testbeds' cross-traffic LANs; 198.19.134.0 and above stay free (other
tests use 198.19.200.0/24, the Slurm cluster of tests/slurm_cluster.py, 198.19.240.0/20
and 198.19.250.0/24).
Namespaces are `clk<N>-<role>` plus `clk<N>-mgmt`, which holds the management bridge,
and `clk<N>-xclient` / `clk<N>-xserver`, the cross-traffic endpoints (no agent: the
runner starts their generators in them, run/session/cross.py); each sits on its own LAN
(interface `xlan` at both ends), so the browser's LAN and the capture taken on it
carry only the page load;
the runner reaches it through one veth, `clk<N>-mgmt`, in the root namespace. No
namespace has a default route: client and server each have one route, to the other's
LAN, through the link; mgmt carries only its own /24."""

from __future__ import annotations

import ipaddress
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Final

from clarke.errors import InputError
from clarke.vocab import ROLES

MAX_ID: Final = 63
PREFIX: Final = "clk"
# Namespaces whose name matches this belong to a Clarke testbed (the sweep of
# `down --all` relies on it; other tools' prefixes such as `clarket-` never match).
NAME_RE: Final = re.compile(
    rf"^{PREFIX}(\d{{1,2}})-(client|terminal|satellite|gateway|server|mgmt|xclient|xserver)$"
)

# Interface names inside the namespaces (identical in every testbed: each lives in its
# own namespace). Only ROOT_MGMT_LINK is in the root namespace and carries the id.
IF_LAN: Final = "lan"  # client, server: their LAN; terminal, gateway: towards it
IF_EMU: Final = "emu"  # terminal, gateway: the emulation network
IF_SAT: Final = "sat0"  # terminal, gateway: satlink's TUN device
IF_MGMT: Final = "mgmt"  # every role: the management network
IF_XLAN: Final = "xlan"  # terminal, gateway and the cross endpoints: the cross LANs
# The cross-traffic endpoints and the link end each sits behind.
CROSS_PLACES: Final = {"xclient": "terminal", "xserver": "gateway"}
BRIDGE_EMU: Final = "br-emu"  # in the satellite namespace
BRIDGE_MGMT: Final = "br-mgmt"  # in the mgmt namespace
SAT_EMU_PORTS: Final = {"terminal": "emu-st", "gateway": "emu-gw"}  # bridge ports
EMU_PORT: Final = 4000  # satlink's UDP port on the emulation network (each role its own ns)
MGMT_HOST: Final = 1
MGMT_HOSTS: Final = {"client": 2, "terminal": 3, "satellite": 4, "gateway": 5, "server": 6}
AGENT_PORT: Final = 7000  # role agents on mgmt
HTTPS_PORT: Final = 443  # the server's pages, over TCP (HTTP/1.1, /2) and UDP (HTTP/3)
IPERF_PORT: Final = 5201  # the server role's iperf3 -s, for link checks
# origin's control endpoint: on the loopback of the role's own place (its namespace or
# container), reached only by the server role's agent there.
ORIGIN_CONTROL: Final = "127.0.0.1:7001"
# Host numbers per network, the same on both substrates.
_LAN_ST: Final = {"terminal": 1, "client": 2}
_EMU: Final = {"terminal": 1, "satellite": 2, "gateway": 3}
_LAN_GW: Final = {"gateway": 1, "server": 2}
_SAT: Final = {"terminal": 1, "gateway": 2}
_XLAN_ST: Final = {"terminal": 1, "xclient": 2}
_XLAN_GW: Final = {"gateway": 1, "xserver": 2}
_COMPOSE_MGMT: Final = {**MGMT_HOSTS, "influxdb": 7, "grafana": 8}


def check_id(testbed_id: int) -> int:
    if not isinstance(testbed_id, int) or not 0 <= testbed_id <= MAX_ID:
        raise InputError(f"testbed id must be an integer 0..{MAX_ID}, got {testbed_id!r}")
    return testbed_id


@dataclass(frozen=True)
class Network:
    name: str
    prefix: ipaddress.IPv4Network
    members: dict[str, int]  # role -> host number

    def address(self, role: str) -> str:
        return str(self.prefix.network_address + self.members[role])

    def cidr(self, role: str) -> str:
        return f"{self.address(role)}/{self.prefix.prefixlen}"


class Addresses(ABC):
    """The networks of one testbed and what follows from them; the same on both
    substrates, only the prefixes differ (NetnsPlan: netns, ComposePlan: compose).
    A subclass gives the five networks, as properties or as class attributes."""

    @property
    @abstractmethod
    def st_lan(self) -> Network: ...

    @property
    @abstractmethod
    def emu(self) -> Network: ...

    @property
    @abstractmethod
    def sat(self) -> Network: ...

    @property
    @abstractmethod
    def gw_lan(self) -> Network: ...

    @property
    @abstractmethod
    def mgmt(self) -> Network: ...

    @property
    def networks(self) -> list[Network]:
        return [self.st_lan, self.emu, self.sat, self.gw_lan, self.mgmt]

    @property
    def addresses(self) -> dict[str, str]:
        """Each role's address on the measurement path (client and server on their LANs,
        terminal and gateway on their LAN side, satellite on the emulation network)."""
        return {
            "client": self.st_lan.address("client"),
            "terminal": self.st_lan.address("terminal"),
            "satellite": self.emu.address("satellite"),
            "gateway": self.gw_lan.address("gateway"),
            "server": self.gw_lan.address("server"),
        }

    @property
    def cross_lans(self) -> dict[str, Network] | None:
        """The cross-traffic LANs by endpoint (xclient, xserver), where the substrate has
        them (netns); None where it has not (compose)."""
        return None

    def remote_prefixes(self, role: str) -> list[str]:
        """What a link end (terminal, gateway) routes into the link: the LAN at the other
        end and, where there are cross-traffic LANs, the one at the other end."""
        prefixes = [str(self.remote_lan(role).prefix)]
        if self.cross_lans:
            far = "xserver" if role in ("client", "terminal") else "xclient"
            prefixes.append(str(self.cross_lans[far].prefix))
        return prefixes

    def agent_url(self, role: str) -> str:
        return f"http://{self.mgmt.address(role)}:{AGENT_PORT}"

    def emu_endpoint(self, role: str) -> str:
        return f"{self.emu.address(role)}:{EMU_PORT}"

    def remote_lan(self, role: str) -> Network:
        """The LAN at the other end of the link, seen from a role on this side."""
        return self.gw_lan if role in ("client", "terminal") else self.st_lan

    def next_hop(self, role: str) -> str:
        """Client and server: the link end their route to the other LAN goes through."""
        if role == "client":
            return self.st_lan.address("terminal")
        if role == "server":
            return self.gw_lan.address("gateway")
        raise ValueError(f"{role} has no next hop into the link")


@dataclass(frozen=True)
class NetnsPlan(Addresses):
    id: int

    # --- names -------------------------------------------------------------------
    @property
    def prefix(self) -> str:
        return f"{PREFIX}{self.id}-"

    def ns(self, role: str) -> str:
        """Namespace of a role (or `mgmt`)."""
        return f"{self.prefix}{role}"

    @property
    def namespaces(self) -> dict[str, str]:
        return {role: self.ns(role) for role in (*ROLES, "mgmt", *CROSS_PLACES)}

    @property
    def root_mgmt_link(self) -> str:
        """The runner's veth into the mgmt namespace (root namespace side)."""
        return f"{self.prefix}mgmt"

    # --- networks ----------------------------------------------------------------
    def _net(self, offset: int) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"198.18.{4 * self.id + offset}.0/24")

    @property
    def st_lan(self) -> Network:
        return Network("st-lan", self._net(0), _LAN_ST)

    @property
    def emu(self) -> Network:
        return Network("emu", self._net(1), _EMU)

    @property
    def sat(self) -> Network:
        return Network("sat", self._net(3), _SAT)

    @property
    def gw_lan(self) -> Network:
        return Network("gw-lan", self._net(2), _LAN_GW)

    @property
    def mgmt(self) -> Network:
        prefix = ipaddress.IPv4Network(f"198.19.{self.id}.0/24")
        return Network("mgmt", prefix, {"runner": MGMT_HOST, **MGMT_HOSTS})

    @property
    def cross_lans(self) -> dict[str, Network]:
        return {
            "xclient": Network(
                "xst-lan", ipaddress.IPv4Network(f"198.19.{64 + self.id}.0/25"), _XLAN_ST
            ),
            "xserver": Network(
                "xgw-lan", ipaddress.IPv4Network(f"198.19.{64 + self.id}.128/25"), _XLAN_GW
            ),
        }

    @property
    def networks(self) -> list[Network]:
        return [*super().networks, *self.cross_lans.values()]

    # --- what others need ----------------------------------------------------------
    @property
    def mgmt_addresses(self) -> dict[str, str]:
        return {role: self.mgmt.address(role) for role in ("runner", *ROLES)}

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "namespaces": self.namespaces,
            "addresses": self.addresses,
            "mgmt": self.mgmt_addresses,
            "networks": {n.name: str(n.prefix) for n in self.networks},
        }


def plan(testbed_id: int) -> NetnsPlan:
    return NetnsPlan(check_id(testbed_id))


def parse_ns(name: str) -> tuple[int, str] | None:
    """(id, role) of a Clarke testbed namespace name, else None."""
    m = NAME_RE.fullmatch(name)
    if not m or int(m.group(1)) > MAX_ID:
        return None
    return int(m.group(1)), m.group(2)


# --- the compose substrate -------------------------------------------------------------

COMPOSE_NETWORKS: Final = ("st-lan", "emu", "gw-lan", "mgmt", "published")
COMPOSE_SERVICES: Final = (*ROLES, "influxdb", "grafana")
# Docker gives the host an address on every bridge network it makes; the roles' own
# addresses keep the host numbers of the netns plan, so the host takes .254.
DOCKER_HOST: Final = 254
INFLUX_PORT: Final = 8086
GRAFANA_PORT: Final = 3000


@dataclass(frozen=True)
class ComposePlan(Addresses):
    """The compose stack's networks (docker-compose.yml repeats them; a test checks it).

        network    prefix             members
        st-lan     198.19.128.0/24    terminal .1, client .2
        emu        198.19.129.0/24    terminal .1, satellite .2, gateway .3
        gw-lan     198.19.130.0/24    gateway .1, server .2
        mgmt       198.19.131.0/24    client .2, terminal .3, satellite .4, gateway .5,
                                      server .6, influxdb .7, grafana .8
        sat        198.19.132.0/24    the link's L3 ends inside terminal .1 and gateway .2
                                      (satlink's TUN, OpenSAND's bridge): no Docker network
        published  198.19.133.0/24    influxdb .7, grafana .8: only so that Docker can
                                      publish their ports on the host's loopback

    Every Docker network but `published` is internal (no route out of the host), and
    the role containers drop the default route Docker gives them anyway."""

    @property
    def st_lan(self) -> Network:
        return Network("st-lan", ipaddress.IPv4Network("198.19.128.0/24"), _LAN_ST)

    @property
    def emu(self) -> Network:
        return Network("emu", ipaddress.IPv4Network("198.19.129.0/24"), _EMU)

    @property
    def gw_lan(self) -> Network:
        return Network("gw-lan", ipaddress.IPv4Network("198.19.130.0/24"), _LAN_GW)

    @property
    def mgmt(self) -> Network:
        return Network("mgmt", ipaddress.IPv4Network("198.19.131.0/24"), _COMPOSE_MGMT)

    @property
    def sat(self) -> Network:
        return Network("sat", ipaddress.IPv4Network("198.19.132.0/24"), _SAT)

    @property
    def published(self) -> Network:
        hosts = {"influxdb": _COMPOSE_MGMT["influxdb"], "grafana": _COMPOSE_MGMT["grafana"]}
        return Network("published", ipaddress.IPv4Network("198.19.133.0/24"), hosts)

    @property
    def docker_networks(self) -> list[Network]:
        """The networks Docker makes, in COMPOSE_NETWORKS order."""
        return [self.st_lan, self.emu, self.gw_lan, self.mgmt, self.published]

    def docker_gateway(self, network: Network) -> str:
        return str(network.prefix.network_address + DOCKER_HOST)

    @property
    def influx_url(self) -> str:
        return f"http://{self.mgmt.address('influxdb')}:{INFLUX_PORT}"


def compose_plan() -> ComposePlan:
    return ComposePlan()
