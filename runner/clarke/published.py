"""Published figures a link profile is held against: its `validation:` block.

A profile is a claim about a real network, so it lists the measurements that anchor it,
each a figure `clarke bench validate` measures on a testbed (docs/validation.md):

    validation:
      - figure: rtt_median_ms
        value: 50
        tolerance: 5          # with a single value: how far Clarke's may be, same unit
        source: "Michel et al., IMC 2022: median RTT around 50 ms to European anchors"
      - figure: loss_pct
        range: [1, 2]         # or at_most: X, or at_least: X
        source: "Huston, APNIC blog 2024: 1 to 2 % of packets lost, not by congestion"

A profile with no published anchor has none, and its description says it is
illustrative."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from clarke.schema import StrictModel, located_error


class Figure(StrEnum):
    """A figure `clarke bench validate` measures (FIGURES says how)."""

    rtt_min_ms = "rtt_min_ms"
    rtt_p5_ms = "rtt_p5_ms"
    rtt_p25_ms = "rtt_p25_ms"
    rtt_median_ms = "rtt_median_ms"
    rtt_p75_ms = "rtt_p75_ms"
    rtt_p95_ms = "rtt_p95_ms"
    rtt_mean_ms = "rtt_mean_ms"
    rtt_successive_diff_ms = "rtt_successive_diff_ms"
    loss_pct = "loss_pct"
    echo_ber = "echo_ber"
    loss_after_boundary_pct = "loss_after_boundary_pct"
    step_median_ms = "step_median_ms"
    step_max_ms = "step_max_ms"
    forward_rate_mbps = "forward_rate_mbps"
    return_rate_mbps = "return_rate_mbps"
    echo_after_idle_ms = "echo_after_idle_ms"
    echo_under_load_ms = "echo_under_load_ms"
    request_grant_delay_ms = "request_grant_delay_ms"


@dataclass(frozen=True)
class FigureInfo:
    label: str
    unit: str
    how: str  # how validate measures it


FIGURES: dict[Figure, FigureInfo] = {
    Figure.rtt_min_ms: FigureInfo("RTT minimum", "ms", "idle echoes client -> server"),
    Figure.rtt_p5_ms: FigureInfo("RTT p5", "ms", "idle echoes"),
    Figure.rtt_p25_ms: FigureInfo("RTT p25", "ms", "idle echoes"),
    Figure.rtt_median_ms: FigureInfo("RTT median", "ms", "idle echoes"),
    Figure.rtt_p75_ms: FigureInfo("RTT p75", "ms", "idle echoes"),
    Figure.rtt_p95_ms: FigureInfo("RTT p95", "ms", "idle echoes"),
    Figure.rtt_mean_ms: FigureInfo("RTT mean", "ms", "idle echoes"),
    Figure.rtt_successive_diff_ms: FigureInfo(
        "RTT change between successive echoes", "ms", "mean |RTT(i) - RTT(i-1)|, both answered"
    ),
    Figure.loss_pct: FigureInfo("echo loss", "%", "echoes with no reply"),
    Figure.echo_ber: FigureInfo(
        "bit error rate (from echo loss)",
        "",
        "1 - (1 - loss)^(1 / (2 x 672 bits)): both 84-byte packets of an echo",
    ),
    Figure.loss_after_boundary_pct: FigureInfo(
        "losses within 2 s after a slot boundary", "%", "share of lost echoes, by send time"
    ),
    Figure.step_median_ms: FigureInfo(
        "RTT floor step between slots, median", "ms", "|change of each slot's minimum RTT|"
    ),
    Figure.step_max_ms: FigureInfo(
        "RTT floor step between slots, max", "ms", "|change of each slot's minimum RTT|"
    ),
    Figure.forward_rate_mbps: FigureInfo(
        "forward rate", "Mb/s", "link counters under a paced UDP flow (median over slots)"
    ),
    Figure.return_rate_mbps: FigureInfo(
        "return rate", "Mb/s", "link counters under a paced UDP flow (median over slots)"
    ),
    Figure.echo_after_idle_ms: FigureInfo(
        "RTT of a full-sized echo after idle",
        "ms",
        "1500-byte echoes, each after 1.5 s with nothing sent (median)",
    ),
    Figure.echo_under_load_ms: FigureInfo(
        "RTT of a full-sized echo under a steady flow",
        "ms",
        "the same echoes every 20 ms, from their second half (median)",
    ),
    Figure.request_grant_delay_ms: FigureInfo(
        "extra wait after idle (request-grant loop)",
        "ms",
        "the first of these two medians less the second",
    ),
}

Number = Annotated[float, Field(allow_inf_nan=False)]


class Verdict(StrEnum):
    inside = "inside"
    outside = "outside"
    not_measured = "not measured"


class PublishedFigure(StrictModel):
    """One published figure: a value with the tolerance Clarke allows it, a range, or a
    bound; and where it comes from."""

    figure: Figure
    value: Number | None = None
    tolerance: Number | None = Field(default=None, ge=0)
    range: tuple[Number, Number] | None = None
    at_most: Number | None = None
    at_least: Number | None = None
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _one_form(self) -> PublishedFigure:
        kinds = ("value", "range", "at_most", "at_least")
        forms = [k for k in kinds if getattr(self, k) is not None]
        if len(forms) != 1:
            raise located_error((), "give exactly one of value, range, at_most, at_least")
        if self.value is not None and self.tolerance is None:
            raise located_error(
                ("tolerance",), "required with value: how far Clarke's figure may be from it"
            )
        if self.value is None and self.tolerance is not None:
            raise located_error(("tolerance",), "only with value")
        if self.range is not None and self.range[0] > self.range[1]:
            raise located_error(("range",), f"{self.range[0]:g} is above {self.range[1]:g}")
        return self

    def bounds(self) -> tuple[float, float]:
        if self.value is not None:
            tol = self.tolerance or 0.0
            return self.value - tol, self.value + tol
        if self.range is not None:
            return self.range
        if self.at_most is not None:
            return -math.inf, self.at_most
        return float(self.at_least or 0.0), math.inf

    def describe(self) -> str:
        unit = FIGURES[self.figure].unit
        u = f" {unit}" if unit and unit != "%" else unit
        if self.value is not None:
            return f"{self.value:g} ± {self.tolerance:g}{u}"
        if self.range is not None:
            return f"{self.range[0]:g} to {self.range[1]:g}{u}"
        if self.at_most is not None:
            return f"at most {self.at_most:g}{u}"
        return f"at least {self.at_least:g}{u}"

    def verdict(self, measured: float | None) -> Verdict:
        if measured is None or math.isnan(measured):
            return Verdict.not_measured
        lo, hi = self.bounds()
        return Verdict.inside if lo <= measured <= hi else Verdict.outside
