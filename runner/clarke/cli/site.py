"""`clarke site …`: import, check and describe recorded sites (docs/sites.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from clarke.cli.options import options_into
from clarke.errors import InputError
from clarke.vocab import BROWSERS, Browser

if TYPE_CHECKING:
    from clarke.sites.store import Imported

# The sites package (warcio, brotli) is imported inside each command: every `clarke`
# command, a role's `clarke serve` among them, loads this module, and a role's image need
# not hold what only site commands use.

FORMATS = ("har", "warc")
# The limits' options (archive_files.Limits), in MiB: from 1 MiB to 1 TiB.
MB_RANGE = click.IntRange(1, 1 << 20)


def _out_dir(help: str, *, dir_only: bool = False) -> Callable[..., Any]:
    """`-o/--out`: the directory a command writes (`dir_only`: an existing file is
    refused before the command starts)."""
    path = click.Path(path_type=Path, file_okay=not dir_only)
    return click.option("-o", "--out", type=path, required=True, help=help)


def archive_limits(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--max-body-mb` and `--max-site-mb` of a command that reads or writes archives."""
    command = click.option(
        "--max-site-mb",
        type=MB_RANGE,
        help="The most an archive's bodies may hold together, in MiB "
        "(default: CLARKE_SITE_MAX_MB, else 512).",
    )(command)
    return click.option(
        "--max-body-mb",
        type=MB_RANGE,
        help="The most one body may hold once decoded, in MiB "
        "(default: CLARKE_SITE_MAX_BODY_MB, else 64).",
    )(command)


@dataclass(frozen=True)
class ImportCommand:
    """`clarke site import`'s options, as click passes them."""

    file: Path
    out: Path
    fmt: str | None
    name: str | None
    start_url: str | None
    skip_incomplete: bool
    max_body_mb: int | None
    max_site_mb: int | None
    as_json: bool


@dataclass(frozen=True)
class RecordCommand:
    """`clarke site record`'s options, as click passes them."""

    url: str
    out: Path
    resolves: tuple[str, ...]
    only_resolved: bool
    upstream_ca: Path | None
    name: str | None
    settle_ms: int
    timeout_s: float
    firefox: str | None
    keep_har: Path | None
    as_json: bool
    browser: Browser
    chromium: str | None


