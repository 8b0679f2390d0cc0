"""The recorded sites a campaign names (its `sites` axis: campaign/dimensions.py SITE),
each read and checked when the campaign is read, before anything runs: a campaign whose
archive does not check is refused (exit 2) naming the campaign file, the field and the
archive's entry. What is read goes into the plan (plan.json's `sites`): the digests
name exactly what a result replayed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from clarke.campaign.dimensions import SITE, SITE_NONE
from clarke.campaign.model import Campaign
from clarke.campaign.paths import contained
from clarke.errors import ValidationFailed
from clarke.json_value import JsonObject
from clarke.sites import archive


@dataclass(frozen=True)
class PlannedSite:
    """A site archive as the campaign names it (`given`, relative to the campaign file)
    and as it was when the campaign was read."""

    given: str
    path: Path  # resolved
    name: str
    digest: str  # SHA-256 of site.json (whose body names are the bodies' SHA-256)
    content_digest: str  # what a replay serves, whatever the format it was imported from
    start_url: str
    hosts: tuple[str, ...]
    exchanges: int

    def describe(self) -> JsonObject:
        """The site as plan.json and each record keep it."""
        return {
            "path": self.given,
            "name": self.name,
            "digest": self.digest,
            "content_digest": self.content_digest,
            "start_url": self.start_url,
            "origins": len(self.hosts),
            "exchanges": self.exchanges,
        }


def planned(given: str, path: Path, site: archive.Site) -> PlannedSite:
    a = site.archive
    return PlannedSite(
        given=given,
        path=path,
        name=site.name,
        digest=site.digest,
        content_digest=a.content_digest(),
        start_url=a.start_url,
        hosts=tuple(dict.fromkeys(a.hosts())),
        exchanges=len(a.exchanges),
    )


def read_sites(c: Campaign, source: Path) -> dict[str, PlannedSite]:
    """Every site the campaign's matrices list, read and checked (clarke.sites.archive);
    ValidationFailed naming `source`, the field and each broken entry."""
    out: dict[str, PlannedSite] = {}
    problems: list[str] = []
    for _, prefix, m in c.matrices():
        for i, given in enumerate(m.axis(SITE) or []):
            if given == SITE_NONE or given in out:
                continue
            field = f"{prefix}.{SITE.key}[{i}]"
            path = contained(source, given, field)
            try:
                site = archive.read(path)
            except ValidationFailed as e:
                in_json = e.source.endswith(archive.SITE_JSON)
                where = f"{given}/{archive.SITE_JSON}" if in_json else given
                problems += [f"{field}: {where}: {p}" for p in e.problems]
                continue
            out[given] = planned(given, path, site)
    if problems:
        raise ValidationFailed(str(source), problems)
    return out
