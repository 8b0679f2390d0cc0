"""`clarke results …`: work with a campaign's results directory."""

from __future__ import annotations

from pathlib import Path

import click

from clarke.errors import InputError
from clarke.results import export, store
from clarke.results.merge import merge

RESULTS_DIR = click.Path(path_type=Path, file_okay=False, exists=True)


@click.group()
def results() -> None:
    """Results directories: journals of page loads, and their InfluxDB copies."""


@results.command()
@click.argument("results_dir", type=RESULTS_DIR)
@click.option(
    "--influx",
    "influx_url",
    required=True,
    envvar="CLARKE_INFLUX",
    help="http://[user:pass@]host:port[/database]; database default: clarke. "
    "Env: CLARKE_INFLUX; a token comes from INFLUX_TOKEN.",
)
def push(results_dir: Path, influx_url: str) -> None:
    """Write every record of RESULTS_DIR's journal to InfluxDB (again).

    Each point's time is its load's start, so pushing twice writes the same points:
    no duplicates. Use it to backfill after an InfluxDB outage."""
    # influxdb_client and scipy are slow to import: only when pushing
    from clarke.results import influx, summary

    meta, journal = store.open_existing(results_dir)
    records = list(journal.records())
    with influx.InfluxSink.from_url(influx_url) as sink:
        sink.ensure_database()
        n = sink.write(records)
        sequential = summary.sequential_of(results_dir)
        extra = sink.write_points(influx.campaign_points(meta, records, sequential))
    click.echo(f"{n} records and {extra} summary points written to {sink.target}")


@results.command("export")
@click.argument("results_dir", type=RESULTS_DIR)
@click.option(
    "--format", "fmt", type=click.Choice(["csv", "parquet"]), default="csv", show_default=True
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Output file (default: RESULTS_DIR/results.csv or .parquet; with --cells, "
    "RESULTS_DIR/cells.csv or .parquet).",
)
@click.option(
    "--cells",
    "per_cell",
    is_flag=True,
    help="One row per cell instead: the summary's full table (every dimension; per "
    "metric n, mean, median, 95 %% CI; how a sequential cell stopped).",
)
def export_cmd(results_dir: Path, fmt: str, out: Path | None, per_cell: bool) -> None:
    """Write RESULTS_DIR's records as a flat table: one row per page-load attempt (or,
    with --cells, one per cell)."""
    _, journal = store.open_existing(results_dir)
    records = list(journal.records())
    if per_cell:
        from clarke.results.summary import sequential_of, summarise  # scipy: slow to import

        cells = summarise(records, sequential=sequential_of(results_dir))
        out = out or results_dir / f"cells.{fmt}"
        (export.write_cells_csv if fmt == "csv" else export.write_cells_parquet)(cells, out)
        click.echo(f"{len(cells)} cells written to {out}")
        return
    out = out or results_dir / f"results.{fmt}"
    (export.write_csv if fmt == "csv" else export.write_parquet)(records, out)
    click.echo(f"{len(records)} records written to {out}")


@results.command("merge")
@click.argument("shard_dirs", type=RESULTS_DIR, nargs=-1, required=True)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="The merged results directory to create (must not exist).",
)
@click.option(
    "--require-complete",
    is_flag=True,
    help="Exit 2 when runs of the plan have no successful load (after merging).",
)
def merge_cmd(shard_dirs: tuple[Path, ...], out: Path, require_complete: bool) -> None:
    """Merge the results directories of the shards of one campaign (`clarke run --shard
    i/N --campaign-id ID`) into OUT, which compare, report and export take.

    Exits 2, naming the directories, on shards of different campaigns (id, campaign
    file, seed) or overlapping shards (a shard or run id twice). Runs of the plan
    without a successful load are listed (missing shards first)."""
    m = merge(list(shard_dirs), out)
    click.echo(
        f"{len(m.shards)} shard(s) merged into {m.out}: {m.records} records, "
        f"{m.planned - len(m.missing_runs)} of {m.planned} planned runs with a successful load"
    )
    if m.missing_shards:
        click.echo(f"missing shards: {', '.join(m.missing_shards)}", err=True)
    if m.missing_runs:
        shown = ", ".join(m.missing_runs[:20]) + (" ..." if len(m.missing_runs) > 20 else "")
        click.echo(f"{len(m.missing_runs)} runs without a successful load: {shown}", err=True)
        if require_complete:
            raise InputError(f"{m.out} is incomplete (--require-complete)")
