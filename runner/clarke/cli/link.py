"""`clarke link schedule …`: check link schedules and write schedule files (LEO from TLEs,
rain fade through DVB-S2 ACM, recorded traces); docs/schedules.md."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click
from pydantic import ValidationError

from clarke import profiles, schema
from clarke.cli.options import FiniteFloat, options_into
from clarke.errors import InputError, ValidationFailed
from clarke.schedules import End, Schedule, limits, rainfade, traces
from clarke.schedules import files as schedule_files
from clarke.schema import problems_of

if TYPE_CHECKING:
    from clarke.schedules import leo, starlink

T = TypeVar("T")
IN_FILE = click.Path(path_type=Path, dir_okay=False)
OUT_OPTION = click.option(
    "--out", type=click.Path(path_type=Path, dir_okay=False), required=True,
    help="The schedule file to write (e.g. profiles/schedules/NAME.yaml).",
)  # fmt: skip
ID_OPTION = click.option(
    "--id", "schedule_id", help="The schedule's id (default: from the profile)."
)


def _made(what: str, build: Callable[[], T]) -> T:
    """A generator's result; a schedule the inputs make invalid is an input error."""
    try:
        return build()
    except ValidationError as e:
        raise ValidationFailed(f"the schedule made from {what}", problems_of(e)) from None


def _write(out: Path, schedule: Schedule, header: list[str]) -> Schedule:
    written = schedule_files.write(out, schedule, header)
    click.echo(f"{out}: {len(written.steps)} steps, end {written.end.value}")
    return written


@click.group()
def link() -> None:
    """The emulated link: its schedules (links that change over time)."""


@link.group()
def schedule() -> None:
    """Link schedules: a profile's `schedule:` or profiles/schedules/NAME.yaml
    (docs/schedules.md). Every generator writes a file with a header saying how it was
    made; the same inputs write the same file."""


@schedule.command()
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print satlink's configuration (JSON).")
def validate(target: str, as_json: bool) -> None:
    """Check TARGET: a link profile (a shipped name or NAME.yaml, its schedule_file read
    in) or a schedule file (a YAML file with `steps:`); exit 2 naming the file, the step
    index and the field of every problem."""
    path = Path(target)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        data = schema.read_yaml(
            path, limits.max_file_bytes(), limits.HOW_TO_RAISE, limits.count_steps
        )
        if isinstance(data, dict) and "steps" in data:
            sched = schedule_files.read(path)
            click.echo(f"{path}: valid schedule, {len(sched.steps)} steps, end {sched.end.value}")
            if as_json:
                click.echo(json.dumps(sched.to_satlink(path.stem), indent=2))
            return
    profile = profiles.read(target)
    name = path.stem if path.suffix in (".yaml", ".yml") else target
    if profile.schedule is None:
        click.echo(f"{target}: valid link profile, no schedule")
    else:
        s = profile.schedule
        click.echo(f"{target}: valid link profile, schedule {s.id}: {len(s.steps)} steps")
    if as_json:
        click.echo(json.dumps(profile.to_satlink_config(name=name), indent=2))


@dataclass(frozen=True)
class LeoOptions:
    """What `clarke link schedule leo` was asked."""

    tle_file: Path
    terminal: str
    gateway: str | None
    start: str | None
    duration_s: float
    slot_s: float
    min_elevation_deg: float
    handover_outage_ms: float
    schedule_id: str | None
    out: Path


