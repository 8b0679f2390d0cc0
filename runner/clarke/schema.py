"""Loading YAML files into typed models, with errors that name the file, the field path
(e.g. `matrix.http[1]`) and the allowed values. Every file Clarke reads goes through here."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from clarke.errors import ValidationFailed

M = TypeVar("M", bound=BaseModel)


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


def _describe(err: dict[str, Any]) -> str:
    # Drop the union/tagged-union branch names pydantic inserts into locations.
    loc = tuple(
        p
        for p in err["loc"]
        if not (isinstance(p, str) and ("[" in p or p.startswith("function-")))
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
        else f" (got {got!r})"
    )
    return f"{field_path(loc)}: {msg}{shown}"


def located_error(at: tuple[int | str, ...], message: str) -> PydanticCustomError:
    """An error for a model validator to raise that names the field inside the model it
    is about (e.g. `steps[3].at_s`), not only the model."""
    return PydanticCustomError("located", "{message}", {"message": message, "at": at})


def problems_of(error: ValidationError) -> list[str]:
    seen: list[str] = []
    for err in error.errors():
        text = _describe(dict(err))
        if text not in seen:
            seen.append(text)
    return seen


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the
    last one silently: a campaign's second `http:` would quietly replace the first)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
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
        return super().construct_mapping(node, deep=deep)


def read_text(path: Path) -> str:
    """A UTF-8 text file; ValidationFailed naming it when it is missing or unreadable."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationFailed(str(path), ["file not found"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValidationFailed(str(path), [f"cannot read: {e}"]) from None


def read_yaml(path: Path) -> Any:
    text = read_text(path)
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
