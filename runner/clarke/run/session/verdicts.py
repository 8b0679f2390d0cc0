"""Verdicts on one load beyond the browser's own (browser/load.py judges protocols,
objects, FCP and LCP): what the server saw, and what the link ran. Each returns a
reason ("" when the load counts): a load that silently ran on something else is a
failed load, never a data point."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from clarke.campaign.dimensions import Cell
from clarke.contract import LinkState, ServerStats
from clarke.results.details import LoadDetails
from clarke.results.server_records import ServerConnection
from clarke.results.station_records import LinkRoleStats
from clarke.vocab import CongestionControl, HttpVersion


@dataclass(frozen=True)
class ServerVerdict:
    """What the server saw of a load (server_verdict): why it does not count ("" when it
    does), its metrics, the connections that served a request and their congestion
    controls."""

    failure: str
    metrics: dict[str, float | None]
    connections: list[ServerConnection]
    server_cc: list[str]

    def into(self, details: LoadDetails) -> None:
        """Into the load's details, in the order a record has them."""
        details.failure, details.metrics = self.failure, self.metrics
        details.server_connections, details.server_cc = self.connections, self.server_cc


def served(stats: ServerStats) -> list[ServerConnection]:
    """The connections that served at least one request."""
    return [c for c in stats.connections if c.requests > 0]


def server_verdict(
    stats: ServerStats,
    http: str,
    cc: str,
    page_bytes: int,
    page_requests: int,
    connections_per_server: int,
) -> ServerVerdict:
    """What the server saw for one load: its connections, whether each used the requested
    congestion control and protocol, whether the browser kept to its connection limit,
    and the protocol overhead on the wire."""
    conns = served(stats)
    version = HttpVersion(http)
    want_proto = version.tag
    want_cc = CongestionControl(cc).quic if version is HttpVersion.h3 else cc
    failure = ""
    if not conns:
        failure = "the server saw no request for the page"
    else:
        wrong_cc = [c for c in conns if c.cc != want_cc]
        wrong_proto = [c for c in conns if c.protocol != want_proto]
        if wrong_proto:
            got = ", ".join(sorted({str(c.protocol) for c in wrong_proto}))
            failure = (
                f"server saw {got} on {len(wrong_proto)} of {len(conns)} connections, "
                f"asked for {want_proto}"
            )
        elif wrong_cc:
            got = ", ".join(sorted({str(c.cc) for c in wrong_cc}))
            failure = (
                f"server used {got} on {len(wrong_cc)} of {len(conns)} connections, "
                f"asked for {want_cc}"
            )
        elif unmeasured := [c for c in conns if c.cc_source == "configured"]:
            # A server that reports where its `cc` came from (OpenLiteSpeed) and could
            # only repeat its configuration: what ran is unknown, so the load does not
            # count (origin measures every connection and reports no source).
            failure = (
                f"the server could not measure the congestion control of "
                f"{len(unmeasured)} of {len(conns)} connections (only configured: {want_cc})"
            )
    if not failure and len(conns) > connections_per_server:
        # Firefox opens a backup connection when a handshake is slow unless told not to
        # (browser/prefs.py): the load would measure another connection count.
        failure = (
            f"requests came on {len(conns)} connections, the limit was "
            f"{connections_per_server} per server"
        )
    requests = sum(c.requests for c in conns)
    if not failure and requests != page_requests:
        # Anything beyond the page (a browser's background request) crossed the link.
        failure = f"server answered {requests} requests, the page has {page_requests}"
    measured = [c for c in conns if c.measured]
    wire = sum(c.wire_bytes_sent or 0 for c in measured)
    ip = sum(c.ip_bytes_estimate or 0 for c in measured)
    app = sum(c.app_bytes_sent for c in conns)
    # Overhead only where every connection of the load reported its wire bytes.
    complete = bool(conns) and len(measured) == len(conns)
    metrics: dict[str, float | None] = {
        "connections_used": float(len(conns)),
        "server_requests": float(requests),
        "app_bytes": float(app),
        "wire_bytes": float(wire) if complete else None,
        "ip_bytes": float(ip) if complete else None,
        "overhead": (wire - page_bytes) / page_bytes if complete and page_bytes else None,
        "retrans_bytes": float(sum(c.retrans_bytes for c in measured)),
        "lost_packets": float(sum(c.lost_packets for c in measured)),
    }
    return ServerVerdict(failure, metrics, conns, sorted({str(c.cc) for c in conns}))


def link_verdict(expected: str, expected_sha256: str, states: Mapping[str, LinkState]) -> str:
    """Whether every link role runs the expected profile (by name and content hash);
    the reason when not."""
    wrong = {
        role: s
        for role, s in states.items()
        if (s.profile, s.profile_sha256) != (expected, expected_sha256)
    }
    if not wrong:
        return ""
    got = ", ".join(
        f"{role} {s.profile} ({str(s.profile_sha256 or '-')[:12]})" for role, s in wrong.items()
    )
    return (
        f"the link does not run profile {expected} ({expected_sha256[:12]}): {got}; "
        "something changed it besides this runner"
    )


def link_overhead(link_stats: Mapping[str, LinkRoleStats], page_bytes: int) -> dict[str, float]:
    """The satellite link's own count of the load's IP bytes (docs/metrics.md): per
    direction as the link implementation counts them (`bytes_onto_link`: satlink and
    netem at the sending station, OpenSAND at the receiving station's TAP), and three
    overhead figures against the page's bytes:

        link_overhead           (forward + return - page) / page
        link_overhead_forward   (forward - page) / page    towards the client
        link_overhead_return    return / page              towards the server

    Empty where no link role counts both directions, or the page has no bytes."""
    counted: dict[str, float] = {}
    for stats in link_stats.values():
        for direction, value in stats.bytes_onto_link.items():
            if direction in ("forward", "return") and isinstance(value, int | float):
                counted[direction] = float(value)
    if set(counted) != {"forward", "return"} or page_bytes <= 0:
        return {}
    forward, back = counted["forward"], counted["return"]
    return {
        "link_bytes_forward": forward,
        "link_bytes_return": back,
        "link_overhead": (forward + back - page_bytes) / page_bytes,
        "link_overhead_forward": (forward - page_bytes) / page_bytes,
        "link_overhead_return": back / page_bytes,
    }


def settings_verdict(cell: Cell, stats: ServerStats) -> str:
    """Whether the server started every connection of the load with the settings the
    cell put in force (each declared setting's own check, campaign/dimensions.py, on the
    connection's record as the server wrote it): why not, or ""."""
    conns = [c.written() for c in stats.connections if c.requests]
    for dimension, value in cell.items():
        check = dimension.setting.check if dimension.setting is not None else None
        if check is None:
            continue
        for conn in conns:
            why = check(value, conn)
            if why:
                return why
    return ""