@schedule.command("leo")
@click.option(
    "--tle", "tle_file", type=IN_FILE, required=True, help="TLE file (2- or 3-line sets)."
)
@click.option("--terminal", required=True, help="The user terminal: LAT,LON[,ALT_M].")
@click.option("--gateway", help="The gateway: LAT,LON[,ALT_M] (default: beside the terminal).")
@click.option(
    "--start", help="Window start, UTC, ISO 8601 (default: the newest TLE epoch, to the minute)."
)
@click.option("--duration-s", type=FiniteFloat(min=1), default=600.0, show_default=True)
@click.option("--slot-s", type=FiniteFloat(min=0.1), default=15.0, show_default=True)
@click.option("--min-elevation-deg", type=FiniteFloat(0, 90), default=25.0, show_default=True)
@click.option(
    "--handover-outage-ms", type=FiniteFloat(min=0), default=0.0, show_default=True,
    help="Cut the link this long when the serving satellite changes.",
)  # fmt: skip
@ID_OPTION
@OUT_OPTION
@options_into(LeoOptions)
def leo_command(o: LeoOptions) -> None:
    """A LEO link's delays and hand-overs from TLEs: the serving satellite per slot (the
    highest above --min-elevation-deg), one-way delays = slant range / c; loops over the
    window."""
    # Here, not at the top: every clarke command (and every role's agent, in images
    # built before sgp4 was a dependency) imports this module; only this one needs SGP4.
    from clarke.schedules import leo

    limits.check_count(
        math.ceil(o.duration_s / o.slot_s),
        f"--duration-s {o.duration_s:g} in slots of {o.slot_s:g} s",
        "slots",
    )  # fmt: skip
    tles = leo.read_tles(o.tle_file)
    opts = leo.Options(
        terminal=leo.Site.parse(o.terminal, "--terminal"),
        gateway=leo.Site.parse(o.gateway, "--gateway") if o.gateway else None,
        start=_start(o.start, tles),
        duration_s=o.duration_s,
        slot_s=o.slot_s,
        min_elevation_deg=o.min_elevation_deg,
        handover_outage_ms=o.handover_outage_ms,
    )
    slots = leo.plan_slots(tles, opts)
    sched = _made(f"{o.tle_file}", lambda: leo.schedule(slots, opts, o.schedule_id))
    served = [s for s in slots if s.satellite]
    delays = [d for s in served for d in leo.delays_ms(s)]
    epochs = sorted(t.epoch for t in tles)
    summary = (
        f"{sum(leo.handovers(slots))} changes of serving satellite in {len(slots)} slots, "
        f"{len(slots) - len(served)} slots without a satellite"
        + (f"; one-way hop delay {min(delays):.3f}-{max(delays):.3f} ms" if delays else "")
    )
    header = [
        "LEO link schedule: clarke link schedule leo",
        f"  --tle {o.tle_file} (sha256 {schedule_files.file_digest(o.tle_file)}, {len(tles)} sets,",
        f"    epochs {_iso(epochs[0])} to {_iso(epochs[-1])})",
        f"  --terminal {opts.terminal} --gateway {opts.gateway or '(beside the terminal)'}",
        f"  --start {_iso(opts.start)} --duration-s {o.duration_s:g} --slot-s {o.slot_s:g}",
        f"  --min-elevation-deg {o.min_elevation_deg:g}"
        f" --handover-outage-ms {o.handover_outage_ms:g}",
        f"Result: {summary}.",
        "Per slot: the serving satellite is the highest above the minimum elevation at the",
        "slot's start; forward uplink/downlink = gateway/terminal slant range / c, return the",
        "other way round; held for the slot. Serving satellites in order:",
        *_wrap(_runs([s.satellite or "(none)" for s in slots])),
    ]
    _write(o.out, sched, header)
    click.echo(summary)


def _start(text: str | None, tles: list[leo.Tle]) -> datetime:
    if text is None:
        newest = max(t.epoch for t in tles)
        return newest.replace(second=0, microsecond=0)
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"--start {text!r} is not an ISO 8601 time (e.g. 2023-07-18T12:00:00Z)"
        ) from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _runs(names: list[str]) -> list[str]:
    """NAME x COUNT for each run of one name."""
    out: list[tuple[str, int]] = []
    for n in names:
        if out and out[-1][0] == n:
            out[-1] = (n, out[-1][1] + 1)
        else:
            out.append((n, 1))
    return [f"{n} x{c}" for n, c in out]


def _wrap(items: list[str], width: int = 84) -> list[str]:
    lines, line = [], ""
    for item in items:
        if line and len(line) + len(item) + 2 > width:
            lines.append(line + ",")
            line = ""
        line = f"{line}, {item}" if line else f"  {item}"
    return [*lines, line] if line else lines


