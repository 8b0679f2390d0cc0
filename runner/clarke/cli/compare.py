"""`clarke compare`: did the current campaign get slower than the baseline?"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

RESULTS_DIR = click.Path(path_type=Path, file_okay=False, exists=True)


@click.command()
@click.argument("baseline", type=RESULTS_DIR)
@click.argument("current", type=RESULTS_DIR)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 10),
    default=0.10,
    show_default=True,
    help="Relative slowdown of the median that counts (0.10 = 10 %).",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.05,
    show_default=True,
    help="Significance level, after Holm's correction across the cells, per metric.",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the comparison as JSON here.",
)
@click.option(
    "--markdown",
    "md_out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write a Markdown table here (e.g. $GITHUB_STEP_SUMMARY).",
)
def compare(
    baseline: Path,
    current: Path,
    threshold: float,
    alpha: float,
    json_out: Path | None,
    md_out: Path | None,
) -> None:
    """Compare CURRENT with BASELINE (two results directories of one campaign), cell by
    cell: median ratio with a bootstrap 95 % CI, Mann-Whitney U with Holm's correction.

    Exits 1 when a cell is slower beyond the threshold and significant, 2 on unusable
    input (different campaigns, cells missing or without successful loads), else 0."""
    from clarke.run.compare.cells import (  # scipy: slow to import
        Verdict,
        compare_records,
        markdown,
        read_results,
    )

    c = compare_records(
        read_results(baseline), read_results(current), threshold=threshold, alpha=alpha
    )
    t = Table(title=f"{c.campaign}: current vs baseline")
    for col in (
        "cell",
        "metric",
        "baseline ms",
        "current ms",
        "ratio",
        "95 % CI",
        "p (Holm)",
        "verdict",
    ):
        t.add_column(col)
    for m in c.metrics:
        ci = (
            "-"
            if any(math.isnan(x) for x in m.ratio_ci)
            else f"{m.ratio_ci[0]:.3f} to {m.ratio_ci[1]:.3f}"
        )
        style = (
            "bold red"
            if m.verdict is Verdict.slower
            else ("green" if m.verdict is Verdict.faster else "")
        )
        t.add_row(
            m.cell.path,
            m.metric,
            f"{m.median_baseline:,.1f}",
            f"{m.median_current:,.1f}",
            f"{m.ratio:.3f}",
            ci,
            f"{m.p_holm:.4f}",
            m.verdict.value,
            style=style,
        )
    Console(width=160).print(t)
    for line in c.software_changes:
        click.echo(f"measured with other software than the baseline: {line}")
    if json_out:
        json_out.write_text(json.dumps(c.to_json(), indent=2) + "\n")
    if md_out:
        with md_out.open("a") as f:
            f.write(markdown(c))
    slower = [cell for cell, v in c.cells().items() if v is Verdict.slower]
    if slower:
        click.echo(f"REGRESSION in {len(slower)} cell(s): " + ", ".join(s.path for s in slower))
        sys.exit(1)
    click.echo("no regression")
