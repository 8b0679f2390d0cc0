"""OpenSAND 8.2: how a Clarke link profile maps onto its configuration (docs/opensand.md);
the XML itself is written by clarke.link.opensand.xml.

OpenSAND runs three entities: the gateway GW (id 0), the terminal ST (id 1) and a
transparent satellite SAT (id 2). `opensand -i infrastructure.xml -t topology.xml
[-p profile.xml]` reads per entity:

    gw/   infrastructure.xml  topology.xml  profile.xml
    st/   infrastructure.xml  topology.xml  profile.xml
    sat/  infrastructure.xml  topology.xml              (the satellite takes no profile)

The XML is built here with ElementTree from our own description of what each entity
needs; every value that depends on the profile comes from `derive()`, which also refuses
what OpenSAND cannot emulate (all problems at once, each naming the profile field).

How a profile maps (measurements: OpenSAND 8.2 in namespaces on a 2-core machine):

    idle RTT    physical_layer/delay/delay_value (GW and ST), one value for all four
                hops: RTT = 4 x delay_value + RTT_OVERHEAD_MS (22-25 ms measured, the
                DVB framing and processing), so delay_value = round((RTT - 23.5) / 4).
    forward     frequency_plan/spots/item/forward_band/item: ACM, wave_form 7 (QPSK 3/4),
    rate        bandwidth = rate_mbps x 950 kHz (9500 kHz carried 9.9 Mb/s of UDP).
    return      return_band/item: 48000 kHz DAMA carrier, wave_form 22, bursts of
    rate        1616 symbols; the terminal's constant rate assignment access/dama/cra
                (kb/s) = return rate_mbps x 1000 is what limits the return rate. With
                `return.dama`, capacity on demand instead: return_access.py.
    queue       network/gw_fifos (forward) and st_fifos (return): the BE FIFO's capacity
                in packets of 1500 bytes.
    loss        none only: OpenSAND has no bit or packet error model (below).
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field
from typing import Final

from clarke.errors import InputError, ValidationFailed
from clarke.link.opensand import delay_file, return_access
from clarke.link.opensand.return_access import ReturnAccess
from clarke.profiles import BitErrors, Direction, LinkProfile, PacketLoss
from clarke.vocab import QueueDiscipline

OPENSAND_VERSION: Final = "8.2"

# --- measured constants (docs/opensand.md, the mapping table) -------------------------
RTT_OVERHEAD_MS: Final = 23.5  # idle RTT = 4 x delay_value + 22..25 ms; the midpoint
RTT_OVERHEAD_RANGE_MS: Final = (22.0, 25.0)
FORWARD_KHZ_PER_MBPS: Final = 950  # 9500 kHz, ACM, wave_form 7 -> 10 Mb/s
FORWARD_WAVE_FORM: Final = 7  # QPSK 3/4; a fixed wave_form above 27 fails at clear sky
FORWARD_ROLL_OFF: Final = 0.35
# One 16200-bit DVB-S2 frame (8100 QPSK symbols) per 10 ms forward frame needs 810 kBd,
# i.e. 810 x 1.35 = 1094 kHz: below that a forward frame cannot carry one BBFRAME.
FORWARD_MIN_KHZ: Final = 1094
# Measured ceilings on a 2-core machine (CPU-bound): above them the link is slower than
# the profile, which `verify` will show; the mapping table says so.
FORWARD_MEASURED_MAX_MBPS: Final = 97.0
RETURN_MEASURED_MAX_MBPS: Final = 15.0
DECAP_BUFFER_LEN: Final = 12000  # 8 (OpenSAND's example) fails every forward packet
PACKET_BYTES: Final = 1500
FIFO_MAX_PACKETS: Final = 65535  # capacity is an unsigned short
CLEAR_SKY_CN_DB: Final = 20.0  # the GEO study's clear-sky channel (Table 2)

# Fixed wiring (docs/opensand.md): TAP name and MACs are the same in every testbed.
TAP_IFACE: Final = "opensand_tap"
BRIDGE_IFACE: Final = "opensand_br"
MAC_GW: Final = "00:00:00:00:00:01"
MAC_ST: Final = "00:00:00:00:00:02"
GLIBC_TUNABLES: Final = (
    "glibc.malloc.mmap_threshold=33554432:"
    "glibc.malloc.trim_threshold=536870912:"
    "glibc.malloc.top_pad=67108864"
)
ROLES: Final = ("gw", "st", "sat")
FILES: Final = {
    "gw": ("infrastructure.xml", "topology.xml", "profile.xml"),
    "st": ("infrastructure.xml", "topology.xml", "profile.xml"),
    "sat": ("infrastructure.xml", "topology.xml"),
}

# DVB-S2 MODCODs (ETSI EN 302 307-1, spectral efficiency in bit/symbol; required Es/N0
# in dB for quasi-error-free operation). Only ids up to 27 are offered: a forward carrier
# on 28 (32APSK 9/10) does not work at OpenSAND's default clear-sky C/N.
DVB_S2: Final = (
    (1, "QPSK", "1/4", 0.490, -2.35),
    (2, "QPSK", "1/3", 0.656, -1.24),
    (3, "QPSK", "2/5", 0.789, -0.30),
    (4, "QPSK", "1/2", 0.988, 1.00),
    (5, "QPSK", "3/5", 1.188, 2.23),
    (6, "QPSK", "2/3", 1.322, 3.10),
    (7, "QPSK", "3/4", 1.487, 4.03),
    (8, "QPSK", "4/5", 1.587, 4.68),
    (9, "QPSK", "5/6", 1.655, 5.18),
    (10, "QPSK", "8/9", 1.767, 6.20),
    (11, "QPSK", "9/10", 1.789, 6.42),
    (12, "8PSK", "3/5", 1.780, 5.50),
    (13, "8PSK", "2/3", 1.981, 6.62),
    (14, "8PSK", "3/4", 2.228, 7.91),
    (15, "8PSK", "5/6", 2.479, 9.35),
    (16, "8PSK", "8/9", 2.646, 10.69),
    (17, "8PSK", "9/10", 2.679, 10.98),
    (18, "16APSK", "2/3", 2.637, 8.97),
    (19, "16APSK", "3/4", 2.967, 10.21),
    (20, "16APSK", "4/5", 3.166, 11.03),
    (21, "16APSK", "5/6", 3.300, 11.61),
    (22, "16APSK", "8/9", 3.523, 12.89),
    (23, "16APSK", "9/10", 3.567, 13.13),
    (24, "32APSK", "3/4", 3.703, 12.73),
    (25, "32APSK", "4/5", 3.952, 13.64),
    (26, "32APSK", "5/6", 4.120, 14.28),
    (27, "32APSK", "8/9", 4.398, 15.69),
)
# The return carrier's capacity with constant access (no `return.dama`).
RETURN_CAPACITY_KBPS: Final = return_access.CONSTANT_CAPACITY_KBPS


# --- the entities ------------------------------------------------------------------------


@dataclass(frozen=True)
class Entities:
    """Ids and emulation-network addresses of the three entities. The SAT sends to GW
    and ST over UDP multicast on the same network, so all three share one subnet."""

    gw_emu: str
    st_emu: str
    sat_emu: str
    gw_id: int = 0
    st_id: int = 1
    sat_id: int = 2

    def __post_init__(self) -> None:
        for name in ("gw_emu", "st_emu", "sat_emu"):
            value = getattr(self, name)
            try:
                ipaddress.IPv4Address(value)
            except ValueError:
                raise InputError(
                    f"opensand entities: {name} is not an IPv4 address: {value!r}"
                ) from None
        ids = (self.gw_id, self.st_id, self.sat_id)
        if len(set(ids)) != 3 or not all(0 <= i <= 255 for i in ids):
            raise InputError(f"opensand entities: ids must be distinct, 0..255, got {ids}")
        if len({self.gw_emu, self.st_emu, self.sat_emu}) != 3:
            raise InputError("opensand entities: the three emulation addresses must differ")


# --- profile -> values ---------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One line of the mapping: a profile field, where it goes, what it becomes, why."""

    field: str
    profile_value: str
    xml: str
    value: str
    reason: str


