"""Everything a campaign needs, checked before anything runs (exit 2 for what the
campaign asks that cannot be, exit 3 for what is not installed here), and the substrate
its roles come up on."""

from __future__ import annotations

from clarke import pep_presets, profiles, registry
from clarke.browser import browsertime_engine
from clarke.browser.client import Firefox
from clarke.campaign.dimensions import BROWSER, PEP
from clarke.campaign.model import Campaign
from clarke.campaign.plan import CampaignPlan, Run, cells_of
from clarke.compose.substrate import ComposeSubstrate
from clarke.errors import InputError, UnknownName
from clarke.place import netns
from clarke.roles import ServerImplementation
from clarke.run.loop.options import RunOptions
from clarke.run.session.session import Substrate
from clarke.testbed.substrate import NetnsSubstrate
from clarke.vocab import PEP_NONE, SUBSTRATES, Browser, Engine, Isolation


def substrate_for(options: RunOptions, firefox: str | None = None) -> Substrate:
    """The substrate `options` names, on the implementations they pin (a new netns
    testbed takes the registry's defaults for the others); `firefox`: the client
    agent's browser binary (its start-up option)."""
    if options.substrate == "netns":
        return NetnsSubstrate(options.testbed_id, options.link, options.server, firefox=firefox)
    if options.substrate == "compose":
        if options.testbed_id is not None:
            raise InputError("--testbed names a netns testbed; the compose stack has one")
        return ComposeSubstrate(firefox=firefox)
    raise UnknownName("substrate", options.substrate, list(SUBSTRATES))


def preflight(plan: CampaignPlan, runs: list[Run], options: RunOptions) -> tuple[str, str]:
    """The link and server implementations `runs` of `plan` take (names, then whether the
    link can take each profile: exit 2), then what must be installed here (exit 3). On
    compose the link and the server check themselves in their containers; the session
    compares what they are with what was asked."""
    c, source = plan.campaign, plan.source
    link_impl, server_impl = registry.campaign_choices(c, str(source), options.link, options.server)
    names = sorted({r.cell.link for r in runs})
    registry.check_profiles(link_impl, [(n, profiles.read(n)) for n in names])
    reports_handshakes = isinstance(server_impl, ServerImplementation) and (
        server_impl.reports_handshakes
    )
    if c.browser.isolation is Isolation.context and not reports_handshakes:
        raise InputError(
            f"{source}: browser.isolation: {Isolation.context} needs a server whose records "
            f"say how every TLS handshake went (origin); {server_impl.name}'s do not, so no "
            "load's context could be shown to start from nothing"
        )
    chosen = [link_impl, server_impl]
    registry.check_supported([r.cell for r in runs], chosen, str(source), plan.held_pages)
    peps = sorted({r.cell[PEP] for r in runs} - {PEP_NONE})
    if peps and options.substrate != "netns":
        raise InputError(
            f"{source}: pep {', '.join(peps)}: PEPs run on the netns substrate only (the "
            "compose images carry no PEP; docs/peps.md)"
        )
    if options.substrate == "netns":
        netns.require_root_and_tun()
        link_impl.check_environment()
        server_impl.check_environment()
        for pep in peps:
            registry.get("pep", pep_presets.read(pep).implementation).check_environment()
    check_browser(c)
    return link_impl.name, server_impl.name


def check_browser(c: Campaign) -> None:
    """The campaign's browsers and engine, installed here (exit 3)."""
    wanted = {cell[BROWSER] for _, _, m in c.matrices() for cell in cells_of(c, m)}
    if Browser.firefox in wanted:
        Firefox(c.browser.binary).check_environment()
    if Browser.chromium in wanted:
        registry.get("client", Browser.chromium).check_environment()
    if c.browser.engine is Engine.browsertime:
        browsertime_engine.find_browsertime()
