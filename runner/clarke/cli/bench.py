"""`clarke bench`: benchmarks that print the figures an issue's targets name."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import click

from clarke import profiles
from clarke.cli.options import link_option, options_into
from clarke.place import netns
from clarke.run.bench import link as bench_link
from clarke.run.bench import load as bench_load
from clarke.vocab import (
    BROWSERS,
    ENGINES,
    HTTP_VERSIONS,
    ISOLATIONS,
    LOADS_PER_BROWSER,
    MAX_LOADS_PER_BROWSER,
    Browser,
    Isolation,
    StartAhead,
)


@click.group()
def bench() -> None:
    """Benchmarks of Clarke's own parts (they build and remove their own testbeds)."""


@bench.command()
@link_option()
@click.option("--parallel", "n", default=8, show_default=True, help="Geo testbeds at once.")
@click.option(
    "--only",
    type=click.Choice(["geo", "unshaped", "parallel"]),
    multiple=True,
    help="Run only these parts (repeatable); default: all three.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--out", type=click.Path(path_type=Path), help="Also write the figures as JSON.")
def link(link: str, n: int, only: tuple[str, ...], as_json: bool, out: Path | None) -> None:
    """Geo RTT and rate each way, unshaped TCP throughput with the link's CPU per Gbit,
    and RTT on N geo testbeds at once (needs root)."""
    b = bench_link
    netns.require_root_and_tun()
    parts = only or ("geo", "unshaped", "parallel")
    figures: dict[str, object] = {}
    if "geo" in parts:
        figures["geo"] = b.geo(link)
    if "unshaped" in parts:
        figures["unshaped"] = b.unshaped(link)
    if "parallel" in parts:
        figures["parallel"] = b.parallel(n, link)
    if out:
        out.write_text(json.dumps(figures, indent=2, default=str))
    click.echo(json.dumps(figures, indent=2, default=str) if as_json else b.render(figures))


@dataclass(frozen=True)
class ValidateCommandOptions:
    """What `clarke bench validate` was asked."""

    profile: str
    link: str
    duration: float
    interval: float
    rate_duration: float
    no_rates: bool
    max_offered_mbps: float
    markdown: bool
    as_json: bool
    out: Path | None


@bench.command("validate")
@click.argument("profile")
@link_option()
@click.option(
    "--duration", type=click.FloatRange(min=1, max=3600), default=60.0, show_default=True,
    help="Seconds of echoes.",
)  # fmt: skip
@click.option(
    "--interval", type=click.FloatRange(min=0.001, max=10), default=0.01, show_default=True,
    help="Seconds between echoes.",
)  # fmt: skip
@click.option(
    "--rate-duration", type=click.FloatRange(min=3, max=600), default=15.0, show_default=True,
    help="Seconds of paced UDP per direction.",
)  # fmt: skip
@click.option("--no-rates", is_flag=True, help="Measure echoes only.")
@click.option(
    "--max-offered-mbps", type=click.FloatRange(min=1), default=400.0, show_default=True,
    help="The most the UDP flow offers; slots scheduled above it are marked offer-limited.",
)  # fmt: skip
@click.option("--markdown", is_flag=True, help="Print the table in Markdown.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Also write JSON.")
@options_into(ValidateCommandOptions)
def validate(o: ValidateCommandOptions) -> None:
    """Measure PROFILE on a testbed of its own (needs root): idle RTT distribution,
    echo loss and where in a slot it falls, the steps of each slot's RTT floor, the
    rate each way, and with capacity on demand full-sized echoes after idle against a
    steady flow of them; printed beside the published figures the profile declares
    under `validation:` (docs/validation.md)."""
    from clarke.run.bench import validate as v

    profiles.read(o.profile)  # a bad name or file: exit 2 before anything is built
    if int(o.duration / o.interval) > 65_000:
        raise click.BadParameter(
            f"{o.duration:g} s every {o.interval:g} s is more than 65000 echoes (16-bit sequence)",
            param_hint="--duration/--interval",
        )
    netns.require_root_and_tun()
    options = v.ValidateOptions(
        o.link, o.duration, o.interval, o.rate_duration, o.max_offered_mbps, rates=not o.no_rates
    )
    result = v.measure(
        o.profile, options, progress=lambda text: click.echo(f"{o.profile}: {text}", err=True)
    )
    if o.out:
        o.out.write_text(json.dumps(result, indent=2, default=str))
    click.echo(
        json.dumps(result, indent=2, default=str) if o.as_json else v.render(result, o.markdown)
    )


