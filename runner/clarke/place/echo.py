"""`python -m clarke.place.echo TARGET --count N --interval S [--size B]`: ICMP echo with
microsecond RTTs, run inside a namespace (`ip netns exec`). iputils ping prints RTTs of
100 ms and more in whole milliseconds, too coarse to judge 530 ms +- 1 ms. Here both
times are the kernel's (SO_TIMESTAMPING, software): the send time when the request
left for the device, the receive time when the reply arrived, so that this process being
scheduled late (several testbeds on two cores) does not count as link delay. Without a
transmit timestamp the user-space send time is used. Prints one JSON object:
{"sent": N, "rtts_ms": [...] (in sequence order, lost ones absent), "sent_unix_ns": [...]
(their send times), "lost": [seq, ...], "lost_sent_unix_ns": [...] (the lost ones' send
times)}."""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import sys
import time

SO_TIMESTAMPING = 37  # = SCM_TIMESTAMPING
TS_FLAGS = (
    (1 << 1)  # SOF_TIMESTAMPING_TX_SOFTWARE
    | (1 << 3)  # SOF_TIMESTAMPING_RX_SOFTWARE
    | (1 << 4)  # SOF_TIMESTAMPING_SOFTWARE
    | (1 << 7)  # SOF_TIMESTAMPING_OPT_ID: ee_data counts sends from 0
    | (1 << 11)  # SOF_TIMESTAMPING_OPT_TSONLY: no packet copy on the error queue
)
IP_RECVERR = 11


def _timestamp(anc: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, value in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(value) >= 16:
            sec, nsec = struct.unpack("qq", value[:16])
            if sec or nsec:
                return sec * 1_000_000_000 + nsec
    return None


def _tx_id(anc: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, value in anc:
        if level == socket.SOL_IP and kind == IP_RECVERR and len(value) >= 16:
            return struct.unpack("IBBBBII", value[:16])[6]
    return None


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def packet(ident: int, seq: int, size: int = 56) -> bytes:
    payload = bytes(i % 256 for i in range(size))
    header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    return struct.pack("!BBHHH", 8, 0, checksum(header + payload), ident, seq) + payload


def run(
    target: str, count: int, interval: float, timeout: float, size: int = 56
) -> dict[str, object]:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, TS_FLAGS)
    s.setblocking(False)
    ident = os.getpid() & 0xFFFF
    sent_at: dict[int, int] = {}
    rtts: dict[int, float] = {}
    kernel_tx: set[int] = set()
    start = time.monotonic()
    next_send, seq = start, 0
    deadline = None
    while True:
        now = time.monotonic()
        if seq < count and now >= next_send:
            data = packet(ident, seq, size)
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
        try:  # transmit timestamps first (they wake select() as errors)
            _, anc, _, _ = s.recvmsg(64, 512, socket.MSG_ERRQUEUE)
            tx_id, ts = _tx_id(anc), _timestamp(anc)
            if tx_id is not None and ts is not None and tx_id in sent_at:
                sent_at[tx_id] = ts
                kernel_tx.add(tx_id)
            continue
        except BlockingIOError:
            pass
        try:
            data, anc, _, _ = s.recvmsg(2048, 512)
        except BlockingIOError:
            continue
        recv_ns = _timestamp(anc) or time.time_ns()
        ihl = (data[0] & 0x0F) * 4
        icmp_type, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl : ihl + 8])
        if icmp_type == 0 and rid == ident and rseq in sent_at and rseq not in rtts:
            rtts[rseq] = (recv_ns - sent_at[rseq]) / 1e6
    return {
        "sent": count,
        "rtts_ms": [rtts[k] for k in sorted(rtts)],
        # when each answered request left (kernel timestamp where there is one), Unix ns
        "sent_unix_ns": [sent_at[k] for k in sorted(rtts)],
        "lost": [k for k in range(count) if k not in rtts],
        "lost_sent_unix_ns": [sent_at[k] for k in range(count) if k not in rtts and k in sent_at],
        "kernel_tx_timestamps": len(kernel_tx),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("target")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--timeout", type=float, default=5.0, help="wait after the last echo")
    ap.add_argument(
        "--size", type=int, default=56, choices=range(8, 1473), metavar="8..1472",
        help="payload bytes of each echo (56: 84-byte packets; 1472: a full 1500-byte one)",
    )  # fmt: skip
    a = ap.parse_args()
    json.dump(run(a.target, a.count, a.interval, a.timeout, a.size), sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