@dataclass(frozen=True)
class Mapping:
    delay_value_ms: int
    expected_rtt_ms: float
    forward_bandwidth_khz: int
    forward_fifo_packets: int
    return_fifo_packets: int
    return_access: ReturnAccess
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    gateway_delay_file: str | None = None  # a schedule's FileDelay entries (delay_file.py)
    delay_refresh_ms: int = 0  # their tick

    @property
    def cra_kbps(self) -> int:
        return self.return_access.cra_kbps


def delay_value_for(idle_rtt_ms: float) -> int:
    """delay_value (ms, one per hop) whose measured idle RTT is closest to idle_rtt_ms:
    RTT = 4 x delay_value + RTT_OVERHEAD_MS."""
    return max(0, round((idle_rtt_ms - RTT_OVERHEAD_MS) / 4))


def expected_rtt_ms(delay_value: int) -> float:
    return 4 * delay_value + RTT_OVERHEAD_MS


def forward_bandwidth_khz(rate_mbps: float) -> int:
    return math.ceil(rate_mbps * FORWARD_KHZ_PER_MBPS)


def fifo_packets(d: Direction) -> int:
    """The profile's queue as a FIFO capacity in 1500-byte packets."""
    bound = d.queue.bound()
    size: float
    if bound.packets is not None:
        return max(1, min(FIFO_MAX_PACKETS, bound.packets))
    if bound.bytes is not None:
        size = bound.bytes
    else:
        size = d.rate_mbps * 1e6 * (bound.ms or 0) / 1000 / 8
    return max(1, min(FIFO_MAX_PACKETS, math.ceil(size / PACKET_BYTES)))


