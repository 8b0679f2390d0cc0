"""`clarke pages …`: build and list the generated test pages."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from clarke.errors import UnknownName
from clarke.pages import build as page_build
from clarke.pages.models import PageSpec, Registry, Units


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def select_pages(
    reg: Registry, models: list[str] | None, sizes: list[str] | None, units: Units
) -> list[PageSpec]:
    chosen = [reg.get(m) for m in models] if models else list(reg)
    if sizes:
        known = {s for m in chosen for s in m.sizes}
        for s in sizes:
            if s not in known:
                raise UnknownName("page size", s, sorted(known))
    return [m.page(s, units) for m in chosen for s in m.sizes if sizes is None or s in sizes]


# Both commands read the same models in the same units.
_models_file = click.option(
    "--models-file",
    "model_files",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Extra page models from a YAML file (same shape as pages/alshagri2023.yaml). Repeatable.",
)
_units = click.option(
    "--units",
    type=click.Choice([u.value for u in Units]),
    default="si",
    show_default=True,
    help="si: 1 K = 1000 bytes (the study's unit); binary: 1 K = 1024 bytes.",
)


@click.group()
def pages() -> None:
    """Generated test pages (the GEO study's page models, and your own)."""


@pages.command("build")
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    required=True,
    help="Directory to write DIR/<model>-<size>/ and DIR/manifest.json into.",
)
@click.option(
    "--models", help="Comma-separated page models (default: all). See `clarke pages list`."
)
@click.option(
    "--sizes", help="Comma-separated sizes, e.g. 100k,1m (default: every size of each model)."
)
@_models_file
@_units
def build_cmd(
    out: Path, models: str | None, sizes: str | None, model_files: tuple[Path, ...], units: str
) -> None:
    """Write test pages: real JPEG objects of exactly the model's sizes, in page order."""
    unit = Units(units)
    reg = Registry.default(model_files)
    chosen = select_pages(reg, _csv(models), _csv(sizes), unit)
    with click.progressbar(
        chosen,
        label="Building pages",
        file=sys.stderr,
        item_show_func=lambda p: p.name if p else "",
    ) as bar:
        manifest = page_build.build(bar, out, unit)
    click.echo(f"{len(chosen)} pages written; manifest: {manifest}")


@pages.command("list")
@_models_file
@_units
def list_cmd(model_files: tuple[Path, ...], units: str) -> None:
    """List page models, their sizes and object sizes in bytes."""
    reg = Registry.default(model_files)
    for model in reg:
        click.echo(f"{model.name}: {model.description}  [{model.source}]")
        for size in model.sizes:
            spec = model.page(size, Units(units))
            objs = ", ".join(str(b) for b in spec.object_bytes)
            click.echo(f"  {spec.name:<20} {spec.total_bytes:>9} bytes  ({objs})")
