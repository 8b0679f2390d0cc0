"""`clarke load`: one verified page load over an emulated link."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from clarke import pep_presets, profiles, registry
from clarke.browser.client import Firefox
from clarke.browser.load import CHROMIUM_CONNECTIONS, LoadResult
from clarke.browser.prefs import check_override
from clarke.campaign.dimensions import (
    BROWSER,
    CC,
    CONNECTIONS,
    HTTP,
    MODEL,
    PEP,
    PROFILE,
    SITE,
    SIZE,
    Cell,
)
from clarke.cli.dimensions import OptionSpec, every_dimension
from clarke.cli.options import capture_max_mb_option, implementation_option, options_into
from clarke.errors import InputError
from clarke.json_value import JsonObject
from clarke.pages.models import Registry
from clarke.results.details import CaptureKept, LoadDetails
from clarke.results.record import Status
from clarke.roles import Implementation
from clarke.run import single
from clarke.run.session.captures import (
    CaptureMode,
    CapturePolicy,
    check_substrate,
    prepare_dir,
)
from clarke.run.session.session import Session
from clarke.run.session.settings import SessionSettings
from clarke.testbed.substrate import NetnsSubstrate
from clarke.vocab import ENGINES, PEP_NONE, Browser, CongestionControl, Engine, HttpVersion


def _page_help() -> str:
    try:
        models = ", ".join(Registry.default().names())
    except FileNotFoundError:
        models = "see pages/"
    return f"<model>-<size>, as built by `clarke pages build`; models: {models}."


def _what_chromium_honours(connections: int | None, prefs: tuple[str, ...]) -> None:
    if connections is not None and connections != CHROMIUM_CONNECTIONS:
        raise click.BadParameter(
            f"{connections}: Chromium opens {CHROMIUM_CONNECTIONS} connections per server "
            "and has no setting for it",
            param_hint="--connections",
        )
    if prefs:
        raise click.BadParameter("Firefox preferences; Chromium takes none", param_hint="--pref")


def parse_prefs(items: tuple[str, ...]) -> dict[str, bool | int]:
    out: dict[str, bool | int] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--pref")
        value: bool | int | str = raw
        if raw in ("true", "false"):
            value = raw == "true"
        elif raw.lstrip("-").isdigit():
            value = int(raw)
        try:
            out[name] = check_override(name, value)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--pref") from None
    return out


@dataclass(frozen=True)
class LoadOptions:
    """What `clarke load` was asked: a value for each dimension given
    (`dimension_values`), and how to load."""

    dimension_values: Mapping[str, Any]
    page: str | None
    engine: str
    firefox: str | None
    testbed_id: int | None
    prefs: tuple[str, ...]
    link: str | None
    server: str | None
    capture_dir: Path | None
    capture_max_mb: int
    as_json: bool


# Where `clarke load`'s option for a dimension says more than the declaration, or has a
# default of its own (a campaign has none: its matrix names them).
SPECS = {
    PROFILE.name: OptionSpec("geo", profiles.help_text(), parsed=False),
    HTTP.name: OptionSpec(HttpVersion.h2.value),
    CC.name: OptionSpec(CongestionControl.bbr.value),
    MODEL.name: OptionSpec(more_help="With --size; or both at once with --page"),
    CONNECTIONS.name: OptionSpec(
        more_help="Default: 1 for HTTP/1.1 as in the study, else 6; Chromium: 6, fixed"
    ),
    PEP.name: OptionSpec(more_help="Verified (docs/peps.md). " + pep_presets.help_text()),
    BROWSER.name: OptionSpec(more_help=registry.help_text("client")),
}
DEFAULT_PAGE = "uniform-1m"


def _given(o: LoadOptions) -> dict[str, Any]:
    """The dimensions' values given, --page taken apart into model and size (the
    generated page uniform-1m unless a page, a model, a size or a site is given)."""
    given = dict(o.dimension_values)
    names = (MODEL.name, SIZE.name, SITE.name)
    if o.page is not None and any(n in given for n in names):
        raise click.BadParameter(
            "give a page as --page MODEL-SIZE, or as --model and --size, or a --site",
            param_hint="--page",
        )
    page = o.page or (None if any(n in given for n in names) else DEFAULT_PAGE)
    if page is not None:
        model, sep, size = page.rpartition("-")
        if not sep:
            raise click.BadParameter(f"{page!r} is not MODEL-SIZE", param_hint="--page")
        given |= {MODEL.name: MODEL.parse(model), SIZE.name: SIZE.parse(size)}
    return given


def _implementations(o: LoadOptions) -> tuple[Implementation, Implementation]:
    """The link and server the load runs on: the testbed's, or the options'."""
    if o.testbed_id is None:
        return registry.get("link", o.link), registry.get("server", o.server)
    state = NetnsSubstrate().store.read(o.testbed_id)
    if state is None:
        raise InputError(
            f"there is no testbed {o.testbed_id} (clarke testbed status; bring one up with "
            f"clarke testbed up --id {o.testbed_id})"
        )
    return registry.get("link", state.link), registry.get("server", state.server)


@click.command()
@every_dimension(SPECS)
@click.option(
    "--page",
    help=_page_help() + f" Default: {DEFAULT_PAGE} unless --model, --size or --site is given.",
)
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default=Engine.selenium.value,
    show_default=True,
)
@click.option("--firefox", help="Firefox binary: firefox-nightly, firefox, firefox-esr or a path.")
@click.option(
    "--testbed",
    "testbed_id",
    type=int,
    help="Use this running testbed (`clarke testbed up`) instead of a new one.",
)
@click.option(
    "--pref",
    "prefs",
    multiple=True,
    metavar="NAME=VALUE",
    help="Override a Firefox preference (network.http.* or network.tcp.*; true, false or an "
    "integer), applied last. Repeatable.",
)
@implementation_option("link", default_said="default satlink; with --testbed: the testbed's")
@implementation_option("server", default_said="default origin; with --testbed: the testbed's")
@click.option(
    "--capture",
    "capture_dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Keep a capture of the load in this directory (made 0700 if missing; must be "
    "empty): the satellite hop's packets (link.pcap), the browser's TLS key log (keys.log) "
    "and, for HTTP/3, qlog files, each 0600. docs/captures.md says how to open them.",
)
@capture_max_mb_option("The most MB of pcap, and of key log and qlog files together.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@options_into(LoadOptions)
def load(o: LoadOptions) -> None:
    """Load one page once in a browser over an emulated link, verify it (protocol of every
    resource, the server's congestion control, the LCP element) and print the metrics.

    Every dimension of a campaign's matrix is an option (its default: a campaign's);
    the load is put in force and verified as a campaign's run is. Without --testbed it
    brings a testbed up for the load and tears it down after; with it, the testbed must
    exist, and the load runs on --profile (applied if the link runs another one)."""
    cell = single.cell_of(_given(o))
    _check(o, cell)  # everything that can be wrong is found before anything starts
    browser = cell[BROWSER]
    sites = single.site_of(cell)
    overrides = parse_prefs(o.prefs)
    capture = None
    if o.capture_dir is not None:
        check_substrate(CaptureMode.all, "netns")
        prepare_dir(o.capture_dir)
        capture = CapturePolicy(
            CaptureMode.all, o.capture_dir, o.capture_max_mb * 1_000_000, flat=True
        )
    started = time.monotonic()
    substrate = NetnsSubstrate(o.testbed_id, o.link, o.server, firefox=o.firefox)
    settings = SessionSettings(
        engine=o.engine, firefox=o.firefox, capture=capture, browser=browser, sites=sites
    )
    session = Session(substrate, [] if cell.site else [cell.page], settings)
    with session.start(cell.link) as s:
        result, details = single.load_once(s, single.OneLoad(cell, prefs=overrides))
        implementations, applied = s.implementations, [a.to_dict() for a in s.applied]
    wall_ms = (time.monotonic() - started) * 1000
    out = _written(cell, result, details, implementations, applied, wall_ms)
    if o.as_json:
        click.echo(json.dumps(out, indent=2))
    else:
        _print(cell, o.engine, result, details, capture)
    if result.status is not Status.ok:
        raise SystemExit(1)


def _check(o: LoadOptions, cell: Cell) -> None:
    """What the load needs, checked before anything starts: the page, the profile on the
    link, every implementation's support for the cell, the browser and the PEP."""
    if cell.site is None:
        Registry.default().page_by_name(cell.page)
    link_impl, server_impl = _implementations(o)
    link_impl.check_profile(profiles.read(cell.link), f"link profile {cell.link!r}")
    single.check(cell, [link_impl, server_impl])
    browser = cell[BROWSER]
    if browser is Browser.firefox:
        Firefox(o.firefox).check_environment()
    else:
        registry.get("client", browser).check_environment()
        _what_chromium_honours(o.dimension_values.get(CONNECTIONS.name), o.prefs)
    if cell[PEP] != PEP_NONE:
        registry.get("pep", pep_presets.read(cell[PEP]).implementation).check_environment()