def _loss_problem(name: str, d: Direction) -> str | None:
    why = (
        "OpenSAND 8.2 has no bit or packet error model: its only error insertion "
        "(Gate) drops whole DVB frames when the C/N falls below the MODCOD's threshold, "
        "and on an ACM carrier the MODCOD follows the C/N instead; use the satlink or "
        "netem link for a lossy profile"
    )
    if isinstance(d.loss, BitErrors) and d.loss.bit_error_rate > 0:
        return f"{name}.loss.bit_error_rate: {d.loss.bit_error_rate:g} cannot be mapped: {why}"
    if isinstance(d.loss, PacketLoss) and d.loss.packet_rate > 0:
        return f"{name}.loss.packet_rate: {d.loss.packet_rate:g} cannot be mapped: {why}"
    return None


def _problems(profile: LinkProfile) -> list[str]:
    """What of `profile` OpenSAND cannot emulate, a line per field."""
    problems: list[str] = []
    fwd, ret = profile.forward, profile.return_
    fwd, ret = profile.forward, profile.return_

    # Rates.
    if fwd.rate_mbps <= 0:
        problems.append(
            "forward.rate_mbps: 0 (unlimited) cannot be mapped: an OpenSAND forward "
            "carrier always has a finite bandwidth"
        )
    elif forward_bandwidth_khz(fwd.rate_mbps) < FORWARD_MIN_KHZ:
        problems.append(
            f"forward.rate_mbps: {fwd.rate_mbps:g} is below "
            f"{FORWARD_MIN_KHZ / FORWARD_KHZ_PER_MBPS:.2f} Mb/s: a {FORWARD_MIN_KHZ} kHz "
            "carrier is the smallest that fits one DVB-S2 frame in a 10 ms forward frame"
        )
    if ret.rate_mbps <= 0:
        problems.append(
            "return.rate_mbps: 0 (unlimited) cannot be mapped: the terminal's return rate "
            "is its DAMA constant rate assignment (access/dama/cra), always finite"
        )
    elif ret.dama is None and ret.rate_mbps * 1000 > RETURN_CAPACITY_KBPS:
        problems.append(
            f"return.rate_mbps: {ret.rate_mbps:g} exceeds the return carrier's capacity "
            f"({RETURN_CAPACITY_KBPS / 1000:.1f} Mb/s: "
            f"{return_access.CONSTANT_BANDWIDTH_KHZ} kHz, "
            f"wave_form {return_access.RETURN_WAVE_FORM})"
        )
    elif ret.rate_mbps * 1000 < 1:
        problems.append(f"return.rate_mbps: {ret.rate_mbps:g} is below 1 kb/s (CRA's unit)")

    # Delay.
    rtt = profile.idle_rtt_ms
    if rtt < RTT_OVERHEAD_RANGE_MS[1]:
        problems.append(
            "forward/return uplink_delay_ms + downlink_delay_ms + framing_delay_ms: idle "
            f"RTT {rtt:g} ms is below what OpenSAND adds with no delay at all "
            f"({RTT_OVERHEAD_RANGE_MS[0]:g}-{RTT_OVERHEAD_RANGE_MS[1]:g} ms of DVB framing "
            "and processing)"
        )

    # Errors.
    for name, d in (("forward", fwd), ("return", ret)):
        problem = _loss_problem(name, d)
        if problem:
            problems.append(problem)
        if d.jitter is not None:
            problems.append(
                f"{name}.jitter: cannot be mapped: OpenSAND 8.2's delay plugins (ConstantDelay, "
                "FileDelay) give every packet the same delay; use the satlink link for a "
                "profile with jitter"
            )
        if d.dama is not None:
            problems += return_access.problems(d.dama)
        if d.queue.discipline is not QueueDiscipline.drop_tail:
            problems.append(
                f"{name}.queue.discipline: {d.queue.discipline} cannot be mapped: OpenSAND "
                "8.2's only queue is its drop-tail FIFO (gw_fifos / st_fifos capacity); "
                "use the satlink link for another discipline (docs/queues.md)"
            )

    # A link that changes over time: its delays, through the gateway's FileDelay.
    problems += delay_file.problems(profile, RTT_OVERHEAD_RANGE_MS)

    return problems


