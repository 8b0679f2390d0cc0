"""`clarke report`: an HTML report of a campaign for people without Grafana, or the
cross-implementation table of a campaign run on several implementations."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("results_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Output file (default: RESULTS_DIR/report.html, or RESULTS_DIR/implementations.md "
    "with --by implementation).",
)
@click.option(
    "--by",
    type=click.Choice(["implementation"]),
    help="implementation: RESULTS_DIR is the top directory of a campaign run on several "
    "implementations (`clarke run` of a campaign whose `implementations:` lists several); "
    "print and write (Markdown) per cell each combination's median PLT, FCP and LCP, its "
    "ratio to satlink + origin with a 95 % CI, the link checks and the loads' evidence.",
)
@click.option(
    "--metrics",
    "family",
    type=click.Choice(["w3c", "objects"]),
    default="w3c",
    show_default=True,
    help="w3c: FCP and LCP as Firefox paints them; objects: the GEO study's definitions, "
    "the first and the largest object's responseEnd (docs/metrics.md). The report says "
    "which it shows.",
)
def report(results_dir: Path, out: Path | None, by: str | None, family: str) -> None:
    """Write a self-contained HTML report of RESULTS_DIR: the GEO study's figure types,
    per-cell statistics, protocol overhead, the measured link, software versions and
    failed runs. With --by implementation, the cross-implementation table instead."""
    if by == "implementation":
        if family != "w3c":
            raise click.UsageError("--metrics objects is for the HTML report, not --by")
        _by_implementation(results_dir, out)
        return
    from clarke.report.html import build  # matplotlib: only when a report is made

    out = out or results_dir / "report.html"
    out.write_text(build(results_dir, family))
    click.echo(f"report written to {out}")


def _by_implementation(top: Path, out: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    from clarke.errors import InputError
    from clarke.run.implementations import table as implementations
    from clarke.run.implementations.several import is_top_directory

    if not is_top_directory(top):
        raise InputError(
            f"{top} is not the top directory of a campaign run on several implementations "
            "(no implementations.json there)"
        )
    t = implementations.build(top)
    head, body = implementations.rows(t)
    table = Table(title=f"{t.campaign}: by implementation (median ms, ratio to "
                  f"{t.baseline or 'no baseline'} [95 % CI])")  # fmt: skip
    for h in head:
        table.add_column(h)
    for r in body:
        table.add_row(*r)
    Console(width=220).print(table)
    for c in t.combinations:
        if not c.results:
            click.echo(f"{c.label}: {c.state.value}" + (f": {c.reason}" if c.reason else ""))
    out = out or top / "implementations.md"
    out.write_text(implementations.markdown(t))
    click.echo(f"table written to {out}")
