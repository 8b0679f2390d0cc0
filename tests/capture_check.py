"""Reading a load's capture back as a user would: tshark (Debian's Wireshark) opens the
pcap, decrypts it with the browser's key log and finds the page's requests in it; the
packets per direction add up to what the link counted; an HTTP/3 qlog parses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from clarke.campaign.dimensions import HTTP
from clarke.place.plan import MAX_ID, plan
from clarke.results.record import RunRecord

MTU = 1500
# Packets in flight when the capture stopped (counted by the link, not yet at the
# terminal's interface, or the other way round): a few, never a page's worth.
IN_FLIGHT_PACKETS = 4


def tshark(pcap: Path, keylog: Path, display_filter: str, *fields: str) -> list[list[str]]:
    argv = ["tshark", "-n", "-r", str(pcap), "-o", f"tls.keylog_file:{keylog}"]
    argv += ["-Y", display_filter, "-T", "fields"]
    for f in fields:
        argv += ["-e", f]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
    return [line.split("\t") for line in out.splitlines() if line.strip()]


def decrypted_requests(pcap: Path, keylog: Path, http: str, client: str) -> int:
    """How many requests tshark finds in the decrypted traffic."""
    if http == "1.1":
        return len(tshark(pcap, keylog, "http.request", "http.request.uri"))
    if http == "2":
        return len(tshark(pcap, keylog, "http2.headers.path", "http2.headers.path"))
    # HTTP/3: tshark 4.0 decodes no QPACK; each request is a client-initiated
    # bidirectional QUIC stream (id % 4 == 0), readable only once decrypted.
    rows = tshark(
        pcap, keylog, f"ip.src == {client} && quic.stream.stream_id", "quic.stream.stream_id"
    )
    ids = {int(i) for row in rows for i in row[0].split(",") if i}
    return len({i for i in ids if i % 4 == 0})


def ip_bytes(pcap: Path, keylog: Path) -> dict[str, int]:
    total: dict[str, int] = {}
    for src, length in tshark(pcap, keylog, "ip", "ip.src", "ip.len"):
        total[src] = total.get(src, 0) + int(length)
    return total


def check_capture(results: Path, r: RunRecord) -> None:
    kept = r.details.capture
    assert kept is not None and kept.kept and kept.dir, kept
    capture = kept.written()  # as the journal has it
    folder = results / kept.dir
    pcap, keylog = folder / "link.pcap", folder / "keys.log"
    assert capture["pcap"]["truncated"] is False and capture["pcap"]["packets_dropped"] == 0
    assert pcap.stat().st_size == capture["files"]["link.pcap"] > 24
    assert keylog.read_text().count("CLIENT_TRAFFIC_SECRET_0") >= 1
    by_source = ip_bytes(pcap, keylog)
    # The testbed the campaign used: the one whose client and server sent these packets.
    p = next(
        p
        for p in map(plan, range(MAX_ID + 1))
        if p.st_lan.address("client") in by_source and p.gw_lan.address("server") in by_source
    )
    client_ip, server_ip = p.st_lan.address("client"), p.gw_lan.address("server")
    requests = decrypted_requests(pcap, keylog, r.cell[HTTP], client_ip)
    forward, ret = r.metrics["link_bytes_forward"], r.metrics["link_bytes_return"]
    print(
        f"{r.run_id}: pcap {pcap.stat().st_size} B, {capture['pcap']['packets_captured']} "
        f"packets; IP bytes server->client {by_source[server_ip]} (link forward {forward:.0f}), "
        f"client->server {by_source[client_ip]} (link return {ret:.0f}); decrypted requests "
        f"{requests} (server {r.metrics['server_requests']:.0f})"
    )
    assert requests == r.metrics["server_requests"]
    assert abs(by_source[server_ip] - forward) <= IN_FLIGHT_PACKETS * MTU
    assert abs(by_source[client_ip] - ret) <= IN_FLIGHT_PACKETS * MTU
    qlogs = sorted((folder / "qlog").glob("*.sqlog")) if (folder / "qlog").is_dir() else []
    if r.cell[HTTP] == "3":
        assert qlogs, capture["files"]
        for q in qlogs:
            records = [json.loads(x) for x in q.read_bytes().split(b"\x1e") if x.strip()]
            assert records[0]["qlog_format"] == "JSON-SEQ"
            names = {rec.get("name") for rec in records[1:]}
            assert "transport:packet_received" in names, sorted(n for n in names if n)[:20]
    else:
        assert not qlogs