@schedule.command("starlink")
@click.option(
    "--params", "params_file", type=IN_FILE, required=True,
    help="The parameter file: every parameter with its source "
    "(profiles/schedules/leo-starlink-measured.params.yaml).",
)  # fmt: skip
@click.option("--seed", type=click.IntRange(min=0), help="Override the file's seed.")
@ID_OPTION
@OUT_OPTION
def starlink_command(
    params_file: Path, seed: int | None, schedule_id: str | None, out: Path
) -> None:
    """Starlink as measured: per 15 s slot from second 12 of every UTC minute, the SGP4
    geometry plus a delay drawn from a distribution fitted to published RTTs, rates drawn
    around the published medians, and at every boundary a reconfiguration event (delay
    spike, loss burst, optional outage); background loss; per-packet jitter goes in the
    profile. Seeded: the same parameters write the same file (docs/schedules.md)."""
    from clarke.schedules import starlink  # numpy, scipy and SGP4: slow to import

    params = starlink.read_params(params_file)
    if seed is not None:
        params = params.model_copy(update={"seed": seed})
    geo_slots, tles = starlink.geometry(params, params_file.parent)
    f = starlink.fitted(params, geo_slots)
    slots = starlink.draw_slots(params, geo_slots, f)
    sched = _made(f"{params_file}", lambda: starlink.schedule(params, slots, f, schedule_id))
    figures = starlink.summary(slots, f)
    tle = params_file.parent / params.geometry.tle
    epochs = sorted(t.epoch for t in tles)
    header = [
        "Starlink as measured: clarke link schedule starlink",
        f"  --params {params_file} (sha256 {schedule_files.file_digest(params_file)})"
        + (f" --seed {seed}" if seed is not None else ""),
        f"  TLEs {tle} (sha256 {schedule_files.file_digest(tle)}, {len(tles)} sets, epochs "
        f"{_iso(epochs[0])} to {_iso(epochs[-1])})",
        "Parameters and their sources:",
        *_wrap_lines(_parameter_lines(params), width=86),
        "Fitted (clarke.schedules.starlink_fit):",
        f"  jitter: exponential, mean {f.jitter_mean_ms:g} ms per direction (= successive "
        f"difference {params.jitter.successive_diff_ms:g} / 1.5); set in the profile",
        f"  RTT floor per slot = geometry + {f.ground_ms:g} ms + excess, excess ~ normal("
        f"{f.excess_mu_ms:g}, {f.excess_sigma_ms:g}) ms truncated at 0;",
        "    with the jitter, RTT quartiles "
        + "/".join(f"{q:.1f}" for q in f.quartiles_ms)
        + " ms (least squares to the published ones)",
        f"  background loss {100 * f.background_loss:.4f} % per direction outside events; "
        f"rate sigma {f.rate_sigma:g} (lognormal; the return's",
        "    spread is taken to be the forward's: no published spread of upload rates was read)",
        f"Result: {len(slots)} slots, {starlink.handovers(slots)} changes of serving satellite;"
        f" RTT floor {figures['floor_min_ms']:.1f} / {figures['floor_median_ms']:.1f} / "
        f"{figures['floor_max_ms']:.1f} ms (min / median / max),",
        f"  floor step between slots median {figures['step_median_ms']:.1f} ms, max "
        f"{figures['step_max_ms']:.1f}; forward {figures['forward_min_mbps']:.1f} / "
        f"{figures['forward_median_mbps']:.1f} / {figures['forward_max_mbps']:.1f} Mb/s, "
        f"return median {figures['return_median_mbps']:.1f}.",
        "The slots take each fitted distribution's quantiles at (k + 0.5) / n in a seeded order",
        "(each minute one from each quarter); link time = Unix time mod the loop (clock: utc).",
    ]
    _write(out, sched, header)
    click.echo(header[-4].strip())


def _parameter_lines(params: starlink.Params) -> list[tuple[str, str]]:
    out = [(f"seed = {params.seed}", "the draws' seed: another picks another realisation")]
    for group in ("slots", "geometry", "rtt", "jitter", "event", "loss", "rates"):
        g = getattr(params, group)
        for name, source in g.sources.items():
            value = getattr(g, name)
            shown = _iso(value) if isinstance(value, datetime) else str(value)
            out.append((f"{group}.{name} = {shown}", source))
    return out


def _wrap_lines(items: list[tuple[str, str]], width: int) -> list[str]:
    import textwrap

    lines = []
    for what, source in items:
        text = f"{what}: {source}" if source else what
        lines += textwrap.wrap(text, width, initial_indent="  ", subsequent_indent="      ")
    return lines


