"""A session on a testbed, the same on both substrates: the roles come up (or are
attached to) through the substrate (testbed/substrate.py, compose/substrate.py), and
from then on the runner reaches every role only through its agent.

The session offers what a campaign needs, each change made once: `ensure_profile(P)`,
`ensure_cc(C)` (and the cross traffic and the PEP) read back what is in force and apply
only what differs (every apply logged and kept in `applied`; run/loop/apply.py calls them);
`load(run)` reads the link's profile back before and after the load, and a load that did
not run on the profile asked for fails with the reason; `check_link` measures the link.

    runner ──mgmt── agents: client (Firefox), terminal/satellite/gateway (satlink,
                            OpenSAND or netem), server (origin or OpenLiteSpeed)
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from pydantic import ValidationError

from clarke import profiles, registry, tls
from clarke.agent.agents import Agents, Applied, LinkStopped
from clarke.browser.load import (
    ExpectedObject,
    LoadRequest,
    LoadResult,
)
from clarke.campaign import dimensions
from clarke.campaign.cross import CrossTraffic
from clarke.campaign.dimensions import SITE_NONE
from clarke.campaign.plan import Run
from clarke.contract import CaptureStopped
from clarke.errors import ClarkeError, InputError, ValidationFailed
from clarke.pages import build as page_build
from clarke.pages.models import Registry
from clarke.place.plan import Addresses
from clarke.results.connections import connection_rows
from clarke.results.details import LinkInForce, LoadDetails, PepAsked, PepInLoad, PhasesMs
from clarke.results.meta import LinkCheckRecord
from clarke.results.objects import object_rows, signals_received, signals_verdict
from clarke.results.record import Status
from clarke.roles import profile_digest
from clarke.run.linkcheck.check import LINK_CHECKS
from clarke.run.session import captures, cross, site, timeline
from clarke.run.session.captures import CapturePolicy
from clarke.run.session.isolation import isolation_verdict
from clarke.run.session.link import LinkMeter, check_record
from clarke.run.session.pep import pep_body, pep_metrics, pep_verdict
from clarke.run.session.settings import PageLoad, SessionSettings
from clarke.run.session.site import SiteReplay
from clarke.run.session.verdicts import link_verdict, server_verdict, settings_verdict
from clarke.schedules import Schedule
from clarke.schema import problems_of
from clarke.timing import Phases
from clarke.vocab import (
    LINK_ROLES,
    PEP_NONE,
    PEP_ROLES,
    ROLES,
    Browser,
    CongestionControl,
    DnsCache,
    HttpVersion,
    vocabulary_value,
)

HOST = tls.DEFAULT_HOST
# How long before an aimed navigation the browser is asked for: a first Firefox also makes
# the profile template, every browser waits for its quiet (at most 3 s); a later start
# navigates late, and the record says at which phase it did.
NAVIGATION_LEAD_S = 8.0


class Substrate(Protocol):
    """How the roles come up and where things are (NetnsSubstrate, ComposeSubstrate)."""

    name: str
    applied: list[Applied]  # what bringing the roles up applied

    def start(self, profile: str) -> Addresses: ...
    @property
    def pages_dir(self) -> Path: ...
    @property
    def agent_token(self) -> str: ...  # what every agent request carries (agent/auth.py)
    def at_client(self, argv: list[str]) -> list[str]: ...
    def note_profile(self, name: str, sha256: str) -> None: ...
    def cross_endpoints(self) -> cross.CrossEndpoints: ...  # InputError where it has none
    def close(self) -> None: ...


class Session:
    """`start()` brings the roles up, `close()` always undoes it."""

    def __init__(
        self,
        substrate: Substrate,
        page_names: list[str],
        settings: SessionSettings | None = None,
    ) -> None:
        self.substrate = substrate
        self.page_names = page_names
        self.settings = settings = settings or SessionSettings()
        self.registry = settings.registry or Registry.default()
        self._schedules: dict[str, Schedule | None] = {}
        self.pages: dict[str, Any] = {}
        self.plan: Addresses | None = None
        self.agents: Agents | None = None
        self.profile: tuple[str, str] | None = None  # (name, sha256) the link should run
        self.cross: cross.CrossTrafficDriver | None = None  # once a load asks for some
        self._link: LinkMeter | None = None
        self.site = SiteReplay(settings.sites)  # the recorded site in force (site.py)
        # Whether the last load failed: with context isolation the next one then runs in
        # a new browser, not in the one that served it (LoadRequest.new_browser).
        self._last_failed = False

    # --- lifecycle -------------------------------------------------------------------
    def start(self, profile: str) -> Session:
        """Bring the roles up with `profile` on the link (or attach to them)."""
        try:
            self.plan = self.substrate.start(profile)
            roles_only = self.settings.roles_only
            roles = [r for r in ROLES if not (roles_only and r == "client")]
            self.agents = Agents(self.plan, roles, self.substrate.agent_token)
            self.agents.wait_ready()
            if not roles_only:
                self._check_browser()
                self._check_server_delays()
                self.pages = page_build.build_named(
                    self.substrate.pages_dir, self.page_names, self.registry, self.settings.units
                )
            view = self.agents.link()
            if view.consistent and view.profile and view.sha256:
                self.profile = (view.profile, view.sha256)
        except BaseException:
            self.close()
            raise
        return self

    def _check_browser(self) -> None:
        """The browser is the client agent's start-up option, never a request's: the
        client must run the one asked for (an attached testbed keeps the one it started
        with)."""
        firefox = self.settings.firefox
        if not firefox:
            return
        client = self._agents().health.get("client")
        running = str(client.said(Browser.firefox) or "") if client else ""
        wanted = shutil.which(firefox) or firefox
        if running and os.path.realpath(running) != os.path.realpath(wanted):
            raise InputError(
                f"the client agent runs {running}, not {firefox}: the browser is fixed "
                "when the testbed's agents start (bring up a new testbed for another browser)"
            )

    def _check_server_delays(self) -> None:
        """Pages with server delays (docs/pages.md) only mean what they say on a server
        that holds each response (registry.check_supported, here for the server the
        testbed runs, whatever was asked)."""
        server = registry.get("server", self._agents().implementations["server"])
        held = [
            n
            for n in dict.fromkeys(self.page_names)
            if self.registry.page_by_name(n, self.settings.units).server_delays
        ]
        registry.check_supported([], [server], "the session's pages", held)

    def close(self) -> None:
        try:
            self.stop_cross()
        finally:
            try:
                self.site.close()
            finally:
                self._close_roles()

    def _close_roles(self) -> None:
        if self.agents is not None:
            self.agents.close()
            self.agents = None
        self.substrate.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _agents(self) -> Agents:
        if self.agents is None:
            raise ClarkeError("the session has not started")
        return self.agents

    @property
    def implementations(self) -> dict[str, str]:
        return self._agents().implementations

    def versions(self) -> dict[str, str]:
        return self._agents().versions()

    @property
    def applied(self) -> list[Applied]:
        """Every change made to the testbed in this session, in order."""
        return [*self.substrate.applied, *(self.agents.applied if self.agents else [])]

    # --- configuration -----------------------------------------------------------------
    def ensure_profile(self, name: str) -> Applied | None:
        profile = profiles.read(name)
        applied = self._agents().ensure_profile(name, profile)
        self.profile = (name, profile_digest(profile))
        if applied is not None:
            self.substrate.note_profile(*self.profile)
        return applied

    def ensure_cc(self, cc: str) -> Applied | None:
        return self._agents().ensure_cc(cc)

    def ensure_server(self, settings: Mapping[str, object]) -> Applied | None:
        """The server settings `settings` names (its POST /config's fields: the
        dimensions the server puts in force), each applied where another is in force.
        Whether the server takes them was checked when the campaign was planned
        (registry.check_supported); a setting the server has none for (its capability
        data names no value of it) is left out at its default, which it runs at."""
        server = self.implementations.get("server", "")
        named = (
            registry.get("server", server).supports if server in registry.names("server") else {}
        )
        kept = {}
        for d in dimensions.seal():
            if d.setting is None or d.setting.field not in settings:
                continue
            value = settings[d.setting.field]
            if d.name in named or str(value) != d.default_text():
                kept[d.setting.field] = value
        return self._agents().ensure_server(kept) if kept else None

    def ensure_cross(self, spec: CrossTraffic, page: str = "") -> None:
        """`spec` crossing the link (started and confirmed running; nothing for none);
        `page`: the cell's page (web cross traffic fetches it)."""
        if self.cross is None:
            if not spec.active:
                return
            self.cross = cross.CrossTrafficDriver(self.substrate.cross_endpoints())
        entry = self.pages.get(page) or {}
        paths = [entry["path"], *(o["path"] for o in entry["objects"])] if entry else []
        self.cross.ensure(spec, self.profile[0] if self.profile else "", paths)

    def stop_cross(self) -> None:
        if self.cross is not None:
            self.cross.stop()

    def ensure_pep(self, name: str, cc: str) -> Applied | None:
        """Terminal and gateway run PEP `name` (vocab.PEP_NONE: none), its satellite
        hop on `cc` with buffers for the link profile in force (run/session/pep.py)."""
        if name != PEP_NONE and self.substrate.name != "netns":
            raise InputError(
                f"PEP {name}: PEPs run on the netns substrate only (the compose images carry "
                "no PEP; docs/peps.md)"
            )
        if name == PEP_NONE and self.substrate.name != "netns":
            return None  # compose: the stations' agents host no PEP, none to stop
        profile = profiles.read(self.profile[0]) if self.profile else None
        if profile is None:
            raise ClarkeError("a PEP is configured for the link profile in force: none yet")
        return self._agents().ensure_pep(pep_body(name, cc, profile))

    def ensure_site(self, site: str, cache: DnsCache = DnsCache.none) -> Applied | None:
        """The recorded site `site` (a campaign's path; none: the generated pages) served
        and its names answered from the gateway side, cached at the terminal if `cache`
        says so (run/session/site.py)."""
        return self.site.ensure(site, cache, self.substrate, self._agents(), self.plan)

    def quic_offers(self, cc: CongestionControl) -> bool:
        offered = self._agents().quic_offered()
        return offered is None or cc.quic in offered

    # --- one load --------------------------------------------------------------------
    def browser_of(self, load: PageLoad) -> Browser:
        """The load's browser: its own, else the session's."""
        return load.browser or vocabulary_value("browser", Browser, self.settings.browser)

    def request(self, load: PageLoad, capture_max_bytes: int = 0) -> LoadRequest:
        """The client's request for `load` (the session's browser when it names none)."""
        browser = self.browser_of(load)
        if load.site != SITE_NONE:
            # The campaign's site (the next load's may not be in force yet).
            site = self.site.sites[load.site]
            page: dict[str, Any] = {"url": site.start_url, "site_hosts": site.hosts}
        else:
            entry = self.pages[load.page]
            page = {
                "url": f"https://{HOST}/{entry['path']}",
                "expected_objects": [
                    ExpectedObject(path=o["path"], bytes=o["bytes"]) for o in entry["objects"]
                ],
                "lcp_candidates": entry["lcp_candidates"],
            }
        try:
            return LoadRequest(
                **page,
                http=load.http,
                browser=browser,
                connections=load.connections,
                window=self.settings.window,
                timeout_s=self.settings.timeout_s,
                prefs=dict(load.prefs),
                priority_signals=self.settings.priority_signals,
                capture_max_bytes=capture_max_bytes,
                isolation=self.settings.isolation,
                loads_per_browser=self.settings.loads_per_browser,
            )
        except ValidationError as e:  # what the browser cannot honour, named
            raise ValidationFailed("load request", problems_of(e)) from None

    def load(
        self, run: Run, attempt: int = 1, next_run: Run | None = None
    ) -> tuple[LoadResult, LoadDetails]:
        """`run`'s load (run/loop/apply.py put its cell in force); `next_run` may start."""
        schedule, aiming = self._schedule(), self.settings.aiming
        aim = None
        if aiming is not None and schedule is not None and schedule.slot_s:
            aim = aiming.phase_s(schedule.slot_s, run)
        load = PageLoad.of_run(run, f"{run.run_id}-a{attempt}", aim)
        if next_run is not None:
            ahead = self.request(PageLoad.of_run(next_run, "next"))
            load = replace(load, next_load=ahead)
        return self.load_page(load)

    def _link_failure(self) -> str:
        """Why the load does not count as a load on `self.profile`, or ""; LinkStopped
        when the link no longer answers."""
        view = self._agents().link()
        if self.profile is None:
            return "no link profile was applied in this session"
        return link_verdict(*self.profile, view.states)

    def load_page(self, load: PageLoad) -> tuple[LoadResult, LoadDetails]:
        """One verified load; with the session's capture policy, the load's capture is
        written under `load.label` (its details' `capture` says what was kept). The PEP
        the stations must run (ensure_pep puts it in force) is verified."""
        agents, engine = self._agents(), self.settings.engine
        browser = self.browser_of(load)
        details = LoadDetails(substrate=self.substrate.name, pep=PepInLoad(name=load.pep))
        if self.profile is not None:
            details.link = LinkInForce(profile=self.profile[0], profile_sha256=self.profile[1])
        if load.http is HttpVersion.h3 and not self.quic_offers(load.cc):
            offered = ", ".join(sorted(agents.quic_offered() or ()))
            reason = (
                f"the server ({self.implementations.get('server')}) has no "
                f"{load.cc.quic} for QUIC (it offers {offered}): not loaded"
            )
            return LoadResult.failed(engine, reason, browser=browser), details
        t = Phases()
        with t.phase("link_before"):
            failure = self._link_failure()
        if failure:
            return LoadResult.failed(engine, failure, browser=browser), details
        capture = self.settings.capture
        capture = capture if capture and capture.active else None
        req = self._request_for(load, browser, capture)
        req = req.model_copy(update={"new_browser": self._last_failed})
        self._last_failed = True  # until this load is known to count
        if load.site != SITE_NONE:
            in_force = self.site.for_load(load.site)  # put in force by its cell's hook
            details.site = in_force.describe()
            with t.phase("dns_warm"):
                self.site.warm(self.substrate.at_client)
        with t.phase("reset_stats"):
            self._reset_stats(agents)
        if capture:
            with t.phase("capture_start"):
                agents[captures.AT_ROLE].capture_start(capture.max_bytes)
        if load.slot_phase_s is not None:
            with t.phase("aim"):  # the client waits briefly (browser start): the rest here
                req = req.model_copy(update={"navigate_at_unix_ms": self._aim(load.slot_phase_s)})
            details.aimed_slot_phase_s = load.slot_phase_s
        link_capture: CaptureStopped | None = None
        crossing = self.cross.before_load() if self.cross else None
        names_before = self.site.mark() if load.site != SITE_NONE else None
        try:
            with t.phase("client"):
                result = agents["client"].load(req, engine, timeout=self.settings.timeout_s + 120)
        except ClarkeError:
            self._link_failure()  # LinkStopped says so when the link is why
            raise
        finally:
            if capture:
                with t.phase("capture_stop"):
                    link_capture = self._stop_capture()
        failure = self._verify(load, result, crossing, t, details)
        if load.site != SITE_NONE:
            result = self.site.after_load(names_before, result, failure, details)
        if result.status is Status.ok and failure:
            result = result.model_copy(update={"status": Status.failed, "reason": failure})
        self._last_failed = result.status is not Status.ok
        if capture:
            problems = [] if link_capture else ["no pcap: the terminal's capture did not answer"]
            with t.phase("capture_write"):
                details.capture = captures.write(
                    capture,
                    load.label,
                    result.status is Status.ok,
                    link_capture,
                    result.captured,
                    problems,
                )
        # The client's own phases are inside "client"; the rest is the agent's round trip.
        details.phases_ms = PhasesMs(runner=t.ms, client=result.phases_ms)
        _with_browser(details, result)
        return result.model_copy(update={"captured": None}), details

    def _reset_stats(self, agents: Agents) -> None:
        """Every counter a load's figures are read from, zeroed before it."""
        agents["server"].reset_stats()
        for role in LINK_ROLES:
            agents[role].reset_stats()
        if self.substrate.name == "netns":
            for role in PEP_ROLES:
                agents[role].pep_reset_stats()

    def _aim(self, slot_phase_s: float) -> float | None:
        """When the client navigates (Unix ms) to start the load at `slot_phase_s` into a
        slot; the wait until shortly before it spent here, the rest in the client."""
        at = self._navigate_at(slot_phase_s)
        if at is not None:
            time.sleep(max(0.0, at / 1000 - time.time() - NAVIGATION_LEAD_S - 5))
        return at

    def _request_for(
        self, load: PageLoad, browser: Browser, capture: CapturePolicy | None
    ) -> LoadRequest:
        req = self.request(replace(load, browser=browser), capture.max_bytes if capture else 0)
        if load.next_load is not None and not capture:
            start_ahead = self.settings.start_ahead
            ahead = {"next_load": load.next_load.settings(), "start_ahead": start_ahead}
            req = req.model_copy(update=ahead)
        return req

    def _verify(
        self,
        load: PageLoad,
        result: LoadResult,
        crossing: tuple[cross.Sample, float] | None,
        t: Phases,
        details: LoadDetails,
    ) -> str:
        """What the load really used, from the roles' own records, into `details`; why it
        does not count, or "" (LinkStopped when the link died during the load)."""
        agents = self._agents()
        cross_failure = ""
        if crossing is not None and self.cross is not None:
            details.cross_traffic, cross_failure = self.cross.after_load(crossing)
        with t.phase("link_after"):
            failure = self._link_failure()
        with t.phase("server_stats"):
            server = agents["server"].server_stats()
        if load.site != SITE_NONE:
            start_url = self.site.sites[load.site].start_url
            site.verdict(server, load.http, load.cc, load.connections, start_url).into(details)
            rows, origin_metrics = site.origins(result.raw or {})
            details.origins = site.server_side(
                rows, details.server_connections, (result.raw or {}).get("timeOrigin")
            )
            details.metrics |= origin_metrics
            # What the site's origins sent stands for the page's bytes.
            page_bytes = sum(c.app_bytes_sent for c in details.server_connections)
            start = urlsplit(self.site.sites[load.site].start_url)
            page_path, page_host = start.path, start.hostname
        else:
            entry = self.pages[load.page]
            page_bytes, page_path = int(entry["total_bytes"]), "/" + entry["path"]
            page_host = None
            objects = 1 + len(entry["objects"])
            server_verdict(server, load.http, load.cc, page_bytes, objects, load.connections).into(
                details
            )
        if load.cell is not None and not details.failure:
            details.failure = settings_verdict(load.cell, server)
        details.isolation = isolated = isolation_verdict(
            server, result.raw or {}, load.http, self.settings.isolation
        )
        details.failure = details.failure or isolated.failure
        with t.phase("link_stats"):
            asked_unix_ms = time.time() * 1000
            details.link_stats = {role: agents[role].link_stats() for role in LINK_ROLES}
        origin = (result.raw or {}).get("timeOrigin")
        metrics, details.timeline = timeline.link_metrics(
            details.link_stats,
            page_bytes,
            crossing is not None,
            asked_unix_ms,
            float(origin) if isinstance(origin, int | float) else None,
            self._schedule(),
        )
        details.metrics |= metrics
        pep, in_load = load.pep, details.pep
        assert in_load is not None  # load_page names it first
        if self.substrate.name == "netns":
            with t.phase("pep_stats"):
                stations = {role: agents[role].pep_station_stats() for role in PEP_ROLES}
            in_load.stations = stations
            details.metrics |= pep_metrics(stations) if pep != PEP_NONE else {}
            assert self.plan is not None and self.profile is not None
            asked = pep_body(pep, load.cc, profiles.read(self.profile[0]))
            in_load.settings = PepAsked.model_validate(asked.body())
            details.failure = details.failure or pep_verdict(
                pep, load.http, details.server_connections, stations, self.plan, asked
            )
        elif pep != PEP_NONE:
            details.failure = details.failure or f"PEP {pep}: the stations host no PEP"
        details.per_connection, concurrency = connection_rows(
            details.server_connections, result.raw or {}, result.metrics.get("plt_ms")
        )
        details.metrics |= concurrency
        details.objects, order = object_rows(
            details.server_connections, result.raw or {}, page_path, page_host
        )
        details.metrics |= order
        signals = self.settings.priority_signals
        details.priority_signals = received = signals_received(details.server_connections, signals)
        details.failure = details.failure or signals_verdict(signals, received)
        details.metrics |= cross.metrics_of(details.cross_traffic)
        return failure or details.failure or cross_failure

    def _navigate_at(self, phase_s: float) -> float | None:
        """When to navigate (Unix ms): run/timeline.navigate_at."""
        asked = time.time() * 1000
        forward = self._agents()["gateway"].link_stats().forward
        state = forward.schedule if forward is not None else None
        return timeline.navigate_at(self._schedule(), state, asked, phase_s, NAVIGATION_LEAD_S)

    def _schedule(self) -> Schedule | None:
        """The schedule of the profile in force, if it has one."""
        if self.profile is None:
            return None
        name = self.profile[0]
        if name not in self._schedules:  # read once: up to three times a load otherwise
            self._schedules[name] = profiles.read(name).schedule
        return self._schedules[name]

    def _stop_capture(self) -> CaptureStopped | None:
        """The terminal's packets; None (logged in the record) when it cannot say."""
        try:
            return self._agents()[captures.AT_ROLE].capture_stop()
        except ClarkeError:
            return None

    # --- the link as it is -------------------------------------------------------------
    def link(self) -> LinkMeter:
        """The testbed's link, as the runner measures it (run/session/link.py)."""
        if self._link is None:
            assert self.plan is not None
            self._link = LinkMeter(self._agents(), self.plan, self.substrate.at_client)
        return self._link

    def check_link(self, profile_name: str, phase: str, level: str = "full") -> LinkCheckRecord:
        """The link check of a campaign: `profile_name` on the link (applied if it is not
        in force), measured alone, as TCP without a PEP; a record for meta.json."""
        self.ensure_profile(profile_name)
        if self.substrate.name == "netns":
            self.ensure_pep(PEP_NONE, CongestionControl.cubic)
        self.stop_cross()
        report = self.link().measure(profile_name, LINK_CHECKS[level], self.substrate.name)
        where = {"link": self.implementations.get("link", ""), "substrate": self.substrate.name}
        return check_record(report, profile_name, phase, where)


__all__ = ["LinkStopped", "Session", "Substrate"]


def _with_browser(details: LoadDetails, result: LoadResult) -> None:
    """What the client said of its browser: the profile, its start and its context."""
    if result.profile:
        details.browser_profile = result.profile
    if result.started:
        details.browser_started = result.started
    if result.context:
        details.browser_context = result.context