def derive(profile: LinkProfile, source: str = "link profile") -> Mapping:
    """Every profile-dependent OpenSAND value, or ValidationFailed listing each field that
    OpenSAND cannot emulate."""
    problems = _problems(profile)
    if problems:
        raise ValidationFailed(f"{source} (opensand link)", problems)
    fwd, ret = profile.forward, profile.return_
    rtt = profile.idle_rtt_ms
    delay = delay_value_for(rtt)
    bw = forward_bandwidth_khz(fwd.rate_mbps)
    access = (
        return_access.constant(ret.rate_mbps)
        if ret.dama is None
        else return_access.on_demand(ret.rate_mbps, ret.dama)
    )
    f_fifo, r_fifo = fifo_packets(fwd), fifo_packets(ret)
    rows = _rows(profile, delay, bw, access)
    notes = _notes(profile, access)
    schedule_file = None
    if profile.schedule is not None:
        schedule_file = delay_file.text(profile, RTT_OVERHEAD_MS)
        rows.append(
            Row(
                f"schedule {profile.schedule.id} (delays)",
                f"{len(profile.schedule.steps)} steps",
                "gw profile.xml: physical_layer/delay: FileDelay, gw/delay.txt; st: 0",
                f"every {delay_file.refresh_ms(profile)} ms",
                "the whole delay at the gateway (RTT = 2 x its value + "
                f"{RTT_OVERHEAD_MS:g} ms), whose clock starts with it; delay_value in "
                "whole ms, so the RTT moves in 2 ms steps",
            )
        )
    return Mapping(
        delay,
        expected_rtt_ms(delay),
        bw,
        f_fifo,
        r_fifo,
        access,
        rows,
        notes,
        schedule_file,
        delay_file.refresh_ms(profile) if schedule_file else 0,
    )


