"""The `clarke` command. Each command lives in a module of this package (cli/run.py,
cli/site.py, ...) with its options; their shared option types are in cli/options.py and
cli/dimensions.py. This module assembles them and turns Clarke's errors into `Kind:
message` and an exit code.

A command's module is imported when the command is asked for, not before: a role's
`clarke serve`, a resolver's agent and every short command start without loading what
other commands use (scipy, matplotlib, Selenium), which took a second or more at each
start. `clarke --help` loads them all to show each one's help."""

from __future__ import annotations

import importlib
import logging
import sys

import click

from clarke import __version__
from clarke.errors import ClarkeError, InputError

# The commands: each is defined in clarke.cli.<name>, as a click command of that name.
COMMANDS = frozenset(
    [
        "bench",
        "campaign",
        "compare",
        "link",
        "load",
        "pages",
        "report",
        "results",
        "run",
        "serve",
        "site",
        "submit",
        "testbed",
    ]
)


class _Commands(click.Group):
    """A group whose commands are imported when asked for (COMMANDS)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        command = getattr(importlib.import_module(f"clarke.cli.{cmd_name}"), cmd_name)
        assert isinstance(command, click.Command), cmd_name
        return command


@click.group(
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
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
