"""OpenSAND 8.2's return link for a profile: the DVB-RCS2 carrier and the terminal's DAMA
(docs/opensand.md, "The return link").

A profile without `return.dama` keeps the settings the RTT formula and the return rates
were measured with: a 48000 kHz carrier of 1616-symbol bursts (wave_form 22, 16QAM 5/6)
and a constant rate assignment (CRA) equal to the return rate, so the terminal never asks.

A profile with `return.dama` (capacity on demand) gets OpenSAND's Legacy DAMA from the
same fields satlink reads, with what OpenSAND cannot do said in the mapping's notes:

    superframe_ms        advanced_settings/links/return_duration; only 26.5 ms, the frame
                         the RTT formula was measured with
    request_period_sf    advanced_settings/timers/synchro (ms): the terminal sends a
                         request once per sync period (BlockDvbTal's OBR slot)
    cra_kbps             access/dama/cra. OpenSAND grants whole bursts (its unit converter
                         rounds a rate up), so the CRA becomes the nearest whole number of
                         1616-symbol 16QAM 5/6 bursts, 203.2 kb/s each per 26.5 ms frame
                         (at least one). The smallest burst OpenSAND has (536 symbols of
                         QPSK 1/3, 13.48 kb/s) would keep a small CRA small, but measured
                         on geo-consumer it lost 15 % of echoes sent every 200 ms and every
                         TCP SYN sent after a second of idle: not usable
    rbdc_max_kbps        access/dama/rbdc_enabled, rbdc_max: at most the rate less the CRA
    vbdc_max_kbit        access/dama/vbdc_enabled, vbdc_max (kbit per sync period), used
                         only without RBDC: a FIFO has one access type, and an RBDC
                         request in OpenSAND's Legacy agent also drains the backlog over
                         the MSL (DamaAgentRcs2Legacy::computeRbdcRequest)
    allocation_latency   access/dama/duration, the MSL in frames, rounded up. OpenSAND's
                         own request-grant loop is its round trip (request to the gateway,
                         burst time plan back); the MSL only sets how fast a request
                         drains the backlog
    rbdc_timeout_sf      not settable: OpenSAND uses the sync period + 1 superframes
    rate_mbps            the carrier: the whole number of bursts per frame nearest the
                         rate, so that no grant exceeds it by more than half a burst
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from clarke.profiles import Dama, Direction

RETURN_FRAME_MS: Final = 26.5  # return_duration: the RTT formula was measured with it
RETURN_ROLL_OFF: Final = 0.2
CONSTANT_SYNCHRO_MS: Final = 1000  # with CRA = rate the terminal never needs to ask
CONSTANT_MSL_FRAMES: Final = 23

# DVB-RCS2 reference waveforms (ETSI EN 301 545-2, annex A): id, modulation, coding,
# spectral efficiency (bit/symbol, burst overheads included), required Es/N0 (dB).
# OpenSAND keeps only those whose burst length is the scheduler's: 1616 symbols here.
DVB_RCS2: Final = (
    (13, "QPSK", "1/3", 0.61, -0.51),
    (14, "QPSK", "1/2", 0.93, 1.71),
    (15, "QPSK", "2/3", 1.30, 3.69),
    (16, "QPSK", "3/4", 1.47, 4.73),
    (17, "QPSK", "5/6", 1.64, 5.94),
    (18, "8PSK", "2/3", 1.75, 7.49),
    (19, "8PSK", "3/4", 1.98, 8.77),
    (20, "8PSK", "5/6", 2.19, 10.23),
    (21, "16QAM", "3/4", 2.66, 10.72),
    (22, "16QAM", "5/6", 2.96, 12.04),
)

# Both kinds of access: 1616-symbol bursts of wave_form 22; 536-symbol ones overload the
# gateway on the wide carrier, and lost packets on a narrow one (the module's docstring).
RETURN_WAVE_FORM: Final = 22  # 16QAM 5/6, defined for 1616-symbol bursts
RETURN_BURST: Final = "1616 sym"
RETURN_BURST_SYMBOLS: Final = 1616
CONSTANT_BANDWIDTH_KHZ: Final = 48000
CONSTANT_CAPACITY_KBPS: Final = int(
    CONSTANT_BANDWIDTH_KHZ
    / (1 + RETURN_ROLL_OFF)
    * next(row[3] for row in DVB_RCS2 if row[0] == RETURN_WAVE_FORM)
)

# Capacity on demand, on a carrier sized to the rate. OpenSAND's unit converter: one
# burst per frame is 1616 symbols x 4 bit (16QAM) per 26.5 ms, of which the code rate
# 5/6 is payload.
DAMA_BURST_KBPS: Final = RETURN_BURST_SYMBOLS * 4 / RETURN_FRAME_MS * 5 / 6  # 203.27


@dataclass(frozen=True)
class ReturnAccess:
    """The return carrier and the terminal's access settings, as OpenSAND takes them."""

    bandwidth_khz: int
    cra_kbps: int
    rbdc_max_kbps: int = 0  # 0: RBDC off
    vbdc_max_kbit: int = 0  # 0: VBDC off
    msl_frames: int = CONSTANT_MSL_FRAMES
    synchro_ms: int = CONSTANT_SYNCHRO_MS
    # The one access type of the terminal's FIFOs; with constant access it is never
    # used (the CRA carries everything), and it is what the measurements had.
    fifo_access_type: str = "DAMA_RBDC"
    carrier_bursts: int = 0  # bursts per frame the carrier holds, with capacity on demand

    @property
    def on_demand(self) -> bool:
        return self.carrier_bursts > 0

    @property
    def wave_form(self) -> int:
        return RETURN_WAVE_FORM

    @property
    def burst(self) -> str:
        return RETURN_BURST


