"""Performance-enhancing proxies (PEPs): split-TCP proxies at both ends of the satellite
hop, the terminal and the gateway. An implementation (clarke.registry, kind `pep`) keeps
the role contract (clarke.roles) in the place of a station; the terminal's and the
gateway's agents host it beside the link (agent/pep_slot.py), so a testbed runs with
or without one, and changes between loads, without restarting the link. What a
campaign names is a preset (clarke.pep_presets, peps/*.yaml); the runner turns it into
these settings for the link profile in force (run/session/pep.py).

    splittcp   Clarke's own (satlink/crates/splittcp): the gateway's outbound connection
               is not transparent, so the server sees the gateway's LAN address; mode
               split, or accelerated (pre-opened hop connections, tuned for the link)
    pepsal     PEPsal (CNES), where it is installed: transparent both ways (the server
               sees the client's address); its syn-table log lists what it split

A PEP's POST /pep/config body is the contract's PepConfig (clarke.contract): its name
and its settings (PepSettings; hop_*: the satellite hop's connection; per-direction
values are {"forward": N, "return": N}, each station taking the one it sends). Its
stats, normalised: {"accepted", "relayed", "failed", "bytes_to_server",
"bytes_to_client", "connections": [{"accepted_from", "destination", "relayed_from",
...}]} (accepted: the TCP connections it took; relayed:
those it carried onwards). TCP only: QUIC (UDP) is never intercepted (tproxy.py)."""

from __future__ import annotations

from typing import Final

from pydantic import ValidationError

from clarke.contract import PepSettings
from clarke.errors import InputError
from clarke.json_value import JsonObject
from clarke.schema import problems_of

# Where each station's hop key lives in its run directory (the agent writes it there,
# derived from the testbed's token: agent/pep_slot.py); only root reads it.
HOP_KEY_FILE: Final = "pep-hop.key"


def parse_settings(body: JsonObject) -> PepSettings:
    """A PEP's settings (the configure body without its name), as the contract has them;
    InputError naming each field that is not."""
    try:
        return PepSettings.model_validate(body)
    except ValidationError as e:
        raise InputError("a PEP's configuration: " + "; ".join(problems_of(e))) from None
