"""`clarke report`: an HTML report of a campaign for people without Grafana."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("results_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Output file (default: RESULTS_DIR/report.html).",
)
def report(results_dir: Path, out: Path | None) -> None:
    """Write a self-contained HTML report of RESULTS_DIR: the GEO study's figure types,
    per-cell statistics, protocol overhead, the measured link, software versions and
    failed runs."""
    from clarke.report.html import build  # matplotlib: only when a report is made

    out = out or results_dir / "report.html"
    out.write_text(build(results_dir))
    click.echo(f"report written to {out}")
