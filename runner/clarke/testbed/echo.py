"""`python -m clarke.testbed.echo TARGET --count N --interval S`: ICMP echo with
microsecond RTTs, run inside a namespace (`ip netns exec`). iputils ping prints RTTs of
100 ms and more in whole milliseconds, too coarse to judge 530 ms +- 1 ms; here the send
time is taken just before sendto and the receive time is the kernel's timestamp of the
reply (SO_TIMESTAMPNS), both CLOCK_REALTIME. Prints one JSON object:
{"sent": N, "rtts_ms": [...] (in sequence order, lost ones absent), "lost": [seq, ...]}."""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import sys
import time

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def packet(ident: int, seq: int, size: int = 56) -> bytes:
    payload = bytes(range(size % 256)) * (size // 256) + bytes(range(size % 256))
    payload = payload[:size]
    header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    return struct.pack("!BBHHH", 8, 0, checksum(header + payload), ident, seq) + payload


def run(target: str, count: int, interval: float, timeout: float) -> dict[str, object]:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    ident = os.getpid() & 0xFFFF
    sent_at: dict[int, int] = {}
    rtts: dict[int, float] = {}
    start = time.monotonic()
    next_send, seq = start, 0
    deadline = None
    while True:
        now = time.monotonic()
        if seq < count and now >= next_send:
            data = packet(ident, seq)
            sent_at[seq] = time.time_ns()
            s.sendto(data, (target, 0))
            seq += 1
            next_send += interval
            if seq == count:
                deadline = time.monotonic() + timeout
        if deadline is not None and (len(rtts) == count or time.monotonic() > deadline):
            break
        wait = (next_send if seq < count else deadline or now) - time.monotonic()
        r, _, _ = select.select([s], [], [], max(0.0, wait))
        if not r:
            continue
        data, anc, _, _ = s.recvmsg(2048, socket.CMSG_SPACE(16))
        recv_ns = time.time_ns()
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", value[:16])
                recv_ns = sec * 1_000_000_000 + nsec
        ihl = (data[0] & 0x0F) * 4
        icmp_type, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl : ihl + 8])
        if icmp_type == 0 and rid == ident and rseq in sent_at and rseq not in rtts:
            rtts[rseq] = (recv_ns - sent_at[rseq]) / 1e6
    return {
        "sent": count,
        "rtts_ms": [rtts[k] for k in sorted(rtts)],
        "lost": [k for k in range(count) if k not in rtts],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("target")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--timeout", type=float, default=5.0, help="wait after the last echo")
    a = ap.parse_args()
    json.dump(run(a.target, a.count, a.interval, a.timeout), sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