def recording_browser(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--browser` and `--chromium` of a command that records through mitmproxy."""
    command = click.option(
        "--chromium", help="The Chromium binary (default: the first of Clarke's candidates)."
    )(command)
    return click.option(
        "--browser",
        type=click.Choice(BROWSERS),
        default=Browser.firefox.value,
        show_default=True,
        callback=lambda _ctx, _param, value: Browser(value),
        help="The browser that loads the page through mitmproxy.",
    )(command)


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
@_out_dir("The archive directory to write (new or empty).")
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
@archive_limits
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@options_into(ImportCommand)
def import_cmd(o: ImportCommand) -> None:
    """Import a HAR (with content) or a WARC file as a site archive."""
    from clarke.sites.archive_files import Limits
    from clarke.sites.har import HarOptions, import_har
    from clarke.sites.warc import WarcOptions, import_warc

    kind = _format_of(o.file, o.fmt)
    limits = Limits.from_env(o.max_body_mb, o.max_site_mb)
    if kind == "har":
        options = HarOptions(o.name, o.start_url, o.skip_incomplete, limits)
        imported = import_har(o.file, o.out, options)
    else:
        if o.skip_incomplete:
            raise InputError("--skip-incomplete: a HAR option (a WARC record always has its body)")
        imported = import_warc(o.file, o.out, WarcOptions(o.name, o.start_url, limits))
    _report(imported, o.as_json)


@site.command("check")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@archive_limits
@click.option("--json", "as_json", is_flag=True, help="Print the composition as JSON.")
def check_cmd(
    directory: Path, max_body_mb: int | None, max_site_mb: int | None, as_json: bool
) -> None:
    """Check an archive (exit 2 naming every broken entry) and show its composition."""
    from clarke.sites import archive, composition
    from clarke.sites.archive_files import Limits

    s = archive.read(directory, Limits.from_env(max_body_mb, max_site_mb))
    stats = composition.of(s)
    if as_json:
        click.echo(json.dumps({"name": s.name, "digest": s.digest, **stats.to_dict()}))
        return
    click.echo(f"{directory}: site {s.name} ({s.archive.source.kind}), start {s.archive.start_url}")
    click.echo(composition.table(stats))


@site.command("record")
@click.argument("url")
@_out_dir("The archive directory to write (new or empty).")
@click.option(
    "--resolve",
    "resolves",
    multiple=True,
    metavar="HOST=ADDRESS[:PORT]",
    help="Connect to ADDRESS (and PORT) for HOST instead of what DNS says; repeatable.",
)
@click.option(
    "--only-resolved",
    is_flag=True,
    help="Refuse every host not given with --resolve (nothing else is connected to).",
)
@click.option(
    "--upstream-ca",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The CA certificate (PEM) mitmproxy trusts for the servers, instead of its usual "
    "roots (certifi's): for local servers with a CA of their own.",
)
@click.option("--name", help="The site's name in campaigns (default: from the page's host).")
@click.option(
    "--settle-ms",
    type=int,
    default=2000,
    show_default=True,
    help="After the load event, wait until no new request has started for this long.",
)
@click.option(
    "--timeout", "timeout_s", type=float, default=120.0, show_default=True, help="Seconds."
)
@click.option(
    "--firefox", help="The Firefox binary (default: firefox-nightly, firefox, firefox-esr)."
)
@recording_browser
@click.option(
    "--har",
    "keep_har",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also keep mitmproxy's HAR file here.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@options_into(RecordCommand)
def record_cmd(o: RecordCommand) -> None:
    """Load URL in headless Firefox or Chromium through mitmproxy and write what it
    fetched as an archive."""
    from clarke.browser.record import RecordOptions, Resolve, record

    opts = RecordOptions(
        url=o.url,
        out=o.out,
        resolve=tuple(Resolve.parse(r) for r in o.resolves),
        only_resolved=o.only_resolved,
        upstream_ca=o.upstream_ca,
        name=o.name,
        settle_ms=o.settle_ms,
        timeout_s=o.timeout_s,
        firefox=o.firefox,
        keep_har=o.keep_har,
        browser=o.browser,
        chromium=o.chromium,
    )
    _report(record(opts), o.as_json)


@site.command("corpus")
@_out_dir(
    "The corpus directory to write (new or empty): one archive per page, and tree/.", dir_only=True
)
@click.option(
    "--firefox", help="The Firefox binary (default: firefox-nightly, firefox, firefox-esr)."
)
@recording_browser
@click.option("--json", "as_json", is_flag=True, help="Print each archive's result as JSON.")
def corpus_cmd(
    out: Path, firefox: str | None, browser: Browser, chromium: str | None, as_json: bool
) -> None:
    """Record the offline corpus: python3.11-doc and debian-handbook pages served on
    loopback under seven host names (docs/sites.md), one archive per page."""
    from clarke.browser.record import RecordOptions, Resolve, record
    from clarke.sites import corpus

    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: exists and is not empty (the corpus is written anew)")
    tree = corpus.build_tree(out / "tree")
    with corpus.Servers(tree, out / "pki") as servers:
        resolve = tuple(Resolve(h, a, p) for h, (a, p) in servers.resolve.items())
        for name in corpus.PAGES:
            opts = RecordOptions(
                url=tree.url(name),
                out=out / name,
                resolve=resolve,
                only_resolved=True,
                upstream_ca=servers.pki.ca_cert,
                name=name,
                firefox=firefox,
                browser=browser,
                chromium=chromium,
            )
            _report(record(opts), as_json)


@site.command("generate")
@_out_dir("The archive directory to write (new or empty).", dir_only=True)
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=2**32 - 1),
    default=1,
    show_default=True,
    help="The seed: the same seed and statistics always give the same archive, byte for byte.",
)
@click.option(
    "--statistics",
    "statistics_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The page-composition statistics to follow (YAML; default: the shipped Web "
    "Almanac 2024 mobile figures, pages/composition/web-almanac-2024-mobile.yaml).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the side by side as JSON.")
def generate_cmd(out: Path, seed: int, statistics_file: Path | None, as_json: bool) -> None:
    """Generate a multi-origin site that follows published page-composition statistics,
    and print the figures it follows beside the ones it has."""
    from clarke.sites.generate import build, statistics

    if statistics_file is not None and not statistics_file.is_file():
        raise InputError(f"{statistics_file}: no such file (--statistics)")
    stats = statistics.read(statistics_file)
    name = (statistics_file or statistics.shipped()).name
    generated = build.generate(stats, seed, out, name)
    rows = build.side_by_side(generated)
    a = generated.archive
    if as_json:
        click.echo(
            json.dumps(
                {
                    "path": str(out),
                    "name": a.name,
                    "start_url": a.start_url,
                    "statistics": stats.name,
                    "seed": seed,
                    "figures": [r.__dict__ for r in rows],
                }
            )
        )
        return
    click.echo(
        f"{out}: site {a.name}, {len(a.exchanges)} exchanges from {len(a.origins)} origins; "
        f"start {a.start_url}; following {stats.name} (KB of {stats.kilobyte_bytes} bytes, as sent)"
    )
    click.echo(build.table(rows))
