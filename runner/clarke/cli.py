"""The `clarke` command. Subcommand groups live in their own modules (cli_*.py); this one
assembles them and turns Clarke's errors into `Kind: message` and an exit code."""

from __future__ import annotations

import logging
import sys

import click

from clarke import (
    __version__,
    cli_bench,
    cli_campaign,
    cli_compare,
    cli_link,
    cli_load,
    cli_pages,
    cli_report,
    cli_results,
    cli_run,
    cli_serve,
    cli_site,
    cli_submit,
    cli_testbed,
)
from clarke.errors import ClarkeError, InputError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="clarke")
@click.option("-v", "--verbose", is_flag=True, help="Log every external command as `$ cmd`.")
def cli(verbose: bool) -> None:
    """Clarke measures web page loads in a real browser over emulated satellite links.

    A campaign file declares a matrix (link profiles x HTTP versions x congestion
    controls x pages x repetitions); Clarke builds the pages, runs every page load,
    verifies what was really used and records PLT, FCP and LCP in a journal and InfluxDB.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(message)s",
        stream=sys.stderr,
    )


cli.add_command(cli_load.load)
cli.add_command(cli_run.run)
cli.add_command(cli_submit.submit)
cli.add_command(cli_compare.compare)
cli.add_command(cli_pages.pages)
cli.add_command(cli_campaign.campaign)
cli.add_command(cli_results.results)
cli.add_command(cli_report.report)
cli.add_command(cli_testbed.testbed)
cli.add_command(cli_bench.bench)
cli.add_command(cli_serve.serve)
cli.add_command(cli_link.link)
cli.add_command(cli_site.site)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="clarke", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except ClarkeError as e:
        click.echo(f"{e.kind}: {e}", err=True)
        sys.exit(e.exit_code)
    except OSError as e:
        if e.filename is None:
            raise
        # A file or directory the command was pointed at (an --out into a missing
        # directory, a file it may not read): the user's to fix, named, exit 2.
        click.echo(f"{InputError.kind}: {e.filename}: {e.strerror}", err=True)
        sys.exit(InputError.exit_code)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