def _written(
    cell: Cell,
    result: LoadResult,
    details: LoadDetails,
    implementations: dict[str, str],
    applied: list[JsonObject],
    wall_ms: float,
) -> JsonObject:
    """The load as --json writes it."""
    m = {**result.metrics, **details.counted_metrics()}
    # Whether the server was asked what it saw (a load refused before it was not).
    verified = details.has("server_connections")
    return {
        "status": result.status.value,
        "reason": result.reason,
        "engine": result.engine,
        "browser": result.browser,
        "browser_version": result.browser_version,
        "profile": cell[PROFILE],
        "profile_sha256": details.link.profile_sha256 if details.link else None,
        "link": implementations.get("link"),
        "server": implementations.get("server"),
        "applied": applied,
        "http": cell[HTTP].value,
        "cc": cell[CC].value,
        "page": cell.page,
        "connections": cell[CONNECTIONS],
        "cell": cell.texts(),
        "pep": details.pep.written() if details.pep else None,
        "plt_ms": m.get("plt_ms"),
        "fcp_ms": m.get("fcp_ms"),
        "lcp_ms": m.get("lcp_ms"),
        "ttfb_ms": m.get("ttfb_ms"),
        "metrics": m,
        "protocols": result.protocols,
        "lcp_element": result.lcp_element,
        "server_cc": details.server_cc if verified else None,
        "client_quic_cc": _client_quic_cc(result),
        "server_connections": [c.written() for c in details.server_connections]
        if verified
        else None,
        "per_connection": [r.written() for r in details.per_connection] if verified else None,
        "capture": details.capture.written() if details.capture else None,
        "load_wall_ms": result.wall_ms,
        "command_wall_ms": wall_ms,
    }


