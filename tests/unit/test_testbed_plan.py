"""The testbed plan: names short enough, addresses distinct per id, inside 198.18.0.0/15
and clear of the ranges other tests use."""

from __future__ import annotations

import ipaddress

import pytest

from clarke.errors import InputError
from clarke.place import plan as tp

TESTBED_NET = ipaddress.ip_network("198.18.0.0/15")
RESERVED = [
    ipaddress.ip_network("198.19.200.0/24"),  # tests/slurm_cluster.py
    ipaddress.ip_network("198.19.240.0/20"),
    ipaddress.ip_network("198.19.250.0/24"),
]


def test_every_id_has_disjoint_networks_inside_the_benchmark_range() -> None:
    seen: dict[ipaddress.IPv4Network, tuple[int, str]] = {}
    for i in range(tp.MAX_ID + 1):
        for net in tp.plan(i).networks:
            assert net.prefix.subnet_of(TESTBED_NET), (i, net)
            assert not any(net.prefix.overlaps(r) for r in RESERVED), (i, net)
            for other, owner in seen.items():
                assert not net.prefix.overlaps(other), (i, net.name, owner)
            seen[net.prefix] = (i, net.name)


def test_addresses_are_distinct_and_on_their_networks() -> None:
    all_addresses: set[str] = set()
    for i in (0, 1, 17, tp.MAX_ID):
        p = tp.plan(i)
        for net in p.networks:
            for role in net.members:
                addr = ipaddress.ip_address(net.address(role))
                assert addr in net.prefix and addr != net.prefix.network_address
                assert addr != net.prefix.broadcast_address
                assert str(addr) not in all_addresses
                all_addresses.add(str(addr))
        assert set(p.addresses) == set(tp.ROLES)
        # client and server are on different LANs, with the link between them
        assert ipaddress.ip_address(p.addresses["client"]) in p.st_lan.prefix
        assert ipaddress.ip_address(p.addresses["server"]) in p.gw_lan.prefix


def test_names_fit_linux_limits_and_parse_back() -> None:
    for i in range(tp.MAX_ID + 1):
        p = tp.plan(i)
        assert len(p.root_mgmt_link) <= 15
        for role, ns in p.namespaces.items():
            assert tp.parse_ns(ns) == (i, role)
    for name in (tp.IF_LAN, tp.IF_EMU, tp.IF_SAT, tp.IF_MGMT, tp.BRIDGE_EMU, tp.BRIDGE_MGMT):
        assert len(name) <= 15
    for port in tp.SAT_EMU_PORTS.values():
        assert len(port) <= 15


def test_other_tools_namespaces_are_not_ours() -> None:
    for name in ("clarket-client", "clarket-0-client", "clk64-client", "clk1-browser", "x"):
        assert tp.parse_ns(name) is None


@pytest.mark.parametrize("bad", [-1, tp.MAX_ID + 1, 1000])
def test_out_of_range_ids_are_refused(bad: int) -> None:
    with pytest.raises(InputError, match=r"0\.\.63"):
        tp.plan(bad)


def test_to_dict_is_what_up_json_prints() -> None:
    d = tp.plan(3).to_dict()
    assert d["id"] == 3
    assert d["namespaces"]["server"] == "clk3-server"  # type: ignore[index]
    assert d["addresses"]["server"] == "198.18.14.2"  # type: ignore[index]
    assert d["mgmt"]["runner"] == "198.19.3.1"  # type: ignore[index]


def test_cross_traffic_lans_are_routed_through_the_link_and_clear_of_compose() -> None:
    p = tp.plan(5)
    x = p.cross_lans
    assert (str(x["xclient"].prefix), str(x["xserver"].prefix)) == (
        "198.19.69.0/25",
        "198.19.69.128/25",
    )
    assert (x["xclient"].address("terminal"), x["xserver"].address("xserver")) == (
        "198.19.69.1",
        "198.19.69.130",
    )
    # Each link end routes the far LAN and the far cross LAN into the link.
    assert p.remote_prefixes("terminal") == [str(p.gw_lan.prefix), "198.19.69.128/25"]
    assert p.remote_prefixes("gateway") == [str(p.st_lan.prefix), "198.19.69.0/25"]
    compose = tp.compose_plan()
    assert compose.cross_lans is None
    assert compose.remote_prefixes("terminal") == [str(compose.gw_lan.prefix)]
    for i in range(tp.MAX_ID + 1):
        for net in tp.plan(i).cross_lans.values():
            assert not any(net.prefix.overlaps(c.prefix) for c in compose.docker_networks)