def constant(rate_mbps: float) -> ReturnAccess:
    """Today's measured access: a wide carrier and a CRA of the whole return rate."""
    return ReturnAccess(CONSTANT_BANDWIDTH_KHZ, round(rate_mbps * 1000))


def problems(dama: Dama) -> list[str]:
    """What in `return.dama` OpenSAND cannot take, each naming its field."""
    out = []
    if dama.superframe_ms != RETURN_FRAME_MS:
        out.append(
            f"return.dama.superframe_ms: {dama.superframe_ms:g} cannot be mapped: Clarke's "
            f"OpenSAND return frame is {RETURN_FRAME_MS:g} ms, the frame its RTT formula was "
            "measured with"
        )
    return out


def bursts_for(kbps: float) -> int:
    """The nearest whole number of bursts per frame, at least one."""
    return max(1, round(kbps / DAMA_BURST_KBPS))


def on_demand(rate_mbps: float, dama: Dama) -> ReturnAccess:
    """OpenSAND's DAMA for a profile's `return.dama` (problems() must be empty)."""
    carrier_bursts = bursts_for(rate_mbps * 1000)
    # Symbols per frame for that many bursts, as a bandwidth (the roll-off on top); the
    # gateway divides it back into whole bursts.
    symbol_rate_kbd = carrier_bursts * RETURN_BURST_SYMBOLS / RETURN_FRAME_MS
    bandwidth = math.ceil(symbol_rate_kbd * (1 + RETURN_ROLL_OFF))
    # A value OpenSAND rounds up to exactly n bursts: n x 203.27, rounded down.
    cra = math.floor(bursts_for(dama.cra_kbps) * DAMA_BURST_KBPS) if dama.cra_kbps else 0
    rbdc = min(round(dama.rbdc_max_kbps), max(0, round(rate_mbps * 1000) - cra))
    vbdc = 0 if rbdc else round(dama.vbdc_max_kbit)
    return ReturnAccess(
        bandwidth_khz=bandwidth,
        cra_kbps=cra,
        rbdc_max_kbps=rbdc,
        vbdc_max_kbit=vbdc,
        msl_frames=math.ceil(dama.allocation_latency_ms / RETURN_FRAME_MS - 1e-9),
        synchro_ms=math.ceil(dama.request_period_sf * RETURN_FRAME_MS),
        fifo_access_type="DAMA_RBDC" if rbdc else "DAMA_VBDC" if vbdc else "DAMA_CRA",
        carrier_bursts=carrier_bursts,
    )


def notes(ret: Direction, access: ReturnAccess) -> list[str]:
    """What the profile's `return.dama` becomes in OpenSAND where it is not the same."""
    dama = ret.dama
    if dama is None:
        return []
    out = [
        "Measured on geo-consumer (docs/validation.md): OpenSAND 8.2 kept capacity granted "
        "through 1.5 s of idle, so a full-sized packet after idle did not wait for a grant; "
        "its gateway's RBDC timer ends a terminal's credit, not its last request.",
        f"Capacity on demand: OpenSAND's request-grant loop is its own round trip (the "
        f"request to the gateway and the burst time plan back), not the profile's "
        f"allocation_latency_ms {dama.allocation_latency_ms:g}, which sets only the MSL "
        f"({access.msl_frames} frames) over which a request drains the backlog.",
        f"RBDC timeout: OpenSAND holds a rate grant for the sync period + 1 superframes "
        f"({round(access.synchro_ms / RETURN_FRAME_MS) + 1}), not the profile's "
        f"rbdc_timeout_sf {dama.rbdc_timeout_sf}.",
    ]
    if dama.cra_kbps and access.cra_kbps != round(dama.cra_kbps):
        out.append(
            f"CRA {dama.cra_kbps:g} kb/s becomes {access.cra_kbps} kb/s: OpenSAND grants "
            f"whole bursts ({DAMA_BURST_KBPS:.2f} kb/s each, 1616 symbols of 16QAM 5/6 per "
            f"{RETURN_FRAME_MS:g} ms frame), so a full-sized packet crosses in the CRA "
            "within a few frames."
        )
    if dama.vbdc_max_kbit and access.rbdc_max_kbps:
        out.append(
            f"VBDC ({dama.vbdc_max_kbit:g} kbit) is not requested: the terminal's FIFO has "
            "one access type, RBDC, whose request in OpenSAND's Legacy agent also drains "
            "the backlog."
        )
    return out
