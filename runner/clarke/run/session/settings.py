"""What a session is asked, as values: how it loads pages (SessionSettings, fixed for
the session: from the campaign or from `clarke load`'s options), and what one load asks
for (PageLoad: a run's cell, or the options)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from clarke.browser.load import LoadRequest
from clarke.campaign.dimensions import BROWSER, CC, CONNECTIONS, HTTP, PEP, SITE, SITE_NONE, Cell
from clarke.campaign.model import SlotPhase
from clarke.campaign.plan import CampaignPlan, Run, page_registry, positions_per_profile
from clarke.campaign.sites import PlannedSite
from clarke.pages.models import Registry, Units
from clarke.run.session.captures import CapturePolicy
from clarke.vocab import (
    LOADS_PER_BROWSER,
    PEP_NONE,
    Browser,
    CongestionControl,
    Engine,
    HttpVersion,
    Isolation,
    PrioritySignals,
    StartAhead,
    vocabulary_value,
)


@dataclass(frozen=True)
class Aiming:
    """Where in the link schedule's reconfiguration slot each load of a campaign starts
    navigating (the campaign's slot_phase, docs/schedules.md)."""

    slot_phase: SlotPhase
    repetitions: int
    positions: Mapping[int, tuple[int, int]]  # run index -> (k, n) in its profile: sweep

    def phase_s(self, slot_s: float, run: Run) -> float:
        return self.slot_phase.phase_s(
            slot_s, run.repetition, self.repetitions, self.positions.get(run.index, (0, 1))
        )


@dataclass(frozen=True)
class SessionSettings:
    """How a session loads pages. `roles_only`: no pages, no client (the link and the
    server only); `capture`: which loads keep a capture, where (captures.py); `browser`:
    a load's browser when it names none; `start_ahead`: when the next browser starts
    (browser/prestart.py); `isolation`: a new browser per load, or a new context in a
    running browser for at most `loads_per_browser` loads (browser/contexts.py)."""

    engine: str = Engine.selenium
    registry: Registry | None = None
    units: Units = Units.si
    firefox: str | None = None
    window: tuple[int, int] = (1366, 768)
    timeout_s: float = 180.0
    roles_only: bool = False
    capture: CapturePolicy | None = None
    browser: str = Browser.firefox
    start_ahead: StartAhead = "after-page"
    aiming: Aiming | None = None
    isolation: Isolation = Isolation.profile
    loads_per_browser: int = LOADS_PER_BROWSER
    priority_signals: PrioritySignals = "default"
    # The recorded sites a campaign replays, by the path it gives (campaign/sites.py).
    sites: Mapping[str, PlannedSite] = field(default_factory=dict)

    @classmethod
    def of_plan(cls, plan: CampaignPlan, capture: CapturePolicy | None) -> SessionSettings:
        """What the campaign's browser block, pages and slot phase ask."""
        c = plan.campaign
        aiming = None
        if c.slot_phase is not None:
            aiming = Aiming(c.slot_phase, c.planned_repetitions, positions_per_profile(plan.runs))
        return cls(
            engine=c.browser.engine,
            registry=page_registry(c, plan.source),
            units=Units(c.pages.units),
            firefox=c.browser.binary,
            window=c.browser.window,
            capture=capture,
            start_ahead=c.browser.start_ahead,
            aiming=aiming,
            isolation=c.browser.isolation,
            loads_per_browser=c.browser.loads_per_browser,
            priority_signals=c.browser.priority_signals,
            sites=plan.sites,
        )


ROLES_ONLY = SessionSettings(roles_only=True)


@dataclass(frozen=True)
class PageLoad:
    """What one load asks for: the page, its protocol, congestion control, connections
    per server, PEP and browser (the session's when None), Firefox preference overrides;
    `label`: its capture's name; `slot_phase_s`: where in the slot it navigates;
    `next_load`: what the next load will ask of its browser (it may start ahead);
    `site`: a recorded site's path as the campaign gives it (`page` is then its name),
    or none for a generated page."""

    page: str
    http: HttpVersion
    cc: CongestionControl
    connections: int
    pep: str = PEP_NONE
    browser: Browser | None = None
    prefs: Mapping[str, bool | int] = field(default_factory=dict)
    label: str = "load"
    slot_phase_s: float | None = None
    next_load: LoadRequest | None = None
    site: str = SITE_NONE
    # The cell the load was made of (a campaign's run, or clarke load's options), where
    # it was: the server settings it put in force are verified against it.
    cell: Cell | None = None

    def __post_init__(self) -> None:
        # A load written by hand (a test, a bench) may name its values as text: each is
        # read into its vocabulary here, once, naming what it allows.
        for name, vocabulary in (("http", HttpVersion), ("cc", CongestionControl)):
            object.__setattr__(self, name, vocabulary_value(name, vocabulary, getattr(self, name)))
        if self.browser is not None:
            object.__setattr__(self, "browser", vocabulary_value("browser", Browser, self.browser))

    @classmethod
    def of_run(cls, run: Run, label: str, slot_phase_s: float | None = None) -> PageLoad:
        return cls.of_cell(run.cell, label, slot_phase_s)

    @classmethod
    def of_cell(
        cls,
        c: Cell,
        label: str,
        slot_phase_s: float | None = None,
        prefs: Mapping[str, bool | int] | None = None,
        next_load: LoadRequest | None = None,
    ) -> PageLoad:
        return cls(
            page=c.page,
            http=c[HTTP],
            cc=c[CC],
            connections=c[CONNECTIONS],
            pep=c[PEP],
            browser=c[BROWSER],
            prefs=prefs or {},
            label=label,
            slot_phase_s=slot_phase_s,
            next_load=next_load,
            site=c[SITE],
            cell=c,
        )
