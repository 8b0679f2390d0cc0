"""`clarke link schedule leo`: a LEO link's delays and hand-overs from TLEs.

Every satellite of a TLE file is propagated with SGP4 (the `sgp4` library: Vallado's
reference implementation) over a time window. At the start of each reconfiguration slot
(Starlink reassigns terminals to satellites every 15 s) the serving satellite is the one
with the highest elevation above the minimum elevation at the terminal (and, when a
gateway is given, above it at the gateway too). The slot's one-way delays are the slant
ranges over the speed of light, held for the whole slot:

    forward (gateway -> terminal): uplink = gateway range / c, downlink = terminal range / c
    return  (terminal -> gateway): uplink = terminal range / c, downlink = gateway range / c

Without a gateway the gateway is taken to be beside the terminal (both hops have the
terminal's slant range): a bent pipe to a nearby ground station. A change of serving
satellite may cut the link for --handover-outage-ms; a slot without any satellite above
the minimum elevation is an outage. The schedule loops over the window.

Geometry: the terminal on the WGS-84 ellipsoid; SGP4's TEME positions rotated into an
Earth-fixed frame by the Greenwich mean sidereal time (polar motion and UT1 - UTC
ignored: metres, i.e. nanoseconds of delay)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from sgp4.api import Satrec, SatrecArray, jday
from sgp4.propagation import gstime

from clarke import schema
from clarke.errors import InputError, ValidationFailed
from clarke.schedules.model import End, Schedule, Step

C_KM_PER_MS = 299_792.458 / 1000  # light travels 299.792458 km in a millisecond
WGS84_A_KM = 6378.137
WGS84_F = 1 / 298.257223563
DELAY_DECIMALS = 4  # 0.1 microsecond


@dataclass(frozen=True)
class Site:
    lat_deg: float
    lon_deg: float
    alt_m: float = 0.0

    def __str__(self) -> str:
        return f"{self.lat_deg:g},{self.lon_deg:g},{self.alt_m:g}"

    @staticmethod
    def parse(text: str, what: str) -> Site:
        """LAT,LON[,ALT_M] in degrees and metres."""
        parts = [p.strip() for p in text.split(",")]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if len(values) not in (2, 3) or not all(math.isfinite(v) for v in values):
            raise InputError(f"{what}: {text!r} is not LAT,LON[,ALT_M] (degrees, metres)")
        site = Site(*values)
        if not -90 <= site.lat_deg <= 90 or not -180 <= site.lon_deg <= 360:
            raise InputError(f"{what}: latitude must be in [-90, 90], longitude in [-180, 360]")
        if not -500 <= site.alt_m <= 10_000:
            raise InputError(f"{what}: altitude {site.alt_m:g} m is not in [-500, 10000]")
        return site

    def ecef_km(self) -> np.ndarray:
        lat, lon = math.radians(self.lat_deg), math.radians(self.lon_deg)
        e2 = WGS84_F * (2 - WGS84_F)
        n = WGS84_A_KM / math.sqrt(1 - e2 * math.sin(lat) ** 2)
        h = self.alt_m / 1000
        return np.array(
            [
                (n + h) * math.cos(lat) * math.cos(lon),
                (n + h) * math.cos(lat) * math.sin(lon),
                (n * (1 - e2) + h) * math.sin(lat),
            ]
        )

    def up(self) -> np.ndarray:
        """The unit normal of the ellipsoid here (geodetic up)."""
        lat, lon = math.radians(self.lat_deg), math.radians(self.lon_deg)
        return np.array(
            [math.cos(lat) * math.cos(lon), math.cos(lat) * math.sin(lon), math.sin(lat)]
        )


def look(site: Site, sat_ecef_km: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(elevation in degrees, slant range in km) of Earth-fixed positions [..., 3]."""
    rho = sat_ecef_km - site.ecef_km()
    rng = np.linalg.norm(rho, axis=-1)
    sin_el = np.clip((rho @ site.up()) / rng, -1.0, 1.0)
    return np.degrees(np.arcsin(sin_el)), rng


