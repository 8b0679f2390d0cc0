"""`clarke site …`: import, check and describe recorded sites (docs/sites.md)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clarke.errors import InputError
from clarke.sites import archive, composition
from clarke.sites.har import HarOptions, import_har
from clarke.sites.store import Imported
from clarke.sites.warc import WarcOptions, import_warc

FORMATS = ("har", "warc")


def _format_of(path: Path, given: str | None) -> str:
    if given:
        return given
    name = path.name.lower()
    if name.endswith(".har"):
        return "har"
    if name.endswith((".warc", ".warc.gz", ".arc", ".arc.gz")):
        return "warc"
    raise InputError(f"{path}: say --format har or warc (the name ends in neither)")


def _report(imported: Imported, as_json: bool) -> None:
    a = imported.archive
    if as_json:
        click.echo(
            json.dumps(
                {
                    "path": str(imported.path),
                    "name": a.name,
                    "start_url": a.start_url,
                    "origins": len(a.origins),
                    "exchanges": len(a.exchanges),
                    "bytes": sum(e.size for e in a.exchanges),
                    "skipped": imported.skipped,
                }
            )
        )
        return
    for line in imported.skipped:
        click.echo(f"left out: {line}", err=True)
    click.echo(
        f"{imported.path}: site {a.name}, {len(a.exchanges)} exchanges from {len(a.origins)} "
        f"origins, {sum(e.size for e in a.exchanges)} bytes; start {a.start_url}"
    )


@click.group()
def site() -> None:
    """Recorded sites: import a HAR or WARC, check an archive, show what it holds."""


@site.command("import")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="The archive directory to write (new or empty).",
)
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), help="har or warc (default: by the file's name)."
)
@click.option("--name", help="The site's name in campaigns (default: from the page's host).")
@click.option("--start-url", help="The page's URL (default: the first HTML response).")
@click.option(
    "--skip-incomplete",
    is_flag=True,
    help="HAR: leave out entries saved without their body instead of failing.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def import_cmd(
    file: Path,
    out: Path,
    fmt: str | None,
    name: str | None,
    start_url: str | None,
    skip_incomplete: bool,
    as_json: bool,
) -> None:
    """Import a HAR (with content) or a WARC file as a site archive."""
    kind = _format_of(file, fmt)
    if kind == "har":
        imported = import_har(file, out, HarOptions(name, start_url, skip_incomplete))
    else:
        if skip_incomplete:
            raise InputError("--skip-incomplete: a HAR option (a WARC record always has its body)")
        imported = import_warc(file, out, WarcOptions(name, start_url))
    _report(imported, as_json)


@site.command("check")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the composition as JSON.")
def check_cmd(directory: Path, as_json: bool) -> None:
    """Check an archive (exit 2 naming every broken entry) and show its composition."""
    s = archive.read(directory)
    stats = composition.of(s)
    if as_json:
        click.echo(json.dumps({"name": s.name, "digest": s.digest, **stats.to_dict()}))
        return
    click.echo(f"{directory}: site {s.name} ({s.archive.source.kind}), start {s.archive.start_url}")
    click.echo(composition.table(stats))
