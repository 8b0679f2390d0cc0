"""UDP echo for RTTs with microsecond resolution (ping prints whole ms above 100 ms).

udpping.py server ADDR PORT            echo every datagram back
udpping.py client ADDR PORT COUNT INTERVAL   print the RTTs (ms) as JSON
"""

import json
import socket
import sys
import time


def server(addr: str, port: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    print("ready", flush=True)
    while True:
        data, peer = s.recvfrom(2048)
        s.sendto(data, peer)


def client(addr: str, port: int, count: int, interval: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((addr, port))
    s.settimeout(0.01)
    sent: dict[int, int] = {}
    rtts: dict[int, float] = {}
    start = time.monotonic()
    n = 0
    deadline = None
    while True:
        now = time.monotonic()
        if n < count and now >= start + n * interval:
            sent[n] = time.perf_counter_ns()
            s.send(n.to_bytes(4, "big") + b"x" * 60)
            n += 1
            if n == count:
                deadline = now + 3.0
        if deadline is not None and (now > deadline or len(rtts) == count):
            break
        try:
            data = s.recv(2048)
        except TimeoutError:
            continue
        seq = int.from_bytes(data[:4], "big")
        if seq in sent and seq not in rtts:
            rtts[seq] = (time.perf_counter_ns() - sent[seq]) / 1e6
    print(json.dumps({"sent": count, "rtt_ms": [rtts[k] for k in sorted(rtts)]}))


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]))
    else:
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
