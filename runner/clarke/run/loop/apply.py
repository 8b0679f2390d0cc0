"""How a run's cell is put in force on the testbed before its load: one hook per
dimension that needs a step of the runner's own, called in the dimensions' declared
order (the link profile first, the recorded site, whose server restart keeps the
congestion control in force, the PEP, which sizes its hop for the profile), then every
dimension the server puts in force through a field of its POST /config (its
declaration's `setting`, the stream scheduler among them) in one request. The other
dimensions (HTTP version, page, connections, browser) are the load request's own; a
site's DNS cache is put in force with its site.

A server setting needs nothing here: its declaration says the field it fills. A
dimension with a step of its own adds its hook by name (clarke.campaign.dimensions says
what a value is; this table what a testbed does with it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from clarke.campaign.cross import CrossTraffic
from clarke.campaign.dimensions import (
    CC,
    CROSS_TRAFFIC,
    DNS_CACHE,
    PEP,
    PROFILE,
    SITE,
    Cell,
)
from clarke.vocab import DnsCache


class Testbed(Protocol):
    """What the hooks change (run.session.Session; a fake one in tests)."""

    def ensure_profile(self, name: str) -> object: ...
    def ensure_cc(self, cc: str) -> object: ...
    def ensure_cross(self, spec: CrossTraffic, page: str = "") -> None: ...
    def ensure_pep(self, name: str, cc: str) -> object: ...
    def ensure_site(self, site: str, cache: DnsCache = DnsCache.none) -> object: ...
    def ensure_server(self, settings: Mapping[str, object]) -> object: ...


Hook = Callable[[Testbed, Cell], object]

HOOKS: dict[str, Hook] = {
    PROFILE.name: lambda testbed, cell: testbed.ensure_profile(cell.link),
    CC.name: lambda testbed, cell: testbed.ensure_cc(cell[CC]),
    # The site's names are answered, and cached at the terminal or not, as its cell says.
    SITE.name: lambda testbed, cell: testbed.ensure_site(cell[SITE], cell[DNS_CACHE]),
    # Web cross traffic fetches the cell's page.
    CROSS_TRAFFIC.name: lambda testbed, cell: testbed.ensure_cross(cell[CROSS_TRAFFIC], cell.page),
    # The PEP's satellite hop runs the cell's congestion control.
    PEP.name: lambda testbed, cell: testbed.ensure_pep(cell[PEP], cell[CC]),
}


def server_settings(cell: Cell) -> dict[str, object]:
    """The fields of the server's POST /config that the cell's dimensions fill."""
    return {d.setting.field: d.setting.value(v) for d, v in cell.items() if d.setting is not None}


def put_in_force(testbed: Testbed, cell: Cell) -> None:
    """Every hook of the cell's dimensions, in their declared order, then the server's
    settings; each applies only what is not in force already (the session's ensure_*
    are idempotent)."""
    for dimension, _ in cell.items():
        hook = HOOKS.get(dimension.name)
        if hook is not None:
            hook(testbed, cell)
    settings = server_settings(cell)
    if settings:
        testbed.ensure_server(settings)
