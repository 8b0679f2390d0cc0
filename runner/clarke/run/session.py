"""A session on a testbed, the same on both substrates: the roles come up (or are
attached to) through the substrate (testbed/substrate.py, compose/substrate.py), and
from then on the runner reaches every role only through its agent.

The session offers what a campaign needs, each change made once: `ensure_profile(P)`
and `ensure_cc(C)` read back what is in force and apply only what differs (every apply
logged and kept in `applied`); `load(run)` reads the link's profile back before and
after the load, and a load that did not run on the profile asked for fails with the
reason; `check_link` measures the link against its profile.

    runner ──mgmt── agents: client (Firefox), terminal/satellite/gateway (satlink,
                            OpenSAND or netem), server (origin or OpenLiteSpeed)
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from clarke import profiles, tls
from clarke.agent.agents import Agents, Applied, LinkStopped
from clarke.browser.load import (
    ExpectedObject,
    LoadRequest,
    LoadResult,
    is_browser,
    is_http,
)
from clarke.campaign.cross import CrossTraffic
from clarke.campaign.model import SlotPhase
from clarke.campaign.plan import Run
from clarke.errors import ClarkeError, InputError, UnknownName, ValidationFailed
from clarke.pages import build as page_build
from clarke.pages.models import Registry, Units
from clarke.place.plan import Addresses
from clarke.results.connections import connection_rows
from clarke.results.record import Status
from clarke.roles import profile_digest
from clarke.run import captures, cross, linkcheck, timeline
from clarke.run.captures import CapturePolicy
from clarke.run.pep import pep_body, pep_metrics, pep_verdict
from clarke.run.verdicts import link_verdict, server_verdict
from clarke.schedules import Schedule
from clarke.schema import problems_of
from clarke.timing import Phases
from clarke.vocab import (
    BROWSERS,
    HTTP_VERSIONS,
    LINK_ROLES,
    PEP_NONE,
    PEP_ROLES,
    ROLES,
    CongestionControl,
    HttpVersion,
    StartAhead,
)

HOST = tls.DEFAULT_HOST
# How long before an aimed navigation the browser is asked for: a first Firefox also makes
# the profile template, every browser waits for its quiet (at most 3 s); a later start
# navigates late, and the record says at which phase it did.
NAVIGATION_LEAD_S = 8.0
LINK_CHECKS = {
    # samples: pings; duration/omit: seconds of iperf3 per direction and of slow start left out
    "full": {"samples": 20, "duration": 10, "omit": 4},
    "quick": {"samples": 10, "duration": 5, "omit": 2},
}


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
        *,
        engine: str,
        registry: Registry | None = None,
        units: Units = Units.si,
        firefox: str | None = None,
        window: tuple[int, int] = (1366, 768),
        timeout_s: float = 180.0,
        roles_only: bool = False,
        capture: CapturePolicy | None = None,
        slot_phase: SlotPhase | None = None,
        repetitions: int = 1,
        positions: dict[int, tuple[int, int]] | None = None,
        browser: str = "firefox",
    ) -> None:
        """`roles_only`: no pages, no client (the link and the server only); `capture`:
        which loads keep a capture, where (run/captures.py)."""
        self.substrate = substrate
        self.page_names = page_names
        self.registry, self.units = registry or Registry.default(), units
        self.engine, self.firefox, self.window = engine, firefox, window
        self.browser = browser  # a load's browser when its run names none
        self.start_ahead: StartAhead = "after-page"  # when the next browser starts (prestart)
        self.timeout_s = timeout_s
        self.roles_only = roles_only
        self.capture = capture
        self.slot_phase, self.repetitions = slot_phase, repetitions
        self.positions = positions or {}  # run index -> (k, n) in its profile: sweep
        self._schedules: dict[str, Schedule | None] = {}
        self.pages: dict[str, Any] = {}
        self.plan: Addresses | None = None
        self.agents: Agents | None = None
        self.profile: tuple[str, str] | None = None  # (name, sha256) the link should run
        self._counting_role: dict[str, str] = {}  # direction -> the link role counting it
        self.cross: cross.CrossTrafficDriver | None = None  # once a load asks for some

    # --- lifecycle -------------------------------------------------------------------
    def start(self, profile: str) -> Session:
        """Bring the roles up with `profile` on the link (or attach to them)."""
        try:
            self.plan = self.substrate.start(profile)
            roles = [r for r in ROLES if not (self.roles_only and r == "client")]
            self.agents = Agents(self.plan, roles, self.substrate.agent_token)
            self.agents.wait_ready()
            if not self.roles_only:
                self._check_browser()
                self._check_server_delays()
            if not self.roles_only:
                self.pages = page_build.build_named(
                    self.substrate.pages_dir, self.page_names, self.registry, self.units
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
        if not self.firefox:
            return
        running = str(self._agents().health.get("client", {}).get("firefox", ""))
        wanted = shutil.which(self.firefox) or self.firefox
        if running and os.path.realpath(running) != os.path.realpath(wanted):
            raise InputError(
                f"the client agent runs {running}, not {self.firefox}: the browser is fixed "
                "when the testbed's agents start (bring up a new testbed for another browser)"
            )

    def _check_server_delays(self) -> None:
        """Pages with server delays (docs/pages.md) only mean what they say on origin:
        another server would serve every object at once, and the load would silently
        measure a different page."""
        server = self._agents().implementations.get("server")
        if server == "origin":
            return
        held = [
            n
            for n in dict.fromkeys(self.page_names)
            if self.registry.page_by_name(n, self.units).server_delays
        ]
        if held:
            raise InputError(
                f"{', '.join(held)}: server delays (server_delays_ms, docs/pages.md) need "
                f"the origin server, which holds each response as asked; {server} would "
                "serve every object at once, and the load would measure another page"
            )

    def close(self) -> None:
        try:
            self.stop_cross()
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
        hop on `cc` with buffers for the link profile in force (run/pep.py)."""
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

    def quic_offers(self, cc: str) -> bool:
        offered = self._agents().quic_offered()
        return offered is None or CongestionControl(cc).quic in offered

    # --- one load --------------------------------------------------------------------
    def request(
        self,
        page: str,
        http: str,
        connections: int,
        prefs: Mapping[str, bool | int] | None = None,
        capture_max_bytes: int = 0,
        browser: str | None = None,
    ) -> LoadRequest:
        if not is_http(http):
            raise InputError(f"{http!r} is not an HTTP version ({', '.join(HTTP_VERSIONS)})")
        browser = browser or self.browser
        if not is_browser(browser):
            raise UnknownName("browser", browser, list(BROWSERS))
        entry = self.pages[page]
        try:
            return LoadRequest(
                url=f"https://{HOST}/{entry['path']}",
                http=http,
                browser=browser,
                connections=connections,
                window=self.window,
                timeout_s=self.timeout_s,
                expected_objects=[
                    ExpectedObject(path=o["path"], bytes=o["bytes"]) for o in entry["objects"]
                ],
                lcp_candidates=entry["lcp_candidates"],
                prefs=dict(prefs or {}),
                capture_max_bytes=capture_max_bytes,
            )
        except ValidationError as e:  # what the browser cannot honour, named
            raise ValidationFailed("load request", problems_of(e)) from None

    def load(
        self, run: Run, attempt: int = 1, next_run: Run | None = None
    ) -> tuple[LoadResult, dict[str, Any]]:
        """`run`'s load; the client may start `next_run`'s browser ahead (prestart)."""
        schedule = self._schedule()
        aim = None
        if self.slot_phase is not None and schedule is not None and schedule.slot_s:
            aim = self.slot_phase.phase_s(
                schedule.slot_s,
                run.repetition,
                self.repetitions,
                self.positions.get(run.index, (0, 1)),
            )
        self.ensure_cross(run.cross, run.page)
        self.ensure_pep(run.pep, run.cc)
        return self.load_page(
            run.page,
            run.http,
            run.cc,
            run.connections,
            capture_label=f"{run.run_id}-a{attempt}",
            slot_phase_s=aim,
            pep=run.pep,
            browser=run.browser,
            next_load=None
            if next_run is None
            else self.request(
                next_run.page, next_run.http, next_run.connections, None, 0, next_run.browser
            ),
        )

    def _link_failure(self) -> str:
        """Why the load does not count as a load on `self.profile`, or ""; LinkStopped
        when the link no longer answers."""
        view = self._agents().link()
        if self.profile is None:
            return "no link profile was applied in this session"
        return link_verdict(*self.profile, view.states)

    def load_page(
        self,
        page: str,
        http: str,
        cc: str,
        connections: int,
        prefs: Mapping[str, bool | int] | None = None,
        capture_label: str = "load",
        slot_phase_s: float | None = None,
        pep: str = PEP_NONE,
        browser: str | None = None,
        next_load: LoadRequest | None = None,
    ) -> tuple[LoadResult, dict[str, Any]]:
        """One verified load; with the session's capture policy, the load's capture is
        written under `capture_label` (details["capture"] says what was kept). `pep`:
        the PEP the stations must run (ensure_pep puts it in force), verified; `browser`:
        the session's when None."""
        agents = self._agents()
        browser = browser or self.browser
        details: dict[str, Any] = {"substrate": self.substrate.name, "pep": {"name": pep}}
        if self.profile is not None:
            details["link"] = {"profile": self.profile[0], "profile_sha256": self.profile[1]}
        if HttpVersion(http) is HttpVersion.h3 and not self.quic_offers(cc):
            offered = ", ".join(sorted(agents.quic_offered() or ()))
            reason = (
                f"the server ({self.implementations.get('server')}) has no "
                f"{CongestionControl(cc).quic} for QUIC (it offers {offered}): not loaded"
            )
            return LoadResult.failed(self.engine, reason, browser=browser), details
        t = Phases()
        with t.phase("link_before"):
            failure = self._link_failure()
        if failure:
            return LoadResult.failed(self.engine, failure, browser=browser), details
        capture = self.capture if self.capture and self.capture.active else None
        req = self.request(
            page, http, connections, prefs, capture.max_bytes if capture else 0, browser
        )
        if next_load is not None and not capture:
            req = req.model_copy(
                update={"next_load": next_load.settings(), "start_ahead": self.start_ahead}
            )
        with t.phase("reset_stats"):
            agents["server"].reset_stats()
            for role in LINK_ROLES:
                agents[role].reset_stats()
            if self.substrate.name == "netns":
                for role in PEP_ROLES:
                    agents[role].pep_reset_stats()
        if capture:
            with t.phase("capture_start"):
                agents[captures.AT_ROLE].capture_start(capture.max_bytes)
        if slot_phase_s is not None:
            with t.phase("aim"):  # the client waits briefly (browser start): the rest here
                at = self._navigate_at(slot_phase_s)
                if at is not None:
                    time.sleep(max(0.0, at / 1000 - time.time() - NAVIGATION_LEAD_S - 5))
                req = req.model_copy(update={"navigate_at_unix_ms": at})
            details["aimed_slot_phase_s"] = slot_phase_s
        link_capture: dict[str, Any] | None = None
        crossing = self.cross.before_load() if self.cross else None
        try:
            with t.phase("client"):
                raw = agents["client"].load(
                    req.model_dump(mode="json"), self.engine, timeout=self.timeout_s + 120
                )
        except ClarkeError:
            self._link_failure()  # LinkStopped says so when the link is why
            raise
        finally:
            if capture:
                with t.phase("capture_stop"):
                    link_capture = self._stop_capture()
        result = LoadResult.model_validate(raw)
        cross_failure = ""
        if crossing is not None and self.cross is not None:
            details["cross_traffic"], cross_failure = self.cross.after_load(crossing)
        with t.phase("link_after"):
            failure = self._link_failure()  # LinkStopped when the link died during the load
        with t.phase("server_stats"):
            server = agents["server"].stats()
        entry = self.pages[page]
        details |= server_verdict(
            server, http, cc, entry["total_bytes"], 1 + len(entry["objects"]), connections
        )
        with t.phase("link_stats"):
            asked_unix_ms = time.time() * 1000
            details["link_stats"] = {role: agents[role].stats() for role in LINK_ROLES}
        origin = (result.raw or {}).get("timeOrigin")
        metrics, details["timeline"] = timeline.link_metrics(
            details["link_stats"],
            entry["total_bytes"],
            crossing is not None,
            asked_unix_ms,
            float(origin) if isinstance(origin, int | float) else None,
            self._schedule(),
        )
        details["metrics"] |= metrics
        if self.substrate.name == "netns":
            with t.phase("pep_stats"):
                stations = {role: agents[role].pep_stats() for role in PEP_ROLES}
            details["pep"]["stations"] = stations
            details["metrics"] |= pep_metrics(stations) if pep != PEP_NONE else {}
            assert self.plan is not None and self.profile is not None
            asked = details["pep"]["settings"] = pep_body(pep, cc, profiles.read(self.profile[0]))
            details["failure"] = details.get("failure") or pep_verdict(
                pep, http, details["server_connections"], stations, self.plan, asked
            )
        elif pep != PEP_NONE:
            details["failure"] = details.get("failure") or f"PEP {pep}: the stations host no PEP"
        details["per_connection"], concurrency = connection_rows(
            details["server_connections"], result.raw or {}
        )
        details["metrics"] |= concurrency
        details["metrics"] |= cross.metrics_of(details.get("cross_traffic") or {})
        failure = failure or details.get("failure", "") or cross_failure
        if result.status is Status.ok and failure:
            result = result.model_copy(update={"status": Status.failed, "reason": failure})
        if capture:
            problems = [] if link_capture else ["no pcap: the terminal's capture did not answer"]
            with t.phase("capture_write"):
                details["capture"] = captures.write(
                    capture,
                    capture_label,
                    result.status is Status.ok,
                    link_capture,
                    result.captured,
                    problems,
                )
        # The client's own phases are inside "client"; the rest is the agent's round trip.
        details["phases_ms"] = {"runner": t.ms, "client": result.phases_ms}
        details |= {
            k: v
            for k, v in [("browser_profile", result.profile), ("browser_started", result.started)]
            if v
        }
        return result.model_copy(update={"captured": None}), details

    def _navigate_at(self, phase_s: float) -> float | None:
        """When to navigate (Unix ms): run/timeline.navigate_at."""
        asked = time.time() * 1000
        state = (self._agents()["gateway"].stats().get("forward") or {}).get("schedule") or {}
        return timeline.navigate_at(self._schedule(), state, asked, phase_s, NAVIGATION_LEAD_S)

    def _schedule(self) -> Schedule | None:
        """The schedule of the profile in force, if it has one."""
        if self.profile is None:
            return None
        name = self.profile[0]
        if name not in self._schedules:  # read once: up to three times a load otherwise
            self._schedules[name] = profiles.read(name).schedule
        return self._schedules[name]

    def _stop_capture(self) -> dict[str, Any] | None:
        """The terminal's packets; None (logged in the record) when it cannot say."""
        try:
            return self._agents()[captures.AT_ROLE].capture_stop()
        except ClarkeError:
            return None

    # --- the link as it is -------------------------------------------------------------
    def link_bytes(self, direction: str) -> linkcheck.Counted | None:
        """IP bytes the link carried in `direction` since the last reset, from the link
        agent that counts them (`bytes_onto_link`: satlink and netem count at the
        sending station, OpenSAND at the receiving station's TAP), with the time it
        counted them on its own clock where it says (`counted_at_s`); None where none
        counts."""
        agents = self._agents()
        known = self._counting_role.get(direction)
        for role in (known,) if known else LINK_ROLES:
            try:
                stats = agents[role].stats()
            except ClarkeError:
                continue
            value = (stats.get("bytes_onto_link") or {}).get(direction)
            if isinstance(value, int | float):
                # One agent request per sample from now on.
                self._counting_role[direction] = role
                at = stats.get("counted_at_s")
                return (int(value), float(at)) if isinstance(at, int | float) else int(value)
        return None

    def probe(self) -> linkcheck.Probe:
        assert self.plan is not None
        agents = self._agents()

        def reset() -> None:
            for role in LINK_ROLES:
                agents[role].reset_stats()

        return linkcheck.Probe(
            addresses=self.plan,
            at_client=self.substrate.at_client,
            link_bytes=self.link_bytes,
            reset_link=reset,
            link_stats=lambda: {role: agents[role].stats() for role in LINK_ROLES},
        )

    def measure_link(
        self,
        profile_name: str,
        samples: int = 20,
        duration: float = 10,
        omit: float = 4,
        label: int | str | None = None,
    ) -> linkcheck.Report:
        """Measure the link as it is now (ping, iperf3 each way) against a profile."""
        return linkcheck.check_link(
            self.probe(),
            self.substrate.name if label is None else label,
            profile_name,
            profiles.read(profile_name),
            self.implementations.get("link", ""),
            samples=samples,
            duration=duration,
            omit=omit,
        )

    def check_link(self, profile_name: str, phase: str, level: str = "full") -> dict[str, Any]:
        """The link check of a campaign: `profile_name` on the link (applied if it is not
        in force), measured; a record for meta.json."""
        self.ensure_profile(profile_name)
        if self.substrate.name == "netns":
            self.ensure_pep(PEP_NONE, "cubic")  # the link's own figures: TCP not split
        prof = profiles.read(profile_name)
        self.stop_cross()  # the link is measured alone
        report = self.measure_link(profile_name, **LINK_CHECKS[level])
        ping = report.ping
        fwd, ret = report.throughput.get("forward", {}), report.throughput.get("return", {})
        return {
            "phase": phase,
            "profile": profile_name,
            "profile_sha256": profile_digest(prof),
            "link": self.implementations.get("link", ""),
            "substrate": self.substrate.name,
            "passed": report.ok,
            "time_ns": int(dt.datetime.now(dt.UTC).timestamp() * 1e9),
            "rtt_mean_ms": ping.get("mean"),
            "rtt_stdev_ms": ping.get("stdev"),
            "rtt_p50_ms": ping.get("p50"),
            "rtt_p99_ms": ping.get("p99"),
            "rtt_max_ms": ping.get("max"),
            "rtt_expected_ms": linkcheck.expected_rtt_ms(prof),
            "forward_mbps": (fwd.get("rate_bps") or 0) / 1e6,
            "return_mbps": (ret.get("rate_bps") or 0) / 1e6,
            "forward_expected_mbps": prof.forward.rate_mbps,
            "return_expected_mbps": prof.return_.rate_mbps,
            "rate_from": {d: t.get("rate_from") for d, t in report.throughput.items()},
            "rate_method": {d: t.get("rate_method") for d, t in report.throughput.items()},
            "checks": [asdict(c) for c in report.checks],
        }


__all__ = ["LINK_CHECKS", "LinkStopped", "Session", "Substrate"]
