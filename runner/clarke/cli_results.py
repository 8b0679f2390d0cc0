"""`clarke results …`: work with a campaign's results directory."""

from __future__ import annotations

from pathlib import Path

import click

from clarke.results import export, store

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
    from clarke.results import influx  # influxdb_client is slow to import: only when pushing

    meta, journal = store.open_existing(results_dir)
    records = list(journal.records())
    with influx.InfluxSink.from_url(influx_url) as sink:
        sink.ensure_database()
        n = sink.write(records)
        extra = sink.write_points(influx.campaign_points(meta, records))
    click.echo(f"{n} records and {extra} summary points written to {sink.target}")


@results.command("export")
@click.argument("results_dir", type=RESULTS_DIR)
@click.option(
    "--format", "fmt", type=click.Choice(["csv", "parquet"]), default="csv", show_default=True
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Output file (default: RESULTS_DIR/results.csv or .parquet).",
)
def export_cmd(results_dir: Path, fmt: str, out: Path | None) -> None:
    """Write RESULTS_DIR's records as a flat table: one row per page-load attempt."""
    _, journal = store.open_existing(results_dir)
    records = list(journal.records())
    out = out or results_dir / f"results.{fmt}"
    (export.write_csv if fmt == "csv" else export.write_parquet)(records, out)
    click.echo(f"{len(records)} records written to {out}")
