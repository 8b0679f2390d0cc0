"""One load outside a campaign, as `clarke load` and `clarke bench load` ask for it: a
cell made of a value for every declared dimension (the one given, else the dimension's
default, as a campaign's matrix makes its cells), checked against the implementations'
capability data as a campaign's cells are, put in force by the campaign's own code
(run/loop/apply.py) and loaded by the session as a campaign's run is."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clarke import registry
from clarke.browser.load import CHROMIUM_CONNECTIONS, LoadResult
from clarke.campaign import dimensions
from clarke.campaign.dimensions import BROWSER, SITE, SITE_NONE, Cell
from clarke.campaign.sites import PlannedSite, planned
from clarke.errors import InputError, ValidationFailed
from clarke.json_value import JsonObject
from clarke.results.details import LoadDetails
from clarke.roles import Implementation
from clarke.run.loop.apply import Testbed, put_in_force
from clarke.run.session.session import Session
from clarke.run.session.settings import PageLoad
from clarke.sites import archive
from clarke.vocab import Browser, HttpVersion


class LoadBrowserSettings:
    """The defaults a campaign's browser block gives, for one load: the connections
    per server of its HTTP version (Chromium's own six, which it has no setting for)."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser

    def connections_for(self, http: str) -> int:
        if self.browser is Browser.chromium:
            return CHROMIUM_CONNECTIONS
        return HttpVersion(http).default_connections


def option_name(d: dimensions.Dimension[Any]) -> str:
    return f"--{d.name.replace('_', '-')}"


def cell_of(given: Mapping[str, object]) -> Cell:
    """The cell of the values `given` (by dimension name, each parsed by its dimension),
    every other dimension at its default in their declared order; InputError naming
    the option of a value given where its dimension does not apply (a recorded site's
    load has no page model)."""
    browser = given.get(BROWSER.name, BROWSER.default_for({}, LoadBrowserSettings(Browser.firefox)))
    settings = LoadBrowserSettings(Browser(str(browser)))
    coords: JsonObject = {}
    for d in dimensions.seal():
        applies = d.applies is None or d.applies(coords)
        if d.name in given and given[d.name] is not None:
            if not applies:
                raise InputError(f"{option_name(d)}: does not apply to this load ({d.help})")
            coords[d.name] = given[d.name]
        elif d.required:
            raise InputError(f"{option_name(d)} is required")
        else:
            coords[d.name] = d.default_for(coords, settings)
    return Cell(coords)


def check(cell: Cell, implementations: Iterable[Implementation]) -> None:
    """What the implementations take of the cell (registry.check_supported)."""
    registry.check_supported([cell], implementations, "the load's options")


def site_of(cell: Cell) -> dict[str, PlannedSite]:
    """The recorded site the cell loads, read and checked (as a campaign's are), by the
    path given on the command line: the user's own choice of file."""
    given = cell[SITE]
    if given == SITE_NONE:
        return {}
    path = Path(given).resolve()
    try:
        site = archive.read(path)
    except ValidationFailed as e:
        raise ValidationFailed(f"{option_name(SITE)} {given}", e.problems) from None
    return {given: planned(given, path, site)}


@dataclass(frozen=True)
class OneLoad:
    """A load of `cell` outside a campaign: its capture's label, Firefox preference
    overrides, and what the next load will ask of its browser (PageLoad)."""

    cell: Cell
    label: str = "load"
    prefs: Mapping[str, bool | int] = field(default_factory=dict)


def load_once(
    session: Session, one: OneLoad, next_load: OneLoad | None = None
) -> tuple[LoadResult, LoadDetails]:
    """`one` put in force (as a campaign's run is) and loaded; `next_load`, where given,
    is announced so that its browser may start ahead."""
    testbed: Testbed = session
    put_in_force(testbed, one.cell)
    ahead = None
    if next_load is not None:
        ahead = session.request(PageLoad.of_cell(next_load.cell, "next", prefs=next_load.prefs))
    return session.load_page(
        PageLoad.of_cell(one.cell, one.label, prefs=one.prefs, next_load=ahead)
    )
