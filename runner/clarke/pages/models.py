"""Page models: named object lists per size, read from YAML (pages/alshagri2023.yaml and
any user file of the same shape)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import Field, StringConstraints, model_validator

from clarke import paths, schema
from clarke.errors import InputError, UnknownName
from clarke.schema import StrictModel

MIN_OBJECT_BYTES = 1000  # below this a JPEG is mostly headers
# Building an object takes about 3.6 times its size in memory: the cap keeps a typo
# ("10g") from exhausting the machine. CLARKE_MAX_OBJECT_MB raises it (docs/pages.md).
DEFAULT_MAX_OBJECT_MB = 64
# The longest hold origin grants a response (`?delay_ms=N`, origin/README.md).
MAX_SERVER_DELAY_MS = 30_000


def max_object_bytes() -> int:
    raw = os.environ.get("CLARKE_MAX_OBJECT_MB", "")
    if not raw:
        return DEFAULT_MAX_OBJECT_MB * 1_000_000
    try:
        mb = float(raw)
    except ValueError:
        raise InputError(f"CLARKE_MAX_OBJECT_MB={raw!r}: expected a number of MB") from None
    if not mb > 0:
        raise InputError(f"CLARKE_MAX_OBJECT_MB={raw!r}: expected a positive number of MB")
    return int(mb * 1_000_000)


STUDY_FILE = "alshagri2023.yaml"

ModelName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=40)]
SizeLabel = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9.]*$", max_length=20)]


class Units(StrEnum):
    si = "si"  # 1 K = 1000 bytes: the study writes "100 K bytes"
    binary = "binary"  # 1 K = 1024 bytes

    @property
    def bytes_per_k(self) -> int:
        return 1000 if self is Units.si else 1024


class EqualSplit(StrictModel):
    count: int = Field(ge=1, le=500)
    total: float = Field(gt=0)


class ModelSpec(StrictModel):
    description: str = ""
    sizes: dict[
        SizeLabel,
        Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=1, max_length=500)]
        | EqualSplit,
    ] = Field(min_length=1)
    # How long the server holds each object's response, in page order (docs/pages.md,
    # "Server delays"); every size of the model has this many objects.
    server_delays_ms: (
        Annotated[
            list[Annotated[int, Field(ge=0, le=MAX_SERVER_DELAY_MS, strict=True)]],
            Field(min_length=1, max_length=500),
        ]
        | None
    ) = None

    @model_validator(mode="after")
    def _one_delay_per_object(self) -> ModelSpec:
        if self.server_delays_ms is None:
            return self
        want = len(self.server_delays_ms)
        counts = {
            label: spec.count if isinstance(spec, EqualSplit) else len(spec)
            for label, spec in self.sizes.items()
        }
        if wrong := {label: n for label, n in counts.items() if n != want}:
            sizes = ", ".join(f"{label} has {n}" for label, n in wrong.items())
            raise ValueError(
                f"server_delays_ms gives {want} delays, one per object, but size {sizes} objects"
            )
        return self


class ModelFile(StrictModel):
    models: dict[ModelName, ModelSpec] = Field(min_length=1)


@dataclass(frozen=True)
class PageSpec:
    """One page to build: `<model>-<size>` with its object sizes in bytes, in page order."""

    model: str
    size: str
    object_bytes: tuple[int, ...]
    # The server's hold per object in ms, in page order; () when the page has none.
    delays_ms: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.delays_ms and len(self.delays_ms) != len(self.object_bytes):
            raise ValueError(
                f"{self.name}: {len(self.delays_ms)} delays for {len(self.object_bytes)} objects"
            )

    def delay_of(self, position: int) -> int:
        """The server's hold of object `position` (1-based) in ms; 0 without one."""
        return self.delays_ms[position - 1] if self.delays_ms else 0

    @property
    def server_delays(self) -> bool:
        """Whether any object of the page asks the server to hold its response."""
        return any(self.delays_ms)

    @property
    def name(self) -> str:
        return f"{self.model}-{self.size}"

    @property
    def total_bytes(self) -> int:
        return sum(self.object_bytes)


@dataclass(frozen=True)
class PageModel:
    name: str
    description: str
    source: str
    sizes: dict[str, list[float] | EqualSplit]
    delays_ms: tuple[int, ...] = ()

    def page(self, size: str, units: Units) -> PageSpec:
        if size not in self.sizes:
            raise UnknownName(f"size of page model {self.name!r}", size, list(self.sizes))
        spec = self.sizes[size]
        k = units.bytes_per_k
        if isinstance(spec, EqualSplit):
            total = round(spec.total * k)
            base, extra = divmod(total, spec.count)
            objects = tuple(base + (1 if i < extra else 0) for i in range(spec.count))
        else:
            objects = tuple(round(v * k) for v in spec)
        small = [i + 1 for i, b in enumerate(objects) if b < MIN_OBJECT_BYTES]
        if small:
            raise InputError(
                f"{self.source}: models.{self.name}.sizes.{size}: objects {small} are smaller "
                f"than {MIN_OBJECT_BYTES} bytes, too small for a real JPEG"
            )
        cap = max_object_bytes()
        large = [i + 1 for i, b in enumerate(objects) if b > cap]
        if large:
            raise InputError(
                f"{self.source}: models.{self.name}.sizes.{size}: objects {large} are larger "
                f"than {cap / 1e6:g} MB (building one takes about 3.6 times its size in "
                "memory); set CLARKE_MAX_OBJECT_MB to allow more"
            )
        return PageSpec(self.name, size, objects, self.delays_ms)


class Registry:
    """All known page models, the study's first. Names are unique across files."""

    def __init__(self) -> None:
        self._models: dict[str, PageModel] = {}

    def add_file(self, path: Path) -> None:
        parsed = schema.read(ModelFile, path)
        for name, spec in parsed.models.items():
            if name in self._models:
                raise InputError(
                    f"{path}: models.{name}: already defined in {self._models[name].source}"
                )
            self._models[name] = PageModel(
                name,
                spec.description,
                str(path),
                dict(spec.sizes),
                tuple(spec.server_delays_ms or ()),
            )

    @classmethod
    def default(cls, extra_files: list[Path] | tuple[Path, ...] = ()) -> Registry:
        reg = cls()
        reg.add_file(paths.data_dir("pages") / STUDY_FILE)
        for f in extra_files:
            reg.add_file(f)
        return reg

    def names(self) -> list[str]:
        return list(self._models)

    def get(self, name: str) -> PageModel:
        try:
            return self._models[name]
        except KeyError:
            raise UnknownName("page model", name, self.names()) from None

    def __iter__(self) -> Iterator[PageModel]:
        return iter(self._models.values())

    def page_by_name(self, page_name: str, units: Units = Units.si) -> PageSpec:
        model, sep, size = page_name.partition("-")
        if not sep:
            raise InputError(
                f"page {page_name!r} is not of the form <model>-<size>, e.g. uniform-1m"
            )
        return self.get(model).page(size, units)
