"""Loading YAML files into typed models, with errors that name the file, the field path
(e.g. `matrix.http[1]`) and the allowed values. Every file Clarke reads goes through here."""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from clarke.errors import ValidationFailed

M = TypeVar("M", bound=BaseModel)
SHOWN_CHARS = 80  # of a value quoted in an error
# The largest file read here unless the caller says otherwise (a profile with a long
# schedule says more: clarke.schedules.limits).
MAX_FILE_BYTES = 16 * 1024 * 1024
# libyaml's parser where PyYAML has it (Debian's and the wheels do): a long schedule file
# parses in a second instead of a minute. Same constructors, same errors.
if TYPE_CHECKING:
    _BaseLoader = yaml.SafeLoader
else:
    _BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MERGE_TAG = "tag:yaml.org,2002:merge"


# The prefix of a tagged union's tags (pydantic.Tag): the form of a value, which error
# messages leave out of the field path.
FORM = "form:"


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo must never be silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _describe(err: ErrorDetails) -> str:
    # Drop the union/tagged-union branch names pydantic inserts into locations (a tag of
    # our own starts with FORM).
    loc = tuple(
        p
        for p in err["loc"]
        if not (isinstance(p, str) and ("[" in p or p.startswith(("function-", FORM))))
    )
    # A check across a model's fields (located_error) names the field inside the model.
    loc += tuple(err.get("ctx", {}).get("at", ()))
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    elif err["type"] == "missing":
        msg = "required field is missing"
    got = err.get("input")
    shown = (
        ""
        if err["type"] in ("missing", "extra_forbidden", "located") or isinstance(got, dict)
        else f" (got {_excerpt(got)})"
    )
    return f"{field_path(loc)}: {msg}{shown}"


_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = SHOWN_CHARS
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 3
_SHORT.maxlevel = 2


def _excerpt(value: Any) -> str:
    """A value as an error quotes it: a short repr, long strings and lists cut (an error
    is no place to copy a file into), made without building the whole repr."""
    return _SHORT.repr(value)


def located_error(at: tuple[int | str, ...], message: str) -> PydanticCustomError:
    """An error for a model validator to raise that names the field inside the model it
    is about (e.g. `steps[3].at_s`), not only the model."""
    return PydanticCustomError("located", "{message}", {"message": message, "at": at})


def problems_of(error: ValidationError) -> list[str]:
    seen: list[str] = []
    for err in error.errors():
        text = _describe(err)
        if text not in seen:
            seen.append(text)
    return seen


class _UniqueKeyLoader(_BaseLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the
    last one silently: a campaign's second `http:` would quietly replace the first)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # The keys as written (the base class flattens merged `<<` keys into the node).
        written = [k for k, _ in node.value]
        merges = any(k.tag == MERGE_TAG for k in written)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        if merges or len(mapping) < len(written):  # a key twice, maybe: find which
            self._refuse_twice(written, deep)
        return mapping

    def _refuse_twice(self, written: list[yaml.Node], deep: bool) -> None:
        seen: dict[Any, yaml.Node] = {}
        for key_node in written:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # the safe loader itself refuses it, naming the line
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} given twice (first on line {first})",
                    key_node.start_mark,
                )
            seen[key] = key_node


def read_text(path: Path, max_bytes: int = MAX_FILE_BYTES, raise_it: str = "") -> str:
    """A UTF-8 text file; ValidationFailed naming it when it is missing, unreadable or
    larger than `max_bytes` (checked before it is read; `raise_it` says how to allow
    more)."""
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise ValidationFailed(str(path), ["file not found"]) from None
    except OSError as e:
        raise ValidationFailed(str(path), [f"cannot read: {e}"]) from None
    if len(data) > max_bytes:
        how = f"; {raise_it}" if raise_it else ""
        raise ValidationFailed(
            str(path), [f"larger than {max_bytes:,} bytes, the most Clarke reads here{how}"]
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValidationFailed(str(path), [f"cannot read: {e}"]) from None


def read_yaml(
    path: Path,
    max_bytes: int = MAX_FILE_BYTES,
    raise_it: str = "",
    before_parsing: Callable[[str, str], None] | None = None,
) -> Any:
    """`path`'s YAML; `before_parsing(text, source)` may refuse the text first (a check
    far cheaper than the parse)."""
    text = read_text(path, max_bytes, raise_it)
    if before_parsing is not None:
        before_parsing(text, str(path))
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ValidationFailed(str(path), [f"{where}not valid YAML: {problem}"]) from None


def parse(model: type[M], data: Any, source: str) -> M:
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise ValidationFailed(source, [f"(top level): expected a mapping of fields, got {kind}"])
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ValidationFailed(source, problems_of(e)) from None


def read(model: type[M], path: Path) -> M:
    return parse(model, read_yaml(path), str(path))
