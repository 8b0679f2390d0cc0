"""`clarke --help` and every subcommand's help work and say something."""

from __future__ import annotations

import subprocess
import sys

import click

from clarke.cli import cli


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


def test_every_command_has_help(run_cli) -> None:  # type: ignore[no-untyped-def]
    paths = _commands(cli)
    assert (
        ("pages", "build") in paths
        and ("campaign", "plan") in paths
        and ("results", "push") in paths
    )
    for path in paths:
        code, out, err = run_cli(*path, "--help")
        assert code == 0, (path, err)
        assert out.startswith("Usage: clarke"), path
        summary = out.split("\n\n")[1].strip()
        assert len(summary) > 15, (path, summary)


def test_a_command_loads_only_its_own_module() -> None:
    """`clarke serve` (every agent's start) does not import what other commands use:
    scipy, matplotlib, pyarrow and Selenium took seconds at each start."""
    probe = (
        "import sys\n"
        "from clarke.cli import cli\n"
        "import click\n"
        "cli.get_command(click.Context(cli), 'serve')\n"
        "print(' '.join(m for m in ('scipy', 'matplotlib', 'pyarrow', 'clarke.cli.run') "
        "if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "", proc.stdout


def test_installed_entry_point_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "clarke", "--version"], capture_output=True, text=True, check=True
    )
    assert proc.stdout.startswith("clarke, version")


def test_unknown_command_is_a_usage_error(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli("fly")
    assert code == 2 and "No such command 'fly'" in err
