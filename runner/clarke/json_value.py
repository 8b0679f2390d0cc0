"""JSON as it crosses a process or file boundary, before a model narrows it.

A value read from JSON is a ``dict[str, object]`` until it has been checked:
whoever reads a key says what type it expects (``isinstance`` or a model's
``model_validate``), instead of ``Any`` letting every use through unchecked.
"""

from typing import TypeAlias

JsonObject: TypeAlias = dict[str, object]


def object_at(value: object, *keys: str) -> JsonObject:
    """The object found by following `keys` down from `value`; an empty one where a
    step is missing or is not an object (an older or a different peer's answer)."""
    for key in keys:
        if not isinstance(value, dict):
            return {}
        value = value.get(key)
    return value if isinstance(value, dict) else {}
