"""Command-line options for the run matrix's dimensions: an option's name, its choices
and its help come from the dimension's declaration (clarke.campaign.dimensions)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from clarke.campaign.dimensions import Dimension

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
