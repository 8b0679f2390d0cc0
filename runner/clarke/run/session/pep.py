"""A PEP (performance-enhancing proxy) in a load: what the stations are asked to run, and
whether the load ran as asked. A load with a PEP whose TCP was not split, or without one
whose TCP was, is a failed load with the reason, never a data point.

How a load proves the split (docs/peps.md):
- splittcp: every TCP connection the server saw comes from the gateway's LAN address
  (the gateway's proxy connects non-transparently); the terminal's proxy intercepted
  connections from the client, the gateway's intercepted as many as the terminal's
  relayed, and none failed.
- pepsal: transparent both ways, so the server sees the client; the interception at
  the terminal and at the gateway must each have handed it at least as many
  connections (SYNs, counted by iptables) as the server saw.
- QUIC (HTTP/3) is never intercepted: its connections at the server come from the
  client's address, whatever PEP runs.
- no PEP: every connection at the server comes from the client's address."""

from __future__ import annotations

from typing import Any

from clarke.pep.splittcp import SplitTcp
from clarke.place.plan import Addresses
from clarke.profiles import LinkProfile
from clarke.run.linkcheck.check import expected_rtt_ms
from clarke.vocab import PEP_NONE, HttpVersion

MIN_HOP_BUFFER = 256 * 1024
# The PEPs whose outbound connection is not transparent (the server sees the gateway).
NON_TRANSPARENT = (SplitTcp.name,)


def hop_buffer_bytes(profile: LinkProfile) -> int:
    """Socket buffers for the satellite hop: twice its bandwidth-delay product (the faster
    direction, at the profile's idle RTT), so a window never caps the hop."""
    rate = max(profile.forward.rate_mbps, profile.return_.rate_mbps)
    bdp = rate * 1e6 / 8 * expected_rtt_ms(profile) / 1e3
    return max(MIN_HOP_BUFFER, int(2 * bdp))


def pep_body(name: str, cc: str, profile: LinkProfile) -> dict[str, Any]:
    """The stations' POST /pep/config body for a run: the hop takes the run's cc."""
    if name == PEP_NONE:
        return {"name": PEP_NONE}
    return {"name": name, "hop_cc": cc, "hop_buffer_bytes": hop_buffer_bytes(profile)}


def _host(address: object) -> str:
    """The IP of "a.b.c.d:port" (IPv4 as origin reports peers)."""
    return str(address).rsplit(":", 1)[0]


def pep_verdict(
    pep: str,
    http: str,
    server_connections: list[dict[str, Any]],
    stations: dict[str, dict[str, Any]],
    plan: Addresses,
) -> str:
    """Why the load did not run with `pep` as asked, or "". `stations`: the terminal's
    and the gateway's PEP stats since the load's reset."""
    client, gateway = plan.addresses["client"], plan.addresses["gateway"]
    peers = [_host(c["peer"]) for c in server_connections if c.get("peer")]
    running = {role: s.get("pep", PEP_NONE) for role, s in stations.items()}
    wrong = {r: n for r, n in running.items() if n != pep}
    if wrong:
        got = ", ".join(f"{r} runs {n}" for r, n in sorted(wrong.items()))
        return f"asked for PEP {pep}, but {got}"
    # A server that does not name every connection's peer leaves the PEP's own counts.
    peers_known = len(peers) == len(server_connections)
    quic = HttpVersion(http) is HttpVersion.h3
    if (pep == PEP_NONE or quic) and not peers_known:
        return ""
    if pep == PEP_NONE or quic:
        others = sorted({p for p in peers if p != client})
        if others:
            what = "QUIC passed a PEP" if quic and pep != PEP_NONE else "no PEP was asked for"
            return (
                f"{what}, yet the server saw connections from {', '.join(others)}, not only "
                f"the client {client}"
            )
        return ""
    terminal, gw = stations.get("terminal", {}), stations.get("gateway", {})
    failed = {r: int(s.get("failed", 0)) for r, s in stations.items() if s.get("failed")}
    if failed:
        return f"PEP {pep} failed to relay connections: " + ", ".join(
            f"{r} {n}" for r, n in sorted(failed.items())
        )
    accepted_t, accepted_g = int(terminal.get("accepted", 0)), int(gw.get("accepted", 0))
    if accepted_t < len(server_connections) or accepted_g < len(server_connections):
        return (
            f"TCP was not split: the server saw {len(server_connections)} connection(s), the "
            f"PEP intercepted {accepted_t} at the terminal and {accepted_g} at the gateway"
        )
    if pep in NON_TRANSPARENT:
        # Its rows are complete (closed connections stay listed until the next reset).
        from_client = [
            c for c in terminal.get("connections", []) if _host(c.get("accepted_from")) == client
        ]
        if len(from_client) < len(server_connections):
            return (
                f"TCP was not split: the terminal's PEP took {len(from_client)} connection(s) "
                f"from the client {client}, the server saw {len(server_connections)}"
            )
        if accepted_g != int(terminal.get("relayed", 0)):
            return (
                f"the gateway's PEP took {accepted_g} connection(s), the terminal's relayed "
                f"{terminal.get('relayed', 0)}: something else crossed the link"
            )
        others = sorted({p for p in peers if p != gateway})
        if peers_known and others:
            return (
                f"TCP was not split: the server saw connections from {', '.join(others)}, not "
                f"from the gateway {gateway}"
            )
    return ""


def pep_metrics(stations: dict[str, dict[str, Any]]) -> dict[str, float]:
    """pep_<station>_accepted / _relayed / _bytes_to_client of a load with a PEP."""
    out: dict[str, float] = {}
    for role, s in stations.items():
        for key in ("accepted", "relayed", "bytes_to_client"):
            if isinstance(s.get(key), int | float):
                out[f"pep_{role}_{key}"] = float(s[key])
    return out