@dataclass(frozen=True)
class RainFadeOptions:
    """What `clarke link schedule rain-fade` was asked."""

    csv_file: Path | None
    depth_db: float | None
    duration_s: float | None
    fade_start_s: float
    shape: str
    length_s: float | None
    step_s: float
    symbol_rate_mbaud: float
    clear_sky_esn0_db: float
    margin_db: float
    direction: str
    end: str
    slot_s: float | None
    schedule_id: str | None
    out: Path


@schedule.command("rain-fade")
@click.option("--csv", "csv_file", type=IN_FILE, help="Attenuation series: t_s,attenuation_db.")
@click.option(
    "--depth-db", type=FiniteFloat(min=0), help="A synthetic fade: its deepest attenuation (dB)."
)
@click.option(
    "--duration-s",
    type=FiniteFloat(min=0, min_open=True),
    help="A synthetic fade: how long it lasts.",
)
@click.option("--fade-start-s", type=FiniteFloat(min=0), default=60.0, show_default=True)
@click.option(
    "--shape",
    type=click.Choice([s.value for s in rainfade.Shape]),
    default=rainfade.Shape.raised_cosine.value,
    show_default=True,
)
@click.option(
    "--length-s", type=FiniteFloat(min=0, min_open=True),
    help="The schedule's length (default: the fade and 60 s after it; a CSV's last row "
    "held one interval).",
)  # fmt: skip
@click.option(
    "--step-s", type=FiniteFloat(min=0, min_open=True), default=1.0, show_default=True,
    help="Sampling of a fade.",
)  # fmt: skip
@click.option("--symbol-rate-mbaud", type=FiniteFloat(min=0.001), required=True)
@click.option(
    "--clear-sky-esn0-db", type=FiniteFloat(), required=True, help="Es/N0 without rain (dB)."
)
@click.option("--margin-db", type=FiniteFloat(min=0), default=0.0, show_default=True)
@click.option("--direction", type=click.Choice(["forward", "return"]), default="forward")
@click.option("--end", type=click.Choice([e.value for e in End]), default="loop", show_default=True)
@click.option(
    "--slot-s", type=FiniteFloat(min=0, min_open=True),
    help="The schedule's slot_s: a campaign's slot_phase places loads in it and the report "
    "draws PLT against it. With the loop's length, each load's phase is its place in the "
    "fade.",
)  # fmt: skip
@ID_OPTION
@OUT_OPTION
@options_into(RainFadeOptions)
def rain_fade(o: RainFadeOptions) -> None:
    """A rain fade as a rate per step: Es/N0 = clear sky - attenuation - margin, the most
    efficient DVB-S2 MODCOD (ETSI EN 302 307-1 Table 13) that works at it, rate = symbol
    rate x its spectral efficiency; below QPSK 1/4 an outage."""
    synthetic = o.depth_db is not None or o.duration_s is not None
    if (o.csv_file is None) == (not synthetic) or (
        synthetic and None in (o.depth_db, o.duration_s)
    ):
        raise InputError("give either --csv FILE or a fade's --depth-db and --duration-s")
    link_ = rainfade.Link(o.symbol_rate_mbaud * 1e6, o.clear_sky_esn0_db, o.margin_db)
    if o.csv_file is not None:
        series = rainfade.read_series(o.csv_file)
        times = [t for t, _ in series]
        length = o.length_s or traces.default_length_s(times)
        source = [f"  --csv {o.csv_file} (sha256 {schedule_files.file_digest(o.csv_file)})"]
    else:
        assert o.depth_db is not None and o.duration_s is not None
        fade = rainfade.Fade(o.depth_db, o.duration_s, o.fade_start_s, rainfade.Shape(o.shape))
        length = o.length_s or o.fade_start_s + o.duration_s + 60
        series = rainfade.synthetic(fade, length, o.step_s)
        source = [
            f"  --depth-db {o.depth_db:g} --duration-s {o.duration_s:g} --fade-start-s "
            f"{o.fade_start_s:g} --shape {o.shape} --step-s {o.step_s:g} --length-s {length:g}"
        ]
    sched = _made(
        "the attenuation series",
        lambda: rainfade.schedule(
            series, link_, o.direction, End(o.end), length, o.schedule_id, o.slot_s
        ),
    )
    header = [
        "Rain fade through DVB-S2 ACM: clarke link schedule rain-fade",
        *source,
        f"  --symbol-rate-mbaud {o.symbol_rate_mbaud:g} --clear-sky-esn0-db "
        f"{o.clear_sky_esn0_db:g} --margin-db {o.margin_db:g} --direction {o.direction}"
        f" --end {o.end}" + (f" --slot-s {o.slot_s:g}" if o.slot_s else ""),
        "Es/N0 = clear sky - attenuation - margin -> the most efficient MODCOD of ETSI EN",
        "302 307-1 V1.4.1 Table 13 (ideal Es/N0, normal FECFRAME) -> rate = symbol rate x",
        "spectral efficiency; below QPSK 1/4: outage.",
        "MODCODs in order: " + ", ".join(rainfade.modcods_used(series, link_)),
    ]
    _write(o.out, sched, header)