def _client_quic_cc(result: LoadResult) -> list[str]:
    # Chromium's QUIC stack chooses its own congestion control for what it sends.
    netlog = result.raw.get("netlog")
    found = netlog.get("quic_cc", []) if isinstance(netlog, dict) else []
    return [str(c) for c in found] if isinstance(found, list) else []


def _print(
    cell: Cell,
    engine: str,
    result: LoadResult,
    details: LoadDetails,
    capture: CapturePolicy | None,
) -> None:
    """The load as a person reads it."""
    m = {**result.metrics, **details.counted_metrics()}
    protos = ", ".join(sorted(set(result.protocols.values()))) or "-"
    click.echo(f"{result.status.value}{': ' + result.reason if result.reason else ''}")
    click.echo(
        f"  {cell.page} over {cell.link}, HTTP/{cell[HTTP].value}, {cell[CC].value}, "
        f"{cell[CONNECTIONS]} connection(s), {engine}, "
        f"{result.browser.capitalize()} {result.browser_version}"
        + (f", PEP {cell[PEP]}" if cell[PEP] != PEP_NONE else "")
    )
    for key in ("plt_ms", "fcp_ms", "lcp_ms", "ttfb_ms"):
        v = m.get(key)
        click.echo(f"  {key[:-3].upper():>4}: {'-' if v is None else f'{v:,.1f} ms'}")
    click.echo(
        f"  protocols: {protos}; server cc: {', '.join(details.server_cc or ['-'])}; "
        f"LCP element: {result.lcp_element}"
    )
    if quic_cc := _client_quic_cc(result):
        click.echo(f"  the browser's own QUIC cc: {', '.join(quic_cc)}")
    stations = (details.pep.stations if details.pep else None) or {}
    if cell[PEP] != PEP_NONE and stations:
        counts = ", ".join(
            f"{role} {s.accepted if s.has('accepted') else '-'} intercepted, "
            f"{s.relayed if s.has('relayed') else '-'} relayed"
            for role, s in stations.items()
        )
        click.echo(f"  PEP {cell[PEP]}: {counts}")
    if "pep_hops_pre_opened" in m:
        window = m.get("pep_hop_first_window_bytes")
        click.echo(
            f"  hop connections: {m['pep_hops_pre_opened']:.0f} pre-opened taken, "
            f"{m['pep_hops_opened_on_demand']:.0f} opened for a client; first window "
            + (
                "-"
                if window is None
                else f"{window:,.0f} bytes ({m['pep_hop_first_cwnd']:.0f} segments)"
            )
        )
    if "overhead" in m:
        click.echo(f"  wire bytes: {m['wire_bytes']:,.0f}, overhead {100 * m['overhead']:.1f} %")
    kept = details.capture or CaptureKept()
    if kept.dir and capture is not None:
        files = ", ".join(f"{n} ({b:,} B)" for n, b in kept.files.items())
        click.echo(f"  capture in {capture.root}: {files}")
        for problem in kept.problems + kept.left_out:
            click.echo(f"  capture: {problem}")
