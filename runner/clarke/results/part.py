"""The base of the models a record keeps (results/details.py) and of what an agent says
that a record keeps as said (results/server_records.py, results/station_records.py):
a model that writes itself as the JSON object it stands for, so that a journal line is
the same whether a part was built by the runner or read back from a journal.

A `Part` writes the keys it was given and only those, in the order they were given: a
read part as it was read (its keys, their order, what it said beyond its fields), a
built part in the order its fields were set (a field left at its default is not
written, as a dict without that key did not have it). A key given again keeps its place,
as in a dict. Two parts are equal when they would write the same keys with the same
values, whatever their order."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Self

from pydantic import (
    BaseModel,
    ConfigDict,
    JsonValue,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.fields import FieldInfo

# A value of JSON whose shape is not Clarke's to say (a browser's entries): kept as it
# came, its numbers int or float as they were.
JsonObject = dict[str, JsonValue]
# A figure another part of Clarke computed, int or float as it came (a float field would
# write an integer as 5.0): written back as it was.
Number = int | float


def _key(name: str, field: FieldInfo) -> str:
    """A field's key in JSON."""
    return field.serialization_alias or field.alias or name


@functools.cache
def _keys_of(cls: type[BaseModel]) -> dict[str, str]:
    """A model's field names and their keys in JSON, in field order."""
    return {name: _key(name, f) for name, f in cls.model_fields.items()}


@functools.cache
def _names(cls: type[BaseModel]) -> dict[str, str]:
    """A model's keys in JSON and their field names."""
    return {key: name for name, key in _keys_of(cls).items()}


class Part(BaseModel):
    """What a record keeps, as a JSON object (the module's doc says how it writes)."""

    # Keys a part does not know (a later Clarke's, or one no longer written) are kept
    # and written back: an old or newer journal stays readable and is not cut short.
    model_config = ConfigDict(extra="allow")

    _keys: tuple[str, ...] = PrivateAttr(default=())  # as given or set, in order

    @model_validator(mode="wrap")
    @classmethod
    def _note_keys(cls, data: object, handler: ModelWrapValidatorHandler[Self]) -> Self:
        part = handler(data)
        if isinstance(data, Mapping):
            part._keys = tuple(str(k) for k in data)
        return part

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if name.startswith("_"):
            return
        key = _keys_of(type(self)).get(name, name)
        if key not in self._keys:
            self._keys = (*self._keys, key)

    def _order(self) -> list[tuple[str, str | None]]:
        """(key, field name; None for a key beyond the fields) of every key the part has,
        in order: as given or set, then fields given through model_copy(update=...)."""
        names, keys_of = _names(type(self)), _keys_of(type(self))
        given = self.model_fields_set
        extra = self.model_extra or {}
        keys = [k for k in self._keys if names.get(k) in given or k in extra]
        if len(keys) < len(given) + len(extra):
            noted = set(keys)
            keys += [key for n, key in keys_of.items() if n in given and key not in noted]
        return [(k, names.get(k)) for k in keys]

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        out: dict[str, object] = handler(self)
        return {k: out[k] for k, _ in self._order() if k in out}

    def has(self, name: str) -> bool:
        """Whether field `name` was given or set (a key the part writes), not defaulted."""
        return name in self.model_fields_set

    def take(self, other: Part) -> None:
        """Every key `other` writes set here, in its order (as `dict |= other` would)."""
        fields = type(other).model_fields
        for key, name in other._order():
            if name is None:
                setattr(self, key, (other.model_extra or {})[key])
            elif not fields[name].exclude:
                setattr(self, name, getattr(other, name))

    def written(self) -> dict[str, object]:
        """The part as it writes itself (Python values)."""
        out: dict[str, object] = self.model_dump()
        return out

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Part)
        return self.written() == other.written()