@bench.command("load")
@click.option(
    "--engine",
    "engines",
    type=click.Choice(ENGINES),
    multiple=True,
    help="Engines to measure (repeatable); default: both.",
)
@click.option("-n", "n", default=10, show_default=True, help="Loads per engine.")
@click.option("--page", default="uniform-100k", show_default=True)
@click.option("--http", "http", type=click.Choice(HTTP_VERSIONS), default="2", show_default=True)
@click.option("--profile", default="lan", show_default=True, help=profiles.help_text())
@click.option("--testbed", "testbed_id", type=int, help="Use this running testbed.")
@click.option(
    "--breakdown",
    is_flag=True,
    help="Also print each phase of a load (the client's and the runner's), median and "
    "10th to 90th percentile.",
)
@click.option(
    "--start-ahead",
    type=click.Choice(get_args(StartAhead)),
    default="after-page",
    show_default=True,
    help="When the next load's browser starts: once the page is measured, or during the "
    "page at idle priority (docs/running.md).",
)
@click.option(
    "--browser",
    type=click.Choice(BROWSERS),
    default=Browser.firefox.value,
    show_default=True,
    help="The browser both engines drive.",
)
@click.option(
    "--isolation",
    type=click.Choice(ISOLATIONS),
    default=Isolation.profile.value,
    show_default=True,
    help="A new browser and profile per load, or a new context per load in a running "
    "browser (Selenium; Browsertime always starts its own browser).",
)
@click.option(
    "--loads-per-browser",
    type=click.IntRange(1, MAX_LOADS_PER_BROWSER),
    default=LOADS_PER_BROWSER,
    show_default=True,
    help="With --isolation context: a new browser after this many loads.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def load_overhead(**given: Any) -> None:
    """Harness overhead per load (wall time minus PLT, median of N) for each engine."""
    g = given
    fig = bench_load.harness_overhead(
        bench_load.LoadBench(
            engines=tuple(g["engines"] or ENGINES),
            n=g["n"],
            page=g["page"],
            http=g["http"],
            profile=g["profile"],
            testbed_id=g["testbed_id"],
            start_ahead=g["start_ahead"],
            browser=Browser(g["browser"]),
            isolation=Isolation(g["isolation"]),
            loads_per_browser=g["loads_per_browser"],
        )
    )
    click.echo(
        json.dumps(fig, indent=2) if g["as_json"] else bench_load.render(fig, g["breakdown"])
    )


@bench.command("compare-power")
@click.option(
    "--recorded",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=Path("tests/data/recorded-repeats"),
    show_default=True,
    help="A results directory with many repetitions per cell (real loads).",
)
@click.option("-n", "ns", type=int, multiple=True, help="Loads per cell (repeatable).")
@click.option(
    "--cells",
    "families",
    type=int,
    multiple=True,
    help="Cells in the Holm family (repeatable); default: 1, 12, 24.",
)
@click.option(
    "--family",
    type=click.Choice(["drawn", "recorded"]),
    default="drawn",
    show_default=True,
    help="drawn: the C - 1 unchanged cells of a night drawn from the recorded cells "
    "(--cells sets C); recorded: the family is every recorded cell, each with its own "
    "loads (record the nightly's own campaign with 2n repetitions or more).",
)
@click.option(
    "--at",
    "at",
    type=click.FloatRange(1, 3),
    multiple=True,
    help="A slowdown factor whose detection rate is printed, e.g. 1.05 (repeatable).",
)
@click.option(
    "--step",
    type=click.FloatRange(0.001, 0.5),
    default=0.02,
    show_default=True,
    help="Step between the slowdowns tried.",
)
@click.option(
    "--max-slowdown",
    type=click.FloatRange(1, 3, min_open=True),
    default=2.0,
    show_default=True,
    help="The largest slowdown factor tried (2.0: +100 %).",
)
@click.option(
    "--cell",
    "only",
    multiple=True,
    metavar="CELL",
    help="Use only this recorded cell, as compare's tables name it (repeatable): e.g. the "
    "figures of one noisy cell, slowed and drawn as the unchanged cells alone.",
)
@click.option(
    "--slowed",
    "slowed",
    multiple=True,
    metavar="SLOWED=BASE",
    help="A recorded cell that is a real slowdown of another, loaded beside it (e.g. its "
    "page with held responses): prints how often it is caught against the base cell, and "
    "how often the multiplied base cell is (the model), for each -n and --cells "
    "(repeatable; default --cells: 1, 12).",
)
@click.option("--trials", type=click.IntRange(1), default=400, show_default=True)
@click.option("--power", default=0.8, show_default=True, help="Detection rate to reach.")
@click.option("--threshold", type=click.FloatRange(0), default=0.10, show_default=True)
@click.option("--alpha", default=0.05, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def compare_power(recorded: Path, **given: Any) -> None:
    """Minimum PLT slowdown `clarke compare` detects with n loads per cell, simulated by
    subsampling real recorded loads and injecting slowdowns (prints figures)."""
    from clarke.run.bench import power  # scipy: slow to import
    from clarke.run.bench.power_family import family_figures, render_family

    how = power.Trials(count=given["trials"], threshold=given["threshold"], alpha=given["alpha"])
    ns, at = list(given["ns"] or (5, 8, 10)), tuple(given["at"])
    if given["slowed"]:
        _real_slowdowns(recorded, given["slowed"], ns, given, how)
        return
    grid = (given["max_slowdown"], given["step"])
    if given["family"] == "drawn":
        families = list(given["families"] or (1, 12, 24))
        cells = power.load_cells(recorded, given["only"])
        f = {
            **power.describe(recorded, cells, how, given["power"]),
            **power.figures(cells, ns, families, how, given["power"], grid, at),
        }
        click.echo(json.dumps(f, indent=2) if given["as_json"] else power.render(f))
        return
    if given["families"]:
        raise click.BadParameter(
            "--cells applies to --family drawn; with --family recorded the family is "
            "every recorded cell",
            param_hint="--cells",
        )
    cells = power.load_cells(recorded, given["only"])
    f = {
        **power.describe(recorded, cells, how, given["power"]),
        **family_figures(cells, ns, power.slowdown_grid(*grid), list(at), how, given["power"]),
    }
    if given["as_json"]:
        click.echo(json.dumps(f, indent=2))
    else:
        click.echo("\n".join([*power.render_header(f), *render_family(f, given["power"])]))


def _real_slowdowns(
    recorded: Path, slowed: tuple[str, ...], ns: list[int], given: dict[str, Any], how: Any
) -> None:
    from clarke.run.bench import power
    from clarke.run.bench.power_real import real_figures, render_real

    if given["family"] != "drawn":
        raise click.BadParameter(
            "--slowed draws the unchanged cells of a night from the recording's unslowed "
            "cells (--family drawn)",
            param_hint="--slowed",
        )
    pairs: dict[str, str] = {}
    for pair in slowed:
        s, sep, b = pair.partition("=")
        if not sep or not s or not b or s == b:
            raise click.BadParameter(
                f"{pair!r}: expected SLOWED=BASE, two different cells of the recording, "
                "each as compare's tables name it (geo/3/bbr/...)",
                param_hint="--slowed",
            )
        pairs[s] = b
    cells = power.load_cells(recorded, given["only"])
    f = {
        **power.describe(recorded, cells, how, given["power"]),
        **real_figures(cells, pairs, ns, list(given["families"] or (1, 12)), how),
    }
    if given["as_json"]:
        click.echo(json.dumps(f, indent=2))
    else:
        click.echo("\n".join([*power.render_header(f), *render_real(f)]))


@bench.command("sequential-coverage")
@click.option(
    "--recorded",
    "dirs",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    multiple=True,
    help="A results directory of real loads (repeatable; default: tests/data/"
    "recorded-repeats and recorded-lan).",
)
@click.option(
    "--half-width",
    "half_widths",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    multiple=True,
    help="The rule's half-width as a share of the median (repeatable; default: 0.02, 0.05, 0.10).",
)
@click.option("--min", "minimum", type=click.IntRange(1, 300), default=3, show_default=True)
@click.option("--max", "maximum", type=click.IntRange(2, 300), default=30, show_default=True)
@click.option(
    "--min-loads",
    type=click.IntRange(2),
    default=10,
    show_default=True,
    help="A recorded cell with fewer loads joins only the pooled population.",
)
@click.option("--trials", type=click.IntRange(1), default=2000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def sequential_coverage(
    dirs: tuple[Path, ...], half_widths: tuple[float, ...], **given: Any
) -> None:
    """How often the interval of sequential repetitions, at the load where the rule
    stopped, holds the median: simulated by resampling real recorded loads (prints
    figures, beside the naive fixed-sample interval looked at after every load)."""
    from clarke.run.bench.coverage import figures, render  # scipy, numpy: slow to import
    from clarke.sequential import StoppingRule, first_bounded

    first = first_bounded(0.95, given["maximum"])
    if first is None or given["minimum"] > given["maximum"]:
        raise click.BadParameter(
            f"no 95 % interval holds under optional stopping within {given['maximum']} loads",
            param_hint="--max",
        )
    recorded = list(dirs or (Path("tests/data/recorded-repeats"), Path("tests/data/recorded-lan")))
    rules = [
        StoppingRule("plt_ms", h, given["minimum"], given["maximum"])
        for h in half_widths or (0.02, 0.05, 0.10)
    ]
    f = figures(recorded, rules, given["trials"], given["min_loads"])
    click.echo(json.dumps(f, indent=2) if given["as_json"] else render(f))
