"""How a run's cell is put in force on the testbed before its load: one hook per
dimension that the testbed itself applies, called in the dimensions' declared order
(the link profile first, the recorded site, whose server restart keeps the congestion
control in force, the PEP, which sizes its hop for the profile, then the server's stream
scheduler). The other dimensions (HTTP version, page, connections, browser) are the load
request's own; a site's DNS cache is put in force with its site.

A dimension declared elsewhere adds its hook here by name (clarke.campaign.dimensions
says what a value is; this table says what a testbed does with it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from clarke.campaign.cross import CrossTraffic
from clarke.campaign.dimensions import (
    CC,
    CROSS_TRAFFIC,
    DNS_CACHE,
    PEP,
    PROFILE,
    SCHEDULER,
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
    def ensure_scheduler(self, scheduler: str) -> object: ...
    def ensure_site(self, site: str, cache: DnsCache = DnsCache.none) -> object: ...


Hook = Callable[[Testbed, Cell], object]

HOOKS: dict[str, Hook] = {
    PROFILE.name: lambda testbed, cell: testbed.ensure_profile(cell[PROFILE]),
    CC.name: lambda testbed, cell: testbed.ensure_cc(cell[CC]),
    # The site's names are answered, and cached at the terminal or not, as its cell says.
    SITE.name: lambda testbed, cell: testbed.ensure_site(cell[SITE], cell[DNS_CACHE]),
    # Web cross traffic fetches the cell's page.
    CROSS_TRAFFIC.name: lambda testbed, cell: testbed.ensure_cross(cell[CROSS_TRAFFIC], cell.page),
    # The PEP's satellite hop runs the cell's congestion control.
    PEP.name: lambda testbed, cell: testbed.ensure_pep(cell[PEP], cell[CC]),
    SCHEDULER.name: lambda testbed, cell: testbed.ensure_scheduler(cell[SCHEDULER]),
}


def put_in_force(testbed: Testbed, cell: Cell) -> None:
    """Every hook of the cell's dimensions, in their declared order; each applies only
    what is not in force already (the session's ensure_* are idempotent)."""
    for dimension, _ in cell.items():
        hook = HOOKS.get(dimension.name)
        if hook is not None:
            hook(testbed, cell)
