"""Link schedules (docs/schedules.md): links whose rate, delay, loss and outages change
over time, and the generators that write them.

    model.py      the schedule's model and checks, its mapping to satlink's JSON
    files.py      reading a schedule file, writing one with a header saying how it was made
    leo.py        `clarke link schedule leo`: serving satellite and slant ranges from TLEs
    rainfade.py   `clarke link schedule rain-fade`: attenuation -> DVB-S2 ACM -> rate
    traces.py     `clarke link schedule import`: mahimahi traces and CSV series -> steps
    starlink.py   `clarke link schedule starlink`: Starlink as measured, slot by slot
    starlink_fit.py  the fits behind it (RTT floor, background loss, rate spread)
"""

from clarke.schedules.model import (
    DIRECTIONS,
    Change,
    Clock,
    End,
    GilbertElliott,
    Schedule,
    Step,
    StepBitErrors,
    StepPacketLoss,
)

__all__ = [
    "DIRECTIONS",
    "Change",
    "Clock",
    "End",
    "GilbertElliott",
    "Schedule",
    "Step",
    "StepBitErrors",
    "StepPacketLoss",
]
