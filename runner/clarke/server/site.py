"""A recorded site on the server role (docs/sites.md, "Replay in a testbed").

The runner puts a site archive where the pages go, under `sites/<name>/` of the pages
directory (the one directory runner and server share on both substrates; page
directories are `<model>-<size>`, never `sites`), and asks the server for it by that
name: `POST /config {"site": NAME}` (null: no site). The server role then

- places the archive's origins on the server side's LAN (clarke.sites.placement): the
  addresses go onto the server's interface on that LAN, which the gateway reaches
  directly and the client routes into the link as a whole prefix;
- issues each host's certificate from the testbed CA, which the client trusts already
  (clarke.tls.issue_host_certificates);
- serves the site on those addresses, port 443 (origin: `--site`; another server says
  it cannot).

The placement is also the zone of names the resolver on the gateway side answers."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

from clarke import sh, tls
from clarke.contract import SITE_NAME as SITE_NAME_PATTERN
from clarke.errors import ClarkeError, InputError
from clarke.place import Place, netns
from clarke.place.plan import HTTPS_PORT
from clarke.sites import archive
from clarke.sites.archive_files import MIB, Limits
from clarke.sites.placement import Placement
from clarke.sites.placement import place as place_origins

SITES = "sites"  # under the pages directory
SITE_KEY = "site"
# A directory name under sites/: what a request may name (no path, no dot-dot).
SITE_NAME = re.compile(SITE_NAME_PATTERN)
LAN = "gw-lan"


def sites_dir(place: Place) -> Path:
    return place.pages_dir / SITES


def check_name(value: object) -> str | None:
    """The site a configure body names (None: no site); InputError otherwise."""
    if value is None:
        return None
    if not isinstance(value, str) or not SITE_NAME.fullmatch(value) or ".." in value:
        raise InputError(
            f"site must be the name of a directory under the pages directory's {SITES}/ "
            f"({SITE_NAME.pattern}) or null, not {value!r}"
        )
    return value


@dataclass(frozen=True)
class PlacedSite:
    """A site ready to serve: its archive, where its origins are, their certificates."""

    name: str
    directory: Path
    placement: Placement
    certs_dir: Path
    limits: Limits  # what the archive was read within, and the server reads it within

    def limit_options(self) -> list[str]:
        """origin's options for the same limits."""
        return [
            "--site-max-body-mb", str(self.limits.body_bytes // MIB),
            "--site-max-mb", str(self.limits.site_bytes // MIB),
        ]  # fmt: skip

    def listen(self) -> list[str]:
        return [f"{address}:{HTTPS_PORT}" for address in self.placement.distinct]

    def zone(self) -> dict[str, object]:
        """The names a resolver answers for this site (clarke.sites.zone.Zone)."""
        return {"names": self.placement.zone_names()}


def prepare(place: Place, name: str) -> PlacedSite:
    """Read and check the archive `name`, place its origins on the server's LAN and
    issue their certificates (into the role's run directory). ValidationFailed (exit 2)
    naming the entry for a broken archive; InputError for a missing one."""
    directory = sites_dir(place) / name
    if not (directory / archive.SITE_JSON).is_file():
        raise InputError(
            f"no site {name!r}: {directory} has no {archive.SITE_JSON} (the runner puts a "
            f"site archive under the pages directory's {SITES}/ before asking for it)"
        )
    site = archive.read(directory)
    lan = {n.name: n for n in place.plan.networks}[LAN].prefix
    placed = place_origins(site.archive, lan, str(directory))
    names: dict[str, list[str]] = {}
    for origin in site.archive.origins:
        names.setdefault(origin.host, [])
        names[origin.host] += [n for n in origin.certificate_names if n not in names[origin.host]]
    certs_dir = place.run_dir / "site-certs"
    pki = tls.ensure_testbed_pki(place.pki_dir, label=place.substrate)
    for old in certs_dir.glob("*") if certs_dir.is_dir() else []:
        old.unlink()
    tls.issue_host_certificates(pki, names, certs_dir)
    return PlacedSite(name, directory, placed, certs_dir, site.limits)


class Addresses:
    """The site's addresses on the server's interface to its LAN, added and removed by
    this role (on a netns testbed the role's agent runs in the server's namespace)."""

    def __init__(self, place: Place) -> None:
        self.place = place
        self.added: list[str] = []

    def add(self, addresses: list[str]) -> None:
        iface = self.place.iface(LAN)
        present = netns.addresses(self.place.ns)
        for address in addresses:
            if address in self.added:
                continue
            if present.get(address) == iface:  # left by an earlier agent of this role
                self.added.append(address)
                continue
            sh.run([*self.place.ip(), "addr", "add", f"{address}/32", "dev", iface])
            self.added.append(address)

    def remove(self) -> None:
        if not self.added:
            return
        iface = self.place.iface(LAN)
        for address in list(self.added):
            with contextlib.suppress(ClarkeError):
                sh.run([*self.place.ip(), "addr", "del", f"{address}/32", "dev", iface])
            self.added.remove(address)
