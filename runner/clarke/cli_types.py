"""Option types the commands share: numbers that must be finite and in a range. click's
FloatRange lets nan through (every comparison with nan is false) and inf too when no
maximum is given; these exit 2 naming the option instead."""

from __future__ import annotations

import math

import click


class FiniteFloat(click.FloatRange):
    """A float in [min, max] (or open at either end), never nan or infinite."""

    name = "number"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        number: float = super().convert(value, param, ctx)  # type: ignore[arg-type]  # click converts any object
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number
