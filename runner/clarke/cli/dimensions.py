"""Command-line options for the run matrix's dimensions: an option's name, its choices
and its help come from the dimension's declaration (clarke.campaign.dimensions)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click
from pydantic import ValidationError

from clarke.campaign import dimensions
from clarke.campaign.dimension import Dimension
from clarke.schema import problems_of

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def option(
    dimension: Dimension[Any],
    *,
    choices: Sequence[str] | None = None,
    more_help: str = "",
    **settings: Any,
) -> Decorator:
    """`--<dimension>` (its record field's name, dashed), its choices its vocabulary
    unless given (a registry's names, say) or the names it takes (PEP presets), its help
    the declaration's."""
    values = choices if choices is not None else dimension.vocabulary
    if values is None and dimension.names is not None:
        values = dimension.names()
    kind: Any = click.Choice(list(values)) if values is not None else settings.pop("type", None)
    help_text = (
        dimension.help[:1].upper() + dimension.help[1:] + (f". {more_help}" if more_help else ".")
    )
    return click.option(
        f"--{dimension.name.replace('_', '-')}",
        dimension.name,
        type=kind,
        help=help_text,
        **settings,
    )


# Where a command's option for a dimension says more than the declaration, or has a
# default of its own (`clarke load`'s profile, HTTP version and congestion control).
@dataclass(frozen=True)
class OptionSpec:
    default: str | None = None
    more_help: str = ""
    choices: Sequence[str] | None = None
    # False: the option takes more than the campaign key does and its command reads it
    # (`clarke load --profile` takes a profile file's path too: the user's own file).
    parsed: bool = True


DIMENSION_VALUES = "dimension_values"


def _parsed(dimension: Dimension[Any]) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def parse(_ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None:
            return None
        try:
            return dimension.parse(value)
        except ValidationError as e:
            raise click.BadParameter("; ".join(problems_of(e)), param=param) from None

    return parse


def every_dimension(specs: Mapping[str, OptionSpec]) -> Decorator:
    """An option for every declared dimension (each parsed by its dimension: exit 2
    naming the option); the values given reach the command as one mapping,
    `dimension_values` (dimension name -> value; a dimension not given is absent)."""

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def callback(**given: Any) -> Any:
            values = {}
            for d in dimensions.seal():
                value = given.pop(d.name, None)
                if value is not None:
                    values[d.name] = value
            return command(**given, **{DIMENSION_VALUES: values})

        decorated: Callable[..., Any] = callback
        for d in reversed(dimensions.seal()):
            spec = specs.get(d.name, OptionSpec())
            decorated = option(
                d,
                choices=spec.choices,
                more_help=spec.more_help,
                default=spec.default,
                show_default=spec.default is not None,
                callback=_parsed(d) if spec.parsed else None,
            )(decorated)
        return decorated

    return wrap
