"""The page-composition statistics a generated site follows: a YAML file in which every
figure names its source and says whether the Web Almanac published it, Clarke derived
it from published figures, or Clarke assumed it. The shipped file is
pages/composition/web-almanac-2024-mobile.yaml; `--statistics FILE` reads another of
the same form. Counts must be whole numbers, nothing may be negative, and an unknown
field is an error naming it (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from clarke import paths, schema
from clarke.schema import StrictModel, located_error

DEFAULT = "web-almanac-2024-mobile"
DIRECTORY = "composition"
TYPES = ("html", "css", "js", "image", "font", "other")


class Figure(StrictModel):
    value: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    kind: Literal["published", "derived", "assumption"]
    source: Annotated[str, Field(min_length=1)]

    @property
    def count(self) -> int:
        return round(self.value)


class TypeFigures(StrictModel):
    requests: Figure
    kilobytes: Figure


class Types(StrictModel):
    html: TypeFigures
    css: TypeFigures
    js: TypeFigures
    image: TypeFigures
    font: TypeFigures
    other: TypeFigures

    def of(self, kind: str) -> TypeFigures:
        figures: TypeFigures = getattr(self, kind)
        return figures


class ThirdPartyShares(StrictModel):
    """Percent of third-party requests that are scripts, images, HTML."""

    js: Figure
    image: Figure
    html: Figure


_COUNTS = (
    "third_party_requests",
    "dependency_depth",
    "first_party_origins",
    "third_party_origins",
    "render_blocking_css",
    "render_blocking_scripts",
    "script_inserted_scripts",
    "css_images",
    "script_images",
)


class Statistics(StrictModel):
    name: Annotated[str, Field(min_length=1, max_length=64)]
    description: str = ""
    edition: int
    client: Literal["mobile", "desktop"]
    kilobyte_bytes: Literal[1000, 1024]
    types: Types
    total: TypeFigures
    third_party_requests: Figure
    third_party_shares: ThirdPartyShares
    dependency_depth: Figure
    first_party_origins: Figure
    third_party_origins: Figure
    render_blocking_css: Figure
    render_blocking_scripts: Figure
    script_inserted_scripts: Figure
    css_images: Figure
    script_images: Figure
    variation: Figure
    size_spread: Figure
    text_coding: Literal["gzip", "br"] | None
    text_coding_source: Annotated[str, Field(min_length=1)]

    @model_validator(mode="after")
    def _consistent(self) -> Statistics:
        counted = [(f"types.{t}.requests", self.types.of(t).requests) for t in TYPES]
        counted += [(name, getattr(self, name)) for name in _COUNTS]
        for where, figure in counted:
            if figure.value != round(figure.value):
                raise located_error(
                    (*where.split("."), "value"), f"{figure.value:g} is a count: a whole number"
                )
        t = self.types
        limits = [
            ("types.html.requests", t.html.requests.count, 1, "the page's own document"),
            ("types.js.requests", t.js.requests.count, 1, "a script to start the chains"),
            ("first_party_origins", self.first_party_origins.count, 1, "the page's origin"),
            ("dependency_depth", self.dependency_depth.count, 1, "the page's own requests"),
        ]
        for where, value, least, why in limits:
            if value < least:
                raise located_error((*where.split("."), "value"), f"at least {least} ({why})")
        if self.dependency_depth.count > 8:
            raise located_error(("dependency_depth", "value"), "at most 8")
        if self.render_blocking_css.count > t.css.requests.count:
            raise located_error(("render_blocking_css", "value"), "more than the CSS requests")
        scripts = self.render_blocking_scripts.count + self.script_inserted_scripts.count
        if scripts > t.js.requests.count:
            raise located_error(
                ("script_inserted_scripts", "value"),
                "render-blocking and inserted scripts are more than the JavaScript requests",
            )
        if self.css_images.count + self.script_images.count > t.image.requests.count:
            raise located_error(("script_images", "value"), "more than the image requests")
        if self.css_images.count and not t.css.requests.count:
            raise located_error(("css_images", "value"), "images from CSS need a CSS request")
        if t.font.requests.count and not t.css.requests.count:
            raise located_error(("types", "font", "requests"), "fonts come from CSS: no CSS")
        if self.third_party_requests.count and not self.third_party_origins.count:
            raise located_error(
                ("third_party_origins", "value"), "third-party requests need a third-party origin"
            )
        if self.first_party_origins.count + self.third_party_origins.count > 60:
            raise located_error(("third_party_origins", "value"), "at most 60 origins in all")
        for share in ("js", "image", "html"):
            if getattr(self.third_party_shares, share).value > 100:
                raise located_error(("third_party_shares", share, "value"), "a percentage: ≤ 100")
        if self.variation.value > 1 or self.size_spread.value > 3:
            raise located_error(("variation", "value"), "variation ≤ 1 and size_spread ≤ 3")
        return self

    def requests(self) -> int:
        return sum(self.types.of(t).requests.count for t in TYPES)


def shipped(name: str = DEFAULT) -> Path:
    return paths.data_dir("pages") / DIRECTORY / f"{name}.yaml"


def read(path: Path | None = None) -> Statistics:
    """The statistics in `path` (default: the shipped Web Almanac 2024 mobile figures);
    ValidationFailed naming each wrong field."""
    return schema.read(Statistics, path or shipped())
