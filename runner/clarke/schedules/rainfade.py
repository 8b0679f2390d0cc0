"""`clarke link schedule rain-fade`: a rain fade on a DVB-S2 link with adaptive coding
and modulation (ACM), as a rate per step.

The attenuation A(t) in dB (a CSV series, or a synthetic fade event) lowers the clear-sky
Es/N0: Es/N0(t) = clear-sky Es/N0 - A(t) - margin. The ACM picks the MODCOD of the highest
spectral efficiency whose required Es/N0 is at most that; the rate is symbol rate x
spectral efficiency. Below the most robust MODCOD (QPSK 1/4) the link is out.
Simplifications: rain's own noise (the sky temperature rising with the attenuation) is
not added, and the ACM follows the attenuation at once (no signalling delay, no
hysteresis): both make fades slightly milder than on a real link.

The ACM table: ETSI EN 302 307-1 V1.4.1 (2014-11), "Digital Video Broadcasting (DVB);
Second generation framing structure, channel coding and modulation systems ... Part 1:
DVB-S2", Table 13: spectral efficiency (bit per symbol, ideal Nyquist channel, normal
64,800-bit FECFRAME, no pilots) and the ideal Es/N0 (dB) for quasi-error-free operation
(packet error rate 1e-7) in AWGN, of each MODCOD."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from clarke.errors import InputError, ValidationFailed
from clarke.schedules import files as schedule_files
from clarke.schedules import limits
from clarke.schedules.model import End, Schedule, Step

RATE_DECIMALS = 6  # Mb/s: 1 b/s


@dataclass(frozen=True)
class Modcod:
    name: str
    efficiency: float  # bit per symbol
    esn0_db: float  # ideal Es/N0 for quasi-error-free operation


# ETSI EN 302 307-1 V1.4.1, Table 13 (normal FECFRAME), in the table's order.
DVB_S2_ACM = (
    Modcod("QPSK 1/4", 0.490243, -2.35),
    Modcod("QPSK 1/3", 0.656448, -1.24),
    Modcod("QPSK 2/5", 0.789412, -0.30),
    Modcod("QPSK 1/2", 0.988858, 1.00),
    Modcod("QPSK 3/5", 1.188304, 2.23),
    Modcod("QPSK 2/3", 1.322253, 3.10),
    Modcod("QPSK 3/4", 1.487473, 4.03),
    Modcod("QPSK 4/5", 1.587196, 4.68),
    Modcod("QPSK 5/6", 1.654663, 5.18),
    Modcod("QPSK 8/9", 1.766451, 6.20),
    Modcod("QPSK 9/10", 1.788612, 6.42),
    Modcod("8PSK 3/5", 1.779991, 5.50),
    Modcod("8PSK 2/3", 1.980636, 6.62),
    Modcod("8PSK 3/4", 2.228124, 7.91),
    Modcod("8PSK 5/6", 2.478562, 9.35),
    Modcod("8PSK 8/9", 2.646012, 10.69),
    Modcod("8PSK 9/10", 2.679207, 10.98),
    Modcod("16APSK 2/3", 2.637201, 8.97),
    Modcod("16APSK 3/4", 2.966728, 10.21),
    Modcod("16APSK 4/5", 3.165623, 11.03),
    Modcod("16APSK 5/6", 3.300184, 11.61),
    Modcod("16APSK 8/9", 3.523143, 12.89),
    Modcod("16APSK 9/10", 3.567342, 13.13),
    Modcod("32APSK 3/4", 3.703295, 12.73),
    Modcod("32APSK 4/5", 3.951571, 13.64),
    Modcod("32APSK 5/6", 4.119540, 14.28),
    Modcod("32APSK 8/9", 4.397854, 15.69),
    Modcod("32APSK 9/10", 4.453027, 16.05),
)


def best_modcod(esn0_db: float) -> Modcod | None:
    """The most efficient MODCOD that works at this Es/N0 (None: not even QPSK 1/4).
    Efficiency is not monotonic in the table's Es/N0 (8PSK 3/5 needs less than QPSK
    9/10 and carries less), so every entry is considered."""
    usable = [m for m in DVB_S2_ACM if m.esn0_db <= esn0_db]
    return max(usable, key=lambda m: m.efficiency) if usable else None


class Shape(StrEnum):
    raised_cosine = "raised-cosine"  # smooth in and out: depth x (1 - cos(2 pi u)) / 2
    triangle = "triangle"  # linear in to the depth at mid-fade, linear out
    rectangle = "rectangle"  # the whole depth for the whole duration


@dataclass(frozen=True)
class Fade:
    depth_db: float
    duration_s: float
    start_s: float
    shape: Shape

    def attenuation_db(self, t: float) -> float:
        u = (t - self.start_s) / self.duration_s
        if not 0 <= u < 1:
            return 0.0
        if self.shape is Shape.rectangle:
            return self.depth_db
        if self.shape is Shape.triangle:
            return self.depth_db * (1 - abs(2 * u - 1))
        return self.depth_db * (1 - math.cos(2 * math.pi * u)) / 2


@dataclass(frozen=True)
class Link:
    symbol_rate_baud: float
    clear_sky_esn0_db: float
    margin_db: float = 0.0

    def modcod(self, attenuation_db: float) -> Modcod | None:
        return best_modcod(self.clear_sky_esn0_db - attenuation_db - self.margin_db)

    def rate_mbps(self, modcod: Modcod) -> float:
        return round(self.symbol_rate_baud * modcod.efficiency / 1e6, RATE_DECIMALS)


def synthetic(fade: Fade, length_s: float, step_s: float) -> list[tuple[float, float]]:
    """(t_s, attenuation_db) every step_s over [0, length_s)."""
    if fade.depth_db < 0 or fade.duration_s <= 0 or fade.start_s < 0 or step_s <= 0:
        raise InputError("the fade's depth must be >= 0; its duration and --step-s > 0")
    if fade.start_s + fade.duration_s > length_s:
        raise InputError(
            f"the fade ends at {fade.start_s + fade.duration_s:g} s, after --length-s {length_s:g}"
        )
    n = math.ceil(length_s / step_s - 1e-9)
    limits.check_count(n, f"a fade over {length_s:g} s sampled every {step_s:g} s", "samples")
    return [(round(k * step_s, 6), fade.attenuation_db(k * step_s)) for k in range(n)]


def read_series(path: Path) -> list[tuple[float, float]]:
    """A CSV with a header naming t_s and attenuation_db; times strictly increasing from
    >= 0, attenuations >= 0 dB. ValidationFailed naming the file, line and column."""
    rows = schedule_files.read_csv(path, ("t_s", "attenuation_db"))
    out: list[tuple[float, float]] = []
    for line, row in rows:
        t, a = row["t_s"], row["attenuation_db"]
        if a < 0:
            raise ValidationFailed(str(path), [f"line {line}: attenuation_db: {a:g} is below 0"])
        if out and t <= out[-1][0]:
            raise ValidationFailed(
                str(path), [f"line {line}: t_s: {t:g} is not after {out[-1][0]:g}"]
            )
        if t < 0:
            raise ValidationFailed(str(path), [f"line {line}: t_s: {t:g} is below 0"])
        out.append((t, a))
    return out


def schedule(
    series: list[tuple[float, float]],
    link: Link,
    direction: str,
    end: End,
    length_s: float | None,
    schedule_id: str | None = None,
    slot_s: float | None = None,
) -> Schedule:
    """One step wherever the MODCOD changes (and at 0). Before the series' first time the
    sky is clear."""
    points = series if series[0][0] == 0 else [(0.0, 0.0), *series]
    steps: list[Step] = []
    last: Modcod | str | None = "none yet"
    for t, a in points:
        modcod = link.modcod(a)
        if modcod == last:
            continue
        change: dict[str, object]
        if modcod is None:
            change = {"outage": True}
        else:
            change = {"rate_mbps": link.rate_mbps(modcod)}
            if last is None or not steps:
                change["outage"] = False
        steps.append(Step.model_validate({"at_s": t, direction: change}))
        last = modcod
    return Schedule.made(steps, end, length_s, schedule_id, slot_s=slot_s)


def modcods_used(series: list[tuple[float, float]], link: Link) -> list[str]:
    """The MODCODs the series goes through, in order of first use (for the header)."""
    seen: list[str] = []
    for _, a in series:
        m = link.modcod(a)
        name = m.name if m else "outage"
        if name not in seen:
            seen.append(name)
    return seen
