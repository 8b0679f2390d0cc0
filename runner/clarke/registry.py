"""THE registry of role implementations: one entry per (kind, name). Every command takes
its choices from here (`--link`, `--server`, `clarke serve --implementation`, the
campaign's `implementations:`), and so does their help.

    kind    name            roles
    link    satlink         terminal, satellite, gateway  (the default)
    link    opensand        terminal, satellite, gateway
    link    netem           terminal, satellite, gateway
    server  origin          server                        (the default)
    server  openlitespeed   server
    client  firefox         client                        (the default)
    pep     splittcp        terminal, gateway             (none unless asked for)
    pep     pepsal          terminal, gateway
    client  chromium        client

Adding an implementation: one module with an `Implementation` subclass
(clarke.roles), and one line below."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from clarke.browser.client import Chromium, Firefox
from clarke.campaign.dimensions import Cell
from clarke.campaign.model import Campaign
from clarke.errors import InputError, UnknownName, ValidationFailed
from clarke.link.netem import Netem
from clarke.link.opensand import OpenSand
from clarke.link.satlink import Satlink
from clarke.pep.pepsal import Pepsal
from clarke.pep.splittcp import SplitTcp
from clarke.profiles import LinkProfile
from clarke.roles import KINDS, Implementation, ServerImplementation
from clarke.server.openlitespeed import OpenLiteSpeed
from clarke.server.origin import Origin
from clarke.vocab import Browser, kind_of

IMPLEMENTATIONS: Final[tuple[Implementation, ...]] = (
    Satlink(),
    OpenSand(),
    Netem(),
    Origin(),
    OpenLiteSpeed(),
    Firefox(),
    SplitTcp(),
    Pepsal(),
    Chromium(),
)
# No default PEP: a testbed runs without one unless a load asks (vocab.PEP_NONE).
DEFAULTS: Final = {"link": "satlink", "server": "origin", "client": Browser.firefox.value}


def names(kind: str) -> tuple[str, ...]:
    return tuple(i.name for i in IMPLEMENTATIONS if i.kind == kind)


def get(kind: str, name: str | None = None) -> Implementation:
    """The implementation `name` of a kind (its default when None)."""
    if kind not in KINDS:
        raise UnknownName("kind of implementation", kind, list(KINDS))
    wanted = name or DEFAULTS.get(kind)
    for impl in IMPLEMENTATIONS:
        if impl.kind == kind and impl.name == wanted:
            return impl
    raise UnknownName(f"{kind} implementation", str(wanted), list(names(kind)))


def for_role(role: str, name: str | None = None) -> Implementation:
    return get(kind_of(role), name)


def help_text(kind: str) -> str:
    """`name: summary` of every implementation of a kind, for --help."""
    return "; ".join(
        f"{i.name}: {i.summary}" + (" (default)" if i.name == DEFAULTS.get(kind) else "")
        for i in IMPLEMENTATIONS
        if i.kind == kind
    )


def check_profiles(link: Implementation, profiles: Iterable[tuple[str, LinkProfile]]) -> None:
    """Every profile the link will run, checked against what it can emulate: one
    ValidationFailed listing every problem of every profile."""
    problems: list[str] = []
    for name, profile in profiles:
        try:
            link.check_profile(profile, f"link profile {name!r}")
        except ValidationFailed as e:
            problems += [f"{name}: {p}" for p in e.problems]
    if problems:
        raise ValidationFailed(f"link profiles ({link.name} link)", problems)


def check_supported(
    cells: Iterable[Cell],
    chosen: Iterable[Implementation],
    source: str,
    held_pages: Sequence[str] = (),
) -> None:
    """Each value of each cell that a chosen implementation's kind puts in force, taken
    by it (its capability data, roles.Implementation.supports), and the pages with
    server delays (`held_pages`, CampaignPlan.held_pages) on a server that holds them:
    one ValidationFailed naming every field, value and implementation that does not take
    it, before anything runs. The one place a campaign's capabilities are checked."""
    implementations = list(chosen)
    holding = [
        i.name for i in IMPLEMENTATIONS if isinstance(i, ServerImplementation) and i.holds_responses
    ]
    problems = [
        f"{', '.join(held_pages)}: server delays (server_delays_ms, docs/pages.md) need a "
        f"server that holds each response as asked ({', '.join(holding)}); the {impl.name} "
        "server would send every object at once"
        for impl in implementations
        if held_pages and isinstance(impl, ServerImplementation) and not impl.holds_responses
    ]
    seen: set[tuple[str, str, str]] = set()
    for cell in cells:
        for dimension, value in cell.items():
            for impl in implementations:
                key = (dimension.name, dimension.text(value), impl.name)
                if dimension.applied_by != impl.kind or key in seen:
                    continue
                seen.add(key)
                if not impl.takes(dimension, value):
                    problems.append(f"{dimension.key}: {impl.refusal(dimension, value)}")
    if problems:
        raise ValidationFailed(source, problems)


def campaign_choices(
    campaign: Campaign, source: str, link: str | None = None, server: str | None = None
) -> tuple[Implementation, Implementation]:
    """The link and server a campaign runs on: the options given, else the campaign's
    `implementations:`, else the defaults; unknown names fail naming the field."""
    check_names(campaign, source)
    combinations = campaign.implementations.combinations(link, server)
    if len(combinations) != 1:
        raise InputError(
            f"{source}: implementations lists {len(combinations)} combinations of link and "
            "server; one run takes one (give --link and --server, or run the whole file "
            "with `clarke run`, which runs each in turn)"
        )
    chosen_link, chosen_server = combinations[0]
    return get("link", chosen_link), get("server", chosen_server)


def check_names(campaign: Campaign, source: str) -> None:
    """Every name under the campaign's `implementations:` is one the registry has (the
    matrices' names, PEP presets included, are checked as the campaign is read:
    clarke.campaign.plan)."""
    problems: list[str] = []
    for kind in ("link", "server"):
        for name in getattr(campaign.implementations, kind) or []:
            if name not in names(kind):
                problems.append(
                    f"implementations.{kind}: unknown {kind} implementation {name!r}; "
                    f"allowed: {', '.join(names(kind))}"
                )
    if problems:
        raise ValidationFailed(source, problems)