def slant_range_km(elevation_deg: float, altitude_km: float, radius_km: float) -> float:
    """The range to a satellite at `altitude_km` seen at `elevation_deg` from the surface of
    a sphere of `radius_km` (law of cosines)."""
    e = math.radians(elevation_deg)
    r = radius_km
    return math.sqrt((r + altitude_km) ** 2 - (r * math.cos(e)) ** 2) - r * math.sin(e)


@dataclass(frozen=True)
class Tle:
    name: str
    line1: str
    line2: str
    epoch: datetime


@dataclass(frozen=True)
class Options:
    terminal: Site
    start: datetime
    gateway: Site | None = None
    duration_s: float = 600.0
    slot_s: float = 15.0
    min_elevation_deg: float = 25.0
    handover_outage_ms: float = 0.0


@dataclass(frozen=True)
class Slot:
    at_s: float
    satellite: str | None  # None: no satellite above the minimum elevation
    elevation_deg: float
    terminal_range_km: float
    gateway_range_km: float


def _checksum(line: str) -> str:
    """A TLE line's check digit: its digits summed, each minus sign counting 1, mod 10."""
    return str(sum(int(c) if c.isdigit() else c == "-" for c in line[:68]) % 10)


def parse_satrec(line1: str, line2: str) -> Satrec:
    """SGP4's elements of one TLE set; ValueError saying what is wrong with it."""
    for n, line in ((1, line1), (2, line2)):
        if len(line) < 69 or not line.startswith(f"{n} "):
            raise ValueError(f"TLE line {n} must be 69 characters starting with '{n} '")
        if line[68] != _checksum(line):
            raise ValueError(
                f"TLE line {n}: check digit {line[68]!r}, computed {_checksum(line)!r}"
            )
    if line1[2:7] != line2[2:7]:
        raise ValueError(f"the two lines name different satellites ({line1[2:7]}, {line2[2:7]})")
    satrec = Satrec.twoline2rv(line1, line2)
    if satrec.error:
        raise ValueError(f"SGP4 cannot use these elements (error {satrec.error})")
    return satrec


def read_tles(path: Path) -> list[Tle]:
    """Two-line element sets, each optionally preceded by a name line; lines starting
    with # are comments. ValidationFailed naming the file and line of a bad set."""
    raw = schema.read_text(path).splitlines()
    lines = [(n, ln.rstrip()) for n, ln in enumerate(raw, 1) if ln.strip() and ln[0] != "#"]
    tles: list[Tle] = []
    problems: list[str] = []
    i = 0
    while i < len(lines):
        name = ""
        if not lines[i][1].startswith("1 "):
            name = lines[i][1].strip()
            i += 1
        if i + 1 >= len(lines):
            problems.append(f"line {lines[-1][0]}: the file ends inside a TLE set")
            break
        (n1, l1), (n2, l2) = lines[i], lines[i + 1]
        i += 2
        try:
            satrec = parse_satrec(l1, l2)
        except ValueError as e:
            problems.append(f"lines {n1}-{n2}: {e}")
            continue
        epoch = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(
            days=satrec.jdsatepoch + satrec.jdsatepochF - 2451544.5
        )
        tles.append(Tle(name or f"NORAD {satrec.satnum}", l1, l2, epoch))
    if not tles and not problems:
        problems.append("no TLE set found (two lines starting with `1 ` and `2 `)")
    if problems:
        raise ValidationFailed(str(path), problems)
    return tles


