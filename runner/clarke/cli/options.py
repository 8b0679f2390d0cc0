"""Option types the commands share: numbers that must be finite and in a range (click's
FloatRange lets nan through, since every comparison with nan is false, and inf too when
no maximum is given; these exit 2 naming the option instead), and a command's options
as one value."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, TypeVar

import click

from clarke import registry

Options = TypeVar("Options")


class FiniteFloat(click.FloatRange):
    """A float in [min, max] (or open at either end), never nan or infinite."""

    name = "number"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        # Any: click hands a converter whatever the command line or a default gave.
        number: float = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def options_into(
    options: Callable[..., Options],
) -> Callable[[Callable[[Options], None]], Callable[..., None]]:
    """Hand a click command its options as one value (a frozen dataclass whose fields are
    the options' parameter names) rather than one parameter per option."""

    def wrap(command: Callable[[Options], None]) -> Callable[..., None]:
        @functools.wraps(command)
        def callback(**given: Any) -> None:
            command(options(**given))

        return callback

    return wrap


def link_option() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--link` of a command that builds a testbed of its own: which implementation runs
    the link roles."""
    return click.option(
        "--link",
        type=click.Choice(registry.names("link")),
        default=registry.DEFAULTS["link"],
        show_default=True,
        help="The link's implementation. " + registry.help_text("link"),
    )
