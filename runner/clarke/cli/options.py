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
from clarke.vocab import SUBSTRATES

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


Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def implementation_option(
    kind: str, *, defaults_here: bool = False, default_said: str = "", help: str | None = None
) -> Decorator:
    """`--<kind>`: which implementation runs the roles of that kind (link, server).
    `defaults_here`: the option's default is the registry's; otherwise absent means
    "decided elsewhere", which `default_said` tells the reader."""
    if help is None:
        said = f" ({default_said})" if default_said else ""
        help = f"The {kind}'s implementation{said}. " + registry.help_text(kind)
    return click.option(
        f"--{kind}",
        type=click.Choice(registry.names(kind)),
        default=registry.DEFAULTS[kind] if defaults_here else None,
        show_default=defaults_here,
        help=help,
    )


def link_option() -> Decorator:
    """`--link` of a command that builds a testbed of its own: which implementation runs
    the link roles."""
    return implementation_option("link", defaults_here=True)


def substrate_option(help: str) -> Decorator:
    """`--substrate` (env CLARKE_SUBSTRATE): where the roles run, netns by default."""
    return click.option(
        "--substrate",
        type=click.Choice(SUBSTRATES),
        envvar="CLARKE_SUBSTRATE",
        default="netns",
        show_default=True,
        help=help + " Env: CLARKE_SUBSTRATE.",
    )


def capture_max_mb_option(help: str) -> Decorator:
    """`--capture-max-mb`: the bound on one load's capture files."""
    return click.option(
        "--capture-max-mb",
        type=click.IntRange(1, 512),
        default=100,
        show_default=True,
        help=help,
    )
