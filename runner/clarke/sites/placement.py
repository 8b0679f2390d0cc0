"""Where a recorded site's origins live on the server side of a testbed.

Each origin gets a testbed address of its own, except that origins which shared an
address when they were recorded share one here too: a browser may then coalesce their
connections (HTTP/2 and /3 reuse a connection for another host whose name the
certificate covers and whose address is the same) as it did on the real site. Origins
recorded without an address get one each.

Addresses come from the server-side LAN's prefix, above the host numbers the testbed
itself uses, in a stable order (the recorded address, then the host), so the same archive
gets the same addresses on every testbed of one plan. The result is also the zone a
resolver on the gateway side answers (clarke.sites.zone)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from clarke.errors import ValidationFailed
from clarke.sites.archive import SiteArchive

# Host numbers below this on the server-side LAN belong to the testbed (gateway .1,
# server .2, and room for more roles); origins take the ones from here up.
FIRST_ORIGIN_HOST = 64
# The last host number is the compose networks' bridge (docker-compose.yml's gateways):
# no origin takes it, on either substrate, so an archive places the same everywhere.
LAST_ORIGIN_HOST = 253


@dataclass(frozen=True)
class Placement:
    """Each host's testbed address, and the addresses in the order they were given."""

    addresses: dict[str, str]  # host -> address

    @property
    def distinct(self) -> list[str]:
        return sorted(set(self.addresses.values()), key=ipaddress.IPv4Address)

    def zone_names(self) -> dict[str, str]:
        """The names a resolver answers for this site (clarke.sites.zone.Zone.names)."""
        return dict(sorted(self.addresses.items()))


def place(archive: SiteArchive, lan: ipaddress.IPv4Network, source: str = "site") -> Placement:
    """The testbed addresses of `archive`'s origins on `lan` (the server side's LAN);
    ValidationFailed naming `source` when the LAN has too few addresses for them."""
    groups: dict[str, list[str]] = {}
    for origin in archive.origins:
        key = f"recorded {origin.address}" if origin.address else f"host {origin.host}"
        hosts = groups.setdefault(key, [])
        if origin.host not in hosts:
            hosts.append(origin.host)
    hosts_of_address = [groups[k] for k in sorted(groups)]
    free = list(lan.hosts())[FIRST_ORIGIN_HOST - 1 : LAST_ORIGIN_HOST]
    if len(hosts_of_address) > len(free):
        raise ValidationFailed(
            source,
            [
                f"its origins need {len(hosts_of_address)} addresses, but {lan} has "
                f"{len(free)} for origins (host numbers {FIRST_ORIGIN_HOST} to {LAST_ORIGIN_HOST})"
            ],
        )
    addresses: dict[str, str] = {}
    for address, hosts in zip(free, hosts_of_address, strict=False):
        for host in hosts:
            # One host on two ports recorded at two addresses keeps the first.
            addresses.setdefault(host, str(address))
    return Placement(addresses)
