"""Ids are names, never paths: a campaign id, a capture's label, an id read back from a
results directory. Each becomes (part of) a directory or file name, so one validator
checks every id wherever it comes in (an option, a file Clarke reads back): letters,
digits, '.', '_' and '-', starting with a letter or digit, at most MAX_ID_CHARS: one
path component, never '.' or '..', no '/', no leading '-' (an option to the next
program), no control character or newline."""

from __future__ import annotations

import re
from typing import Annotated

import click
from pydantic import AfterValidator

from clarke.errors import InputError

MAX_ID_CHARS = 150
ID_RE = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_ID_CHARS - 1}}}$")
RULE = (
    f"an id is a name of letters, digits, '.', '_' and '-', starting with a letter or digit, "
    f"at most {MAX_ID_CHARS} characters; not a path"
)


def is_id(value: str) -> bool:
    return ID_RE.fullmatch(value) is not None


def check_id(value: str, where: str) -> str:
    """`value` if it is an id; InputError naming `where` (an option, a file's field)."""
    if not isinstance(value, str) or not is_id(value):
        shown = repr(value[:60]) if isinstance(value, str) else type(value).__name__
        raise InputError(f"{where} {shown}: {RULE}")
    return value


def _in_model(value: str) -> str:
    if not is_id(value):
        raise ValueError(RULE)
    return value


# An id field of a file Clarke reads back (meta.json, parallel.json, ...).
Id = Annotated[str, AfterValidator(_in_model)]


class IdParam(click.ParamType):
    """A click option that takes an id (exit 2 naming the option otherwise). An empty
    value is None: the default (compose passes `--campaign-id=` when none is set)."""

    name = "id"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str) or not is_id(value):
            self.fail(f"{str(value)[:60]!r}: {RULE}", param, ctx)
        return value