def _rows(profile: LinkProfile, delay: int, bw: int, access: ReturnAccess) -> list[Row]:
    """The mapping table: each profile value beside the OpenSAND value it became."""
    fwd, ret = profile.forward, profile.return_
    rtt = profile.idle_rtt_ms
    f_fifo, r_fifo = fifo_packets(fwd), fifo_packets(ret)
    return [
        Row(
            "idle RTT (both directions' uplink + downlink + framing)",
            f"{rtt:g} ms",
            "gw, st profile.xml: physical_layer/delay/delay_value",
            f"{delay}",
            f"RTT = 4 x delay_value + {RTT_OVERHEAD_MS:g} ms (22-25 measured): "
            f"expected {expected_rtt_ms(delay):g} ms",
        ),
        Row(
            "forward.rate_mbps",
            f"{fwd.rate_mbps:g}",
            "topology.xml: frequency_plan/spots/item/forward_band/item/bandwidth",
            f"{bw} (kHz)",
            f"{FORWARD_KHZ_PER_MBPS} kHz per Mb/s at wave_form {FORWARD_WAVE_FORM} "
            "(9500 kHz carried 9.9 Mb/s UDP)",
        ),
        Row(
            "(forward carrier)",
            "",
            "topology.xml: forward_band/item/type, wave_form",
            f"ACM, {FORWARD_WAVE_FORM}",
            "QPSK 3/4; fixed wave_forms above 27 fail at clear sky",
        ),
        *_return_rows(ret, access),
        Row(
            "forward.queue",
            _queue_text(fwd),
            "gw profile.xml: network/gw_fifos/item[name=BE]/capacity",
            f"{f_fifo} (packets)",
            f"queue / {PACKET_BYTES}-byte packets",
        ),
        Row(
            "return.queue",
            _queue_text(ret),
            "st profile.xml: network/st_fifos/item[name=BE]/capacity",
            f"{r_fifo} (packets)",
            f"queue / {PACKET_BYTES}-byte packets",
        ),
        Row(
            "forward.loss, return.loss",
            "none",
            "gw, st profile.xml: physical_layer/{uplink,downlink}_attenuation, error_insertion",
            f"clear_sky {CLEAR_SKY_CN_DB:g} dB, Ideal 0 dB, Gate",
            "no errors: C/N never drops below the MODCOD threshold (BER/PLR > 0 refused)",
        ),
        Row(
            "(encapsulation)",
            "",
            "gw, st profile.xml: encap/gse/decap_buffer_len",
            f"{DECAP_BUFFER_LEN}",
            "with 8 every forward packet fails (DecapErrorSizePduBuffer)",
        ),
        Row(
            "(storage)",
            "",
            "infrastructure.xml: storage/enable_collector, enable_local",
            "false, false",
            "no collector on the testbed; no local probe files",
        ),
    ]


