"""A PEP (performance-enhancing proxy) in a load: what the stations are asked to run (a
preset, peps/*.yaml, turned into settings for the link profile in force), and whether
the load ran as asked. A load with a PEP whose TCP was not split, or not accelerated
when the preset accelerates, or without one whose TCP was, is a failed load with the
reason, never a data point.

How a load proves what happened (docs/peps.md):
- splittcp, split: every TCP connection the server saw comes from the gateway's LAN
  address (the gateway's proxy connects non-transparently); the terminal's proxy
  intercepted connections from the client, the gateway's intercepted as many as the
  terminal's relayed, and none failed.
- splittcp, accelerated: as split, and every client connection took a pre-opened hop
  connection (none paid a handshake across the link), the gateway carried every
  stream the terminal sent, and the hop's window at its first data towards the client
  was the preset's first window, paced as the preset says (TCP_INFO, per connection).
- pepsal: transparent both ways, so the server sees the client; the interception at
  the terminal and at the gateway must each have handed it at least as many
  connections (SYNs, counted by iptables) as the server saw.
- QUIC (HTTP/3) is never intercepted: its connections at the server come from the
  client's address, whatever PEP runs.
- no PEP: every connection at the server comes from the client's address."""

from __future__ import annotations

import math

from clarke import pep_presets
from clarke.contract import PepConfig
from clarke.json_value import JsonObject
from clarke.pep.splittcp import SplitTcp
from clarke.pep_presets import ACCELERATED, Pacing
from clarke.place.plan import Addresses
from clarke.profiles import LinkProfile
from clarke.results.server_records import ServerConnection
from clarke.results.station_records import PepConnection, PepStationStats
from clarke.run.linkcheck.check import expected_rtt_ms
from clarke.vocab import DIRECTIONS, PEP_NONE, HttpVersion

MIN_HOP_BUFFER = 256 * 1024
# The hop's payload per segment: a 1500-byte MTU less IPv4, TCP and timestamp headers.
HOP_MSS = 1448
# The PEPs whose outbound connection is not transparent (the server sees the gateway).
NON_TRANSPARENT = (SplitTcp.name,)


def _rate_mbps(profile: LinkProfile, direction: str) -> float:
    return float((profile.forward if direction == "forward" else profile.return_).rate_mbps)


def bdp_bytes(profile: LinkProfile, direction: str) -> float:
    """The bandwidth-delay product of one direction at the profile's idle RTT (0 for an
    unlimited rate)."""
    return _rate_mbps(profile, direction) * 1e6 / 8 * expected_rtt_ms(profile) / 1e3


def hop_buffer_bytes(profile: LinkProfile, bdps: float = 2.0) -> int:
    """Socket buffers for the satellite hop: `bdps` bandwidth-delay products of its
    faster direction, at least MIN_HOP_BUFFER, so a window never caps the hop."""
    bdp = max(bdp_bytes(profile, d) for d in DIRECTIONS)
    return max(MIN_HOP_BUFFER, int(bdps * bdp))


def _peak_rate_mbps(profile: LinkProfile, direction: str) -> float:
    """The highest rate a direction has, schedule included (a pacing cap below it would
    slow the hop when the link is faster)."""
    steps = [rate for _, _, rate in profile.in_force(direction)]
    return max([_rate_mbps(profile, direction), *steps])


def pep_body(name: str, cc: str, profile: LinkProfile) -> PepConfig:
    """The stations' POST /pep/config for a run with preset `name` on `profile`."""
    if name == PEP_NONE:
        return PepConfig(name=PEP_NONE)
    preset = pep_presets.read(name)
    hop = preset.hop
    body: JsonObject = {
        "name": preset.implementation,
        "preset": name,
        "mode": preset.mode,
        "hop_cc": cc if hop.congestion_control == pep_presets.RUN_CC else hop.congestion_control,
        "hop_buffer_bytes": hop_buffer_bytes(profile, hop.buffer_bdp),
    }
    if preset.mode == ACCELERATED and preset.pool is not None:
        body["hop_initial_window"] = {
            d: math.ceil(hop.initial_window_bdp * bdp_bytes(profile, d) / HOP_MSS)
            for d in DIRECTIONS
        }
        body["hop_max_pacing_rate"] = {
            d: round(_peak_rate_mbps(profile, d) * 1e6 / 8) if hop.pacing is Pacing.link_rate else 0
            for d in DIRECTIONS
        }
        body |= {
            "pool_size": preset.pool.size,
            "pool_max_opening": preset.pool.max_opening,
            "pool_spare": preset.pool.spare,
        }
    return PepConfig.model_validate(body)


def _host(address: object) -> str:
    """The IP of "a.b.c.d:port" (IPv4 as origin reports peers)."""
    return str(address).rsplit(":", 1)[0]


def running_preset(station: PepStationStats) -> str:
    """What a station's PEP stats say it runs: its preset, else its implementation."""
    return str(station.preset or running_implementation(station))


NO_STATION = PepStationStats()  # a station that said nothing


