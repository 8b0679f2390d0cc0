"""A site's origins on the server side: one testbed address per recorded address, so
origins that shared one still share one; stable; the zone a resolver answers; too many
origins for the LAN is exit 2 naming the site."""

from __future__ import annotations

import ipaddress

import pytest

from clarke.errors import ValidationFailed
from clarke.sites.archive import Exchange, Origin, SiteArchive, Source
from clarke.sites.placement import FIRST_ORIGIN_HOST, place
from clarke.sites.zone import Zone

LAN = ipaddress.IPv4Network("198.18.2.0/24")


def _archive(origins: list[tuple[str, str | None]]) -> SiteArchive:
    return SiteArchive(
        name="t",
        start_url=f"https://{origins[0][0]}/",
        source=Source(kind="har"),
        origins=[
            Origin(host=h, address=a, protocols=["h2"], certificate_names=[h]) for h, a in origins
        ],
        exchanges=[Exchange(method="GET", url=f"https://{origins[0][0]}/", status=200)],
    )


def test_shared_addresses_stay_shared_and_the_rest_get_their_own() -> None:
    archive = _archive(
        [
            ("www.example.org", "192.0.2.10"),
            ("static.example.org", "192.0.2.10"),  # one CDN address: may coalesce
            ("fonts.example.net", "192.0.2.20"),
            ("ads.example.com", None),
        ]
    )
    placed = place(archive, LAN)
    a = placed.addresses
    assert a["www.example.org"] == a["static.example.org"]
    assert len({a["www.example.org"], a["fonts.example.net"], a["ads.example.com"]}) == 3
    first = LAN.network_address + FIRST_ORIGIN_HOST
    assert placed.distinct == [str(first + i) for i in range(3)]
    assert all(ipaddress.IPv4Address(x) in LAN for x in a.values())
    # The same archive, the same addresses, whatever the order of its origins.
    assert place(_archive(list(reversed([(o.host, o.address) for o in archive.origins]))),
                 LAN).addresses == a  # fmt: skip
    # And it is a zone the resolver takes as it is.
    assert Zone(names=placed.zone_names()).lookup("STATIC.example.org.") == a["www.example.org"]


def test_more_origins_than_the_lan_holds_names_the_site() -> None:
    small = ipaddress.IPv4Network("198.18.2.0/26")  # 62 hosts: none from 64 up
    with pytest.raises(ValidationFailed) as e:
        place(_archive([("www.example.org", None)]), small, "sites/t")
    assert "sites/t" in str(
        e.value
    ) and "its origins need 1 addresses, but 198.18.2.0/26 has 0" in str(e.value)


def test_origins_never_take_the_compose_bridges_address() -> None:
    """Host numbers 64 to 253: .254 is a compose network's bridge (docker-compose.yml)."""
    many = [(f"h{i}.example.org", f"203.0.113.{i}") for i in range(190)]
    placed = place(_archive(many), LAN)
    assert placed.distinct[-1] == str(LAN.network_address + 253)
    with pytest.raises(ValidationFailed, match=r"need 191 addresses, but \S+ has 190"):
        place(_archive([*many, ("one.more.org", "203.0.113.250")]), LAN)