@dataclass(frozen=True)
class ImportOptions:
    """What `clarke link schedule import` was asked."""

    fmt: str
    forward_file: Path | None
    return_file: Path | None
    interval_s: float
    end: str
    length_s: float | None
    schedule_id: str | None
    out: Path


@schedule.command("import")
@click.option(
    "--format", "fmt", type=click.Choice(["mahimahi", "csv"]), required=True,
    help="mahimahi: delivery-opportunity traces; csv: t_s and any of rate_mbps, delay_ms, loss.",
)  # fmt: skip
@click.option("--forward", "forward_file", type=IN_FILE, help="The forward direction's trace.")
@click.option("--return", "return_file", type=IN_FILE, help="The return direction's trace.")
@click.option(
    "--interval-s", type=FiniteFloat(min=0.001), default=1.0, show_default=True,
    help="mahimahi: the interval a rate is averaged over.",
)  # fmt: skip
@click.option("--end", type=click.Choice([e.value for e in End]), default="loop", show_default=True)
@click.option(
    "--length-s",
    type=FiniteFloat(min=0, min_open=True),
    help="csv: the loop's length (default: the last row held one interval).",
)
@ID_OPTION
@OUT_OPTION
@options_into(ImportOptions)
def import_command(o: ImportOptions) -> None:
    """Recorded traces as schedule steps: mahimahi traces -> a rate per interval (an
    interval without an opportunity: outage), CSV series -> a step per row."""
    files = {d: f for d, f in (("forward", o.forward_file), ("return", o.return_file)) if f}
    if not files:
        raise InputError("give --forward FILE, --return FILE or both")
    series: dict[str, list[tuple[float, traces.State]]] = {}
    lengths: dict[str, float] = {}
    for d, f in files.items():
        if o.fmt == "mahimahi":
            stamps = traces.read_mahimahi(f)
            series[d] = traces.rate_states(
                traces.mahimahi_rates(stamps, round(o.interval_s * 1000))
            )
            lengths[d] = stamps[-1] / 1000
        else:
            series[d] = traces.read_series(f)
            lengths[d] = traces.default_length_s([t for t, _ in series[d]])
    if o.fmt == "mahimahi" and len(set(lengths.values())) > 1:
        raise InputError(
            "the traces' periods differ ("
            + ", ".join(f"{d} {v:g} s" for d, v in lengths.items())
            + "): a schedule has one loop length"
        )
    length = o.length_s if o.length_s is not None and o.fmt == "csv" else max(lengths.values())
    sched = _made("the traces", lambda: traces.schedule(series, End(o.end), length, o.schedule_id))
    rates = [
        float(r)
        for v in series.values()
        for _, state in v
        if isinstance(r := state.get("rate_mbps", 0.0), int | float)
    ]
    header = [
        f"Imported {o.fmt} traces: clarke link schedule import --format {o.fmt}",
        *(f"  --{d} {f} (sha256 {schedule_files.file_digest(f)})" for d, f in files.items()),
        f"  --interval-s {o.interval_s:g} --end {o.end} --length-s {length:g}",
    ]
    if o.fmt == "mahimahi":
        header.append(
            f"Rate per interval = opportunities x 1500 x 8 bit / interval; mean "
            f"{statistics.fmean(rates):.3f} Mb/s; an interval without one is an outage."
        )
    _write(o.out, sched, header)