def pep_verdict(
    pep: str,
    http: str,
    server_connections: list[ServerConnection],
    stations: dict[str, PepStationStats],
    plan: Addresses,
    asked: PepConfig | None = None,
) -> str:
    """Why the load did not run with preset `pep` as asked, or "". `stations`: the
    terminal's and the gateway's PEP stats since the load's reset; `asked`: what they
    were asked to run (pep_body)."""
    client, gateway = plan.addresses["client"], plan.addresses["gateway"]
    peers = [_host(c.peer) for c in server_connections if c.peer]
    running = {role: running_preset(s) for role, s in stations.items()}
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
    terminal, gw = stations.get("terminal", NO_STATION), stations.get("gateway", NO_STATION)
    failed = {r: s.failed for r, s in stations.items() if s.failed}
    if failed:
        return f"PEP {pep} failed to relay connections: " + ", ".join(
            f"{r} {n}" for r, n in sorted(failed.items())
        )
    accepted_t, accepted_g = terminal.accepted or 0, gw.accepted or 0
    if accepted_t < len(server_connections) or accepted_g < len(server_connections):
        return (
            f"TCP was not split: the server saw {len(server_connections)} connection(s), the "
            f"PEP intercepted {accepted_t} at the terminal and {accepted_g} at the gateway"
        )
    if running_implementation(terminal) not in NON_TRANSPARENT:
        return ""
    # Its rows are complete (closed connections stay listed until the next reset).
    from_client = [c for c in terminal.connections if _host(c.accepted_from) == client]
    if len(from_client) < len(server_connections):
        return (
            f"TCP was not split: the terminal's PEP took {len(from_client)} connection(s) "
            f"from the client {client}, the server saw {len(server_connections)}"
        )
    if accepted_g != (terminal.relayed or 0):
        return (
            f"the gateway's PEP took {accepted_g} connection(s), the terminal's relayed "
            f"{terminal.relayed or 0}: something else crossed the link"
        )
    others = sorted({p for p in peers if p != gateway})
    if peers_known and others:
        return (
            f"TCP was not split: the server saw connections from {', '.join(others)}, not "
            f"from the gateway {gateway}"
        )
    if terminal.mode == ACCELERATED:
        return accelerated_verdict(from_client, gw, asked or PepConfig())
    return ""


def running_implementation(station: PepStationStats) -> str:
    return str(station.pep if station.has("pep") else PEP_NONE)


def accelerated_verdict(
    from_client: list[PepConnection], gateway: PepStationStats, asked: PepConfig
) -> str:
    """Why a split load was not accelerated as the preset says, or "": a client
    connection that found no pre-opened hop connection, a stream the gateway did not
    carry, or a hop whose window at its first data towards the client was smaller than
    the preset's first window (or not paced as asked)."""
    size = asked.pool_size
    missed = [c for c in from_client if not (c.hop and c.hop.pre_opened)]
    if missed:
        return (
            f"not accelerated: {len(missed)} of {len(from_client)} client connection(s) found "
            f"no pre-opened hop connection (pool of {size}): their handshake crossed the link"
        )
    sent = {c.stream for c in from_client}
    carried = {c.stream for c in gateway.connections}
    lost = sorted(s for s in sent - carried if s is not None)
    if lost:
        return f"the gateway's hop listener did not carry stream(s) {lost} the terminal sent"
    # The gateway sends towards the client: the forward direction's settings.
    window = asked.hop_initial_window.forward
    pacing = asked.hop_max_pacing_rate.forward
    for c in gateway.connections:
        first = c.hop_first_data
        if not c.bytes_to_client or (c.hop.streams if c.hop else None) != 1:
            continue  # no data towards the client, or a hop reused (its window is its own)
        if first is None:
            return f"not accelerated: no hop window was recorded for stream {c.stream}"
        wanted = window * (first.mss or HOP_MSS)
        if window and (first.window_bytes or 0) < wanted:
            return (
                f"not accelerated: the hop's window at its first data for stream "
                f"{c.stream} was {first.window_bytes} bytes (cwnd "
                f"{first.cwnd} segments, the terminal's window {first.snd_wnd} "
                f"bytes), the preset asks for {wanted} ({window} segments)"
            )
        if pacing and first.max_pacing_rate != pacing:
            return (
                f"not accelerated: the hop of stream {c.stream} was paced at "
                f"{first.max_pacing_rate} bytes/s, the preset asks for {pacing}"
            )
    return ""


def pep_metrics(stations: dict[str, PepStationStats]) -> dict[str, float]:
    """pep_<station>_accepted / _relayed / _bytes_to_client of a load with a PEP; with
    hop connections (accelerated): how many client connections took a pre-opened one
    (pep_hops_pre_opened) or opened their own (pep_hops_opened_on_demand), the hop
    connections the terminal opened during the load (pep_hop_handshakes), and the
    smallest window a hop had at its first data towards the client
    (pep_hop_first_window_bytes, pep_hop_first_cwnd)."""
    out: dict[str, float] = {}
    for role, s in stations.items():
        for key, value in (
            ("accepted", s.accepted),
            ("relayed", s.relayed),
            ("bytes_to_client", s.bytes_to_client),
        ):
            if value is not None:
                out[f"pep_{role}_{key}"] = float(value)
    terminal = stations.get("terminal", NO_STATION)
    gateway = stations.get("gateway", NO_STATION)
    if terminal.mode != ACCELERATED:
        return out
    uses = [c.hop for c in terminal.connections if c.hop]
    out["pep_hops_pre_opened"] = float(sum(1 for h in uses if h.pre_opened))
    out["pep_hops_opened_on_demand"] = float(sum(1 for h in uses if not h.pre_opened))
    out["pep_hop_handshakes"] = float(terminal.hops_opened or 0)
    firsts = [
        c.hop_first_data for c in gateway.connections if c.hop_first_data and c.bytes_to_client
    ]
    if firsts:
        out["pep_hop_first_window_bytes"] = float(min(f.window_bytes or 0 for f in firsts))
        out["pep_hop_first_cwnd"] = float(min(f.cwnd or 0 for f in firsts))
    return out
