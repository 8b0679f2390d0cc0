"""The terminal's packet capture for real (tcpdump in a namespace): the cap stops it and
the file keeps whole packets only; what came before the cap is all there."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clarke.place import Place, netns
from clarke.place.capture import PCAP_HEADER, RECORD_HEADER, PacketCapture
from clarke.place.plan import plan
from conftest import need

pytestmark = pytest.mark.root
PLAN = plan(42)  # addresses only: no testbed 42 is built, the namespaces are this test's
DATAGRAM = 1000


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A terminal namespace holding the terminal's st-lan address and a client one."""
    need(os.geteuid() == 0, "root (network namespaces)")
    need(subprocess.run(["which", "tcpdump"], capture_output=True).returncode == 0, "tcpdump")
    tag = f"clarket-cap{os.getpid()}"
    term, client = f"{tag}-t", f"{tag}-c"
    lan = PLAN.st_lan
    try:
        for ns in (term, client):
            netns.add(ns)
        netns.veth(term, "lan", client, "lan")
        netns.batch(term, [f"addr add {lan.cidr('terminal')} dev lan", "link set lan up"])
        netns.batch(client, [f"addr add {lan.cidr('client')} dev lan", "link set lan up"])
        yield term, client
    finally:
        for ns in (term, client):
            netns.delete(ns)


def _send(client: str, count: int) -> None:
    code = (
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"for _ in range({count}): s.sendto(b'x' * {DATAGRAM}, "
        f"('{PLAN.st_lan.address('terminal')}', 9))"
    )
    subprocess.run(netns.exec_argv(client, [sys.executable, "-c", code]), check=True, timeout=60)


def _records(data: bytes) -> list[int]:
    sizes, at = [], PCAP_HEADER
    while at < len(data):
        (incl,) = struct.unpack_from("<I", data, at + 8)
        sizes.append(incl)
        at += RECORD_HEADER + incl
    assert at == len(data)
    return sizes


def test_the_cap_stops_the_capture_on_a_packet_boundary(
    pair: tuple[str, str], tmp_path: Path
) -> None:
    term, client = pair
    capture = PacketCapture(
        Place("netns", "terminal", PLAN, tmp_path, tmp_path, tmp_path, ns=term), "st-lan"
    )
    cap = 50_000
    capture.start(cap)
    _send(client, 20)  # about 21 KB: under the cap
    small = capture.stop()
    frames = [s for s in _records(small.pcap) if s >= DATAGRAM]
    assert len(frames) == 20 and not small.truncated and small.dropped == 0, small
    capture.start(cap)
    _send(client, 500)  # about 520 KB: ten times the cap
    big = capture.stop()
    print(f"cap {cap} B: pcap {len(big.pcap)} B, {len(_records(big.pcap))} packets")
    assert big.truncated
    assert cap - (RECORD_HEADER + DATAGRAM + 42) < len(big.pcap) <= cap
    assert not list((tmp_path / "captures").iterdir())  # nothing left behind