def plan_slots(tles: list[Tle], opts: Options) -> list[Slot]:
    """The serving satellite and slant ranges at the start of each slot."""
    if opts.slot_s <= 0 or opts.duration_s <= 0:
        raise InputError("--slot-s and --duration-s must be > 0")
    if not opts.handover_outage_ms / 1000 < opts.slot_s:
        raise InputError("--handover-outage-ms must be shorter than a slot")
    count = math.ceil(opts.duration_s / opts.slot_s - 1e-9)
    times = [opts.start + timedelta(seconds=k * opts.slot_s) for k in range(count)]
    jd, fr = (
        np.array([jday(*_parts(t))[0] for t in times]),
        np.array([jday(*_parts(t))[1] for t in times]),
    )
    sats = SatrecArray([parse_satrec(t.line1, t.line2) for t in tles])
    err, teme, _ = sats.sgp4(jd, fr)  # [sat, time] and [sat, time, 3] km
    theta = np.array([gstime(j + f) for j, f in zip(jd, fr, strict=True)])
    c, s = np.cos(theta), np.sin(theta)
    ecef = np.stack(
        [c * teme[..., 0] + s * teme[..., 1], -s * teme[..., 0] + c * teme[..., 1], teme[..., 2]],
        axis=-1,
    )
    el_t, rng_t = look(opts.terminal, ecef)
    usable = (err == 0) & (el_t >= opts.min_elevation_deg)
    el_g, rng_g = el_t, rng_t
    if opts.gateway is not None:
        el_g, rng_g = look(opts.gateway, ecef)
        usable &= el_g >= opts.min_elevation_deg
    slots = []
    for k in range(count):
        at = round(k * opts.slot_s, 6)
        candidates = np.where(usable[:, k])[0]
        if len(candidates) == 0:
            slots.append(Slot(at, None, math.nan, math.nan, math.nan))
            continue
        best = int(candidates[np.argmax(el_t[candidates, k])])
        slots.append(
            Slot(
                at,
                tles[best].name,
                float(el_t[best, k]),
                float(rng_t[best, k]),
                float(rng_g[best, k]),
            )
        )
    return slots


def _parts(t: datetime) -> tuple[int, int, int, int, int, float]:
    return t.year, t.month, t.day, t.hour, t.minute, t.second + t.microsecond / 1e6


def handovers(slots: list[Slot]) -> list[bool]:
    """Whether each slot starts with another serving satellite than the slot before it
    (the first slot compares with the last: the schedule loops)."""
    return [s.satellite != slots[k - 1].satellite for k, s in enumerate(slots)]


def delays_ms(slot: Slot) -> tuple[float, float]:
    """(terminal hop, gateway hop) one-way delays in ms."""
    return (
        round(slot.terminal_range_km / C_KM_PER_MS, DELAY_DECIMALS),
        round(slot.gateway_range_km / C_KM_PER_MS, DELAY_DECIMALS),
    )


def schedule(slots: list[Slot], opts: Options, schedule_id: str | None = None) -> Schedule:
    outage_s = opts.handover_outage_ms / 1000
    steps: list[Step] = []
    out = None  # whether the link is out after the last step
    for slot, handover in zip(slots, handovers(slots), strict=True):
        if slot.satellite is None:
            steps.append(_step(slot.at_s, {"outage": True}))
            out = True
            continue
        terminal, gateway = delays_ms(slot)
        fwd = {"uplink_delay_ms": gateway, "downlink_delay_ms": terminal}
        ret = {"uplink_delay_ms": terminal, "downlink_delay_ms": gateway}
        if handover and outage_s > 0:
            steps.append(_step(slot.at_s, {"outage": True}))
            steps.append(_step(round(slot.at_s + outage_s, 6), {"outage": False}, fwd, ret))
        else:
            flag = {"outage": False} if out is not False else {}
            steps.append(_step(slot.at_s, flag, fwd, ret))
        out = False
    return Schedule(
        version=1,
        id=schedule_id,
        end=End.loop,
        length_s=opts.duration_s,
        slot_s=opts.slot_s,
        steps=steps,
    )


def _step(
    at_s: float,
    both: dict[str, bool],
    fwd: dict[str, float] | None = None,
    ret: dict[str, float] | None = None,
) -> Step:
    return Step.model_validate(
        {"at_s": at_s, "forward": {**both, **(fwd or {})}, "return": {**both, **(ret or {})}}
    )
