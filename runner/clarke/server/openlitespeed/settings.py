"""What the runner changes on OpenLiteSpeed between runs (docs/openlitespeed.md): the
congestion controls (`OlsSettings`), and POST /config's body over them
(`settings_from_body`), with what OpenLiteSpeed cannot be asked and why.

- QUIC: quicCongestionCtrl's choices, 1 Cubic and 2 BBR (lsquic has no NewReno);
  config.py writes it into the server's configuration.
- TCP: OpenLiteSpeed has no setting for it; the kernel's choice applies (tcp_cc.py).
- The stream scheduler: its own, which it has no setting for (OWN_SCHEDULER).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

from clarke.errors import InputError
from clarke.vocab import CONGESTION_CONTROLS, CongestionControl, Scheduler

TCP_CC: Final = CONGESTION_CONTROLS
# quicCongestionCtrl's documented choices (ServTuning_Help, WebAdmin): 1 Cubic, 2 BBR.
QUIC_CC: Final = {CongestionControl.cubic.value: 1, CongestionControl.bbr.value: 2}
CONFIG_KEYS: Final = ("tcp_cc", "quic_cc")
# What OpenLiteSpeed's scheduler is, as far as its source says (docs/scheduling.md; not
# measured here): it has no setting for it.
OWN_SCHEDULER: Final = (
    "HTTP/2: its connection's eight priority queues (src/spdy/h2connection.h); HTTP/3: lsquic's"
)


def _check_choice(field_name: str, value: object, allowed: tuple[str, ...], why: str = "") -> str:
    if not isinstance(value, str) or value not in allowed:
        extra = f" ({why})" if why else ""
        raise InputError(
            f"{field_name}: {value!r} is not allowed{extra}; allowed: {', '.join(allowed)}"
        )
    return value


@dataclass(frozen=True)
class OlsSettings:
    """What the runner changes between runs: the congestion controls."""

    tcp_cc: str = CongestionControl.cubic
    quic_cc: str = CongestionControl.cubic

    def __post_init__(self) -> None:
        _check_choice("tcp_cc", self.tcp_cc, TCP_CC)
        if self.quic_cc in (CongestionControl.reno, CongestionControl.reno.quic):
            raise InputError(
                f"quic_cc: {self.quic_cc!r} is not available in OpenLiteSpeed: its QUIC "
                "library (lsquic) implements Cubic and BBR only (quicCongestionCtrl 1 or 2); "
                f"allowed: {', '.join(QUIC_CC)}"
            )
        _check_choice("quic_cc", self.quic_cc, tuple(QUIC_CC))

    @property
    def quic_congestion_ctrl(self) -> int:
        return QUIC_CC[self.quic_cc]


def settings_from_body(body: object, current: OlsSettings) -> OlsSettings:
    """POST /config's body (any subset of tcp_cc, quic_cc; scheduler `own` only; site
    null only) over the current settings."""
    if not isinstance(body, dict):
        raise InputError('POST /config takes a JSON object such as {"tcp_cc": "bbr"}')
    scheduler = body.get("scheduler")
    if scheduler is not None and scheduler != Scheduler.own:
        raise InputError(
            f"scheduler: {scheduler}: OpenLiteSpeed keeps its own stream scheduler "
            f"({OWN_SCHEDULER}); only {Scheduler.own} can be asked of it"
        )
    if body.get("site") is not None:
        raise InputError(
            f"site: {body['site']}: OpenLiteSpeed does not replay recorded sites (that needs "
            "a virtual host per recorded origin, each with its certificate, on addresses of "
            "its own, and a miss counted per request: origin does this); use the origin "
            "server"
        )
    if body.get("quic_initial_window") is not None:
        raise InputError(
            "quic_initial_window: not supported by OpenLiteSpeed, which has no setting for "
            "QUIC's initial congestion window (lsquic's own applies); leave it out or null"
        )
    unknown = sorted(set(body) - {*CONFIG_KEYS, "quic_initial_window", "scheduler", "site"})
    if unknown:
        raise InputError(
            f"unknown key(s) {', '.join(map(repr, unknown))} in POST /config; allowed: "
            f"{', '.join(CONFIG_KEYS)} (tcp_cc: {', '.join(TCP_CC)}; "
            f"quic_cc: {', '.join(QUIC_CC)})"
        )
    return dataclasses.replace(current, **{k: body[k] for k in CONFIG_KEYS if k in body})
