"""Performance-enhancing proxies (PEPs): split-TCP proxies at both ends of the satellite
hop, the terminal and the gateway. An implementation (clarke.registry, kind `pep`) keeps
the role contract (clarke.roles) in the place of a station; the terminal's and the
gateway's agents host it beside the link (agent/pep_slot.py), so a testbed runs with
or without one, and changes between loads, without restarting the link. What a
campaign names is a preset (clarke.pep_presets, peps/*.yaml); the runner turns it into
these settings for the link profile in force (run/pep.py).

    splittcp   Clarke's own (satlink/crates/splittcp): the gateway's outbound connection
               is not transparent, so the server sees the gateway's LAN address; mode
               split, or accelerated (pre-opened hop connections, tuned for the link)
    pepsal     PEPsal (CNES), where it is installed: transparent both ways (the server
               sees the client's address); its syn-table log lists what it split

A PEP's POST /pep/config body: {"name": NAME | "none", ...SETTINGS} (below; hop_*: the
satellite hop's connection; per-direction values are {"forward": N, "return": N}, each
station taking the one it sends). Its stats, normalised: {"accepted", "relayed",
"failed", "bytes_to_server", "bytes_to_client", "connections": [{"accepted_from",
"destination", "relayed_from", ...}]} (accepted: the TCP connections it took; relayed:
those it carried onwards). TCP only: QUIC (UDP) is never intercepted (tproxy.py)."""

from __future__ import annotations

from typing import Any, Final

from clarke.errors import InputError
from clarke.vocab import CONGESTION_CONTROLS, DIRECTIONS

SETTINGS: Final = (
    "preset",
    "mode",
    "hop_cc",
    "hop_buffer_bytes",
    "hop_initial_window",
    "hop_max_pacing_rate",
    "pool_size",
    "pool_max_opening",
    "pool_spare",
)
MODES: Final = ("split", "accelerated")
MAX_BUFFER_BYTES: Final = 1 << 30
MAX_INITIAL_WINDOW: Final = 65_535  # segments (a route's initcwnd)
MAX_PACING_RATE: Final = 1 << 40  # bytes per second
# Where each station's hop key lives in its run directory (the agent writes it there,
# derived from the testbed's token: agent/pep_slot.py); only root reads it.
HOP_KEY_FILE: Final = "pep-hop.key"


def _int(body: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = body.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InputError(f"{key}: an integer {low}..{high} is needed, not {value!r}")
    return value


def _per_direction(body: dict[str, Any], key: str, high: int) -> dict[str, int]:
    value = body.get(key, dict.fromkeys(DIRECTIONS, 0))
    if not isinstance(value, dict) or set(value) != set(DIRECTIONS):
        raise InputError(f"{key}: {{'forward': N, 'return': N}} is needed, not {value!r}")
    return {d: _int(value, d, 0, 0, high) for d in DIRECTIONS}


def parse_settings(body: dict[str, Any]) -> dict[str, Any]:
    """A PEP's settings from a configure body (without `name`): InputError naming the
    field and what it takes."""
    unknown = sorted(set(body) - set(SETTINGS))
    if unknown:
        raise InputError(
            f"unknown key(s) {', '.join(map(repr, unknown))} in a PEP's configuration; "
            f"allowed: name, {', '.join(SETTINGS)}"
        )
    cc = body.get("hop_cc", "cubic")
    if cc not in CONGESTION_CONTROLS:
        raise InputError(f"hop_cc: {cc!r} is not one of {', '.join(CONGESTION_CONTROLS)}")
    mode = body.get("mode", "split")
    if mode not in MODES:
        raise InputError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    preset = body.get("preset", "")
    if not isinstance(preset, str) or len(preset) > 64:
        raise InputError(f"preset: a name is needed, not {preset!r}")
    return {
        "preset": preset,
        "mode": mode,
        "hop_cc": cc,
        "hop_buffer_bytes": _int(body, "hop_buffer_bytes", 0, 0, MAX_BUFFER_BYTES),
        "hop_initial_window": _per_direction(body, "hop_initial_window", MAX_INITIAL_WINDOW),
        "hop_max_pacing_rate": _per_direction(body, "hop_max_pacing_rate", MAX_PACING_RATE),
        "pool_size": _int(body, "pool_size", 0, 0, 256),
        "pool_max_opening": _int(body, "pool_max_opening", 1, 1, 64),
        "pool_spare": _int(body, "pool_spare", 0, 0, 256),
    }
