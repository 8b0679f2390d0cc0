"""Performance-enhancing proxies (PEPs): split-TCP proxies at both ends of the satellite
hop, the terminal and the gateway. An implementation (clarke.registry, kind `pep`) keeps
the role contract (clarke.roles) in the place of a station; the terminal's and the
gateway's agents host it beside the link (agent/pep_slot.py), so a testbed runs with
or without one, and changes between loads, without restarting the link.

    splittcp   Clarke's own (satlink/crates/splittcp): the gateway's outbound connection
               is not transparent, so the server sees the gateway's LAN address
    pepsal     PEPsal (CNES), where it is installed: transparent both ways (the server
               sees the client's address); its syn-table log lists what it split

A PEP's POST /pep/config body: {"name": NAME | "none", "hop_cc": "cubic" | "bbr" |
"reno", "hop_buffer_bytes": N} (hop_*: the satellite hop's connection). Its stats,
normalised: {"accepted", "relayed", "failed", "bytes_to_server", "bytes_to_client",
"connections": [{"accepted_from", "destination", "relayed_from", ...}]} (accepted: the
TCP connections it intercepted; relayed: those it opened its own connection for).
TCP only: QUIC (UDP) is never intercepted (tproxy.py)."""

from __future__ import annotations

from typing import Any, Final

from clarke.errors import InputError
from clarke.vocab import CONGESTION_CONTROLS, CongestionControl

SETTINGS: Final = ("hop_cc", "hop_buffer_bytes")
MAX_BUFFER_BYTES: Final = 1 << 30


def parse_settings(body: dict[str, Any]) -> dict[str, Any]:
    """A PEP's settings from a configure body (without `name`): InputError naming the
    field and what it takes."""
    unknown = sorted(set(body) - set(SETTINGS))
    if unknown:
        raise InputError(
            f"unknown key(s) {', '.join(map(repr, unknown))} in a PEP's configuration; "
            f"allowed: name, {', '.join(SETTINGS)}"
        )
    cc = body.get("hop_cc", CongestionControl.cubic.value)
    if cc not in CONGESTION_CONTROLS:
        raise InputError(f"hop_cc: {cc!r} is not one of {', '.join(CONGESTION_CONTROLS)}")
    buffer = body.get("hop_buffer_bytes", 0)
    if (
        not isinstance(buffer, int)
        or isinstance(buffer, bool)
        or not 0 <= buffer <= MAX_BUFFER_BYTES
    ):
        raise InputError(
            f"hop_buffer_bytes: an integer 0..{MAX_BUFFER_BYTES} is needed, not {buffer!r}"
        )
    return {"hop_cc": cc, "hop_buffer_bytes": buffer}