def _notes(profile: LinkProfile, access: ReturnAccess) -> list[str]:
    """What a result made with this mapping should be read with."""
    fwd, ret = profile.forward, profile.return_
    notes = [
        "Forward TCP reaches only 70-80 % of the forward rate: OpenSAND 8.2.0's GSE "
        "encapsulation drops packets in bursts (not fixable by configuration); a "
        "9.8 Mbit tbf on the GW's TAP reduces the drops at 10 Mb/s. Record this with "
        "results made with the opensand link."
    ]
    notes += return_access.notes(ret, access)
    if fwd.one_way_delay_ms != ret.one_way_delay_ms:
        notes.append(
            f"One-way delays differ ({fwd.one_way_delay_ms:g} forward, "
            f"{ret.one_way_delay_ms:g} return ms): OpenSAND gets one delay per hop, so "
            "the idle RTT matches but each direction gets half of it."
        )
    if fwd.rate_mbps > FORWARD_MEASURED_MAX_MBPS:
        notes.append(
            f"forward.rate_mbps {fwd.rate_mbps:g} is above the ~{FORWARD_MEASURED_MAX_MBPS:g} "
            "Mb/s forward UDP measured at most on a 2-core machine (CPU-bound)."
        )
    if ret.rate_mbps > RETURN_MEASURED_MAX_MBPS:
        notes.append(
            f"return.rate_mbps {ret.rate_mbps:g} is above the 15-19 Mb/s return measured "
            "at most on a 2-core machine (CPU-bound)."
        )
    return notes


def _return_rows(ret: Direction, a: ReturnAccess) -> list[Row]:
    carrier = Row(
        "(return carrier)" if ret.dama is None else "return.rate_mbps (the carrier)",
        "" if ret.dama is None else f"{ret.rate_mbps:g}",
        "topology.xml: return_band/item bandwidth, type, wave_form; "
        "advanced_settings/schedulers/burst_length",
        f"{a.bandwidth_khz} (kHz), DAMA, {a.wave_form}, {a.burst}",
        "536-symbol bursts overload the GW"
        if ret.dama is None
        else f"{a.carrier_bursts} bursts of 1616 symbols (16QAM 5/6, "
        f"{return_access.DAMA_BURST_KBPS:.2f} kb/s each) per frame: the carrier caps every grant",
    )
    dama = ret.dama
    if dama is None:
        return [
            Row(
                "return.rate_mbps",
                f"{ret.rate_mbps:g}",
                "st profile.xml: access/dama/cra",
                f"{a.cra_kbps} (kb/s)",
                f"CRA caps the return rate; within the carrier's {RETURN_CAPACITY_KBPS} kb/s",
            ),
            carrier,
        ]
    return [
        carrier,
        Row(
            "return.dama.cra_kbps",
            f"{dama.cra_kbps:g}",
            "st profile.xml: access/dama/cra",
            f"{a.cra_kbps} (kb/s)",
            "whole bursts, at least one",
        ),
        Row(
            "return.dama.rbdc_max_kbps, vbdc_max_kbit",
            f"{dama.rbdc_max_kbps:g}, {dama.vbdc_max_kbit:g}",
            "st profile.xml: access/dama/rbdc_max, vbdc_max; network/st_fifos access_type",
            f"{a.rbdc_max_kbps or 'off'}, {a.vbdc_max_kbit or 'off'}; {a.fifo_access_type}",
            "RBDC at most the rate less the CRA; VBDC only without RBDC (one FIFO type)",
        ),
        Row(
            "return.dama.request_period_sf",
            f"{dama.request_period_sf}",
            "topology.xml: advanced_settings/timers/synchro",
            f"{a.synchro_ms} (ms)",
            "the terminal requests once per sync period",
        ),
        Row(
            "return.dama.allocation_latency_ms",
            f"{dama.allocation_latency_ms:g}",
            "st profile.xml: access/dama/duration",
            f"{a.msl_frames} (frames)",
            "the MSL, rounded up; OpenSAND's loop itself is its round trip",
        ),
    ]


def _queue_text(d: Direction) -> str:
    return d.queue.bound().describe()


def mapping_table(profile: LinkProfile, source: str = "link profile") -> str:
    """The mapping as a human-readable (Markdown) table, followed by the notes."""
    m = derive(profile, source)
    head = ("profile field", "profile value", "OpenSAND XML", "value", "why")
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in m.rows:
        lines.append(f"| {r.field} | {r.profile_value} | {r.xml} | {r.value} | {r.reason} |")
    lines += ["", *(f"- {n}" for n in m.notes)]
    return "\n".join(lines) + "\n"
