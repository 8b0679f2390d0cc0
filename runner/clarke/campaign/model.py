"""The campaign file, as typed models. See docs/campaigns.md for the format."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, model_validator

from clarke.campaign.cross import CrossTrafficEntry
from clarke.schema import StrictModel
from clarke.vocab import Browser as BrowserName
from clarke.vocab import CongestionControl, Engine, HttpVersion, StartAhead


def _http_version(v: Any) -> Any:
    """YAML reads `1.1` as a float and `2` as an int; accept them as the version strings."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float):
        return {1.1: "1.1", 2: "2", 3: "3"}.get(v, str(v))
    return v


HttpVersionField = Annotated[HttpVersion, BeforeValidator(_http_version)]
Name = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=64)]


def _unique(values: list[Any]) -> list[Any]:
    dupes = sorted({str(v) for v in values if values.count(v) > 1})
    if dupes:
        raise ValueError(f"listed more than once: {', '.join(dupes)}")
    return values


def _listify(v: Any) -> Any:
    return v if isinstance(v, list) else [v]


T = TypeVar("T")
# One axis of the matrix: a non-empty list, or a single value read as a list of one.
Axis = Annotated[list[T], Field(min_length=1), BeforeValidator(_listify), AfterValidator(_unique)]


ConnectionsPerServer = Annotated[int, Field(ge=1, le=256)]
# Chromium's fixed limit for HTTP/1.1 (browser/load.py's CHROMIUM_CONNECTIONS).
CHROMIUM_CONNECTIONS_PER_SERVER = 6


class Matrix(StrictModel):
    profiles: Axis[Name]
    http: Axis[HttpVersionField]
    cc: Axis[CongestionControl]
    models: Axis[Name]
    sizes: Axis[Name]
    # Connections per server as a dimension (the connection studies [C], [K]); without
    # it, browser.connections_per_server decides per HTTP version.
    connections: Axis[ConnectionsPerServer] | None = None
    # What else crosses the link during the load (campaign/cross.py); without it, nothing.
    cross_traffic: Axis[CrossTrafficEntry] | None = None
    # A performance-enhancing proxy at terminal and gateway as a dimension: "none" or a
    # PEP of the registry (checked there: clarke.registry.check_names); without it,
    # every run is without one.
    pep: Axis[Name] | None = None
    # The browser as a dimension; without it, every load is Firefox's.
    browser: Axis[BrowserName] | None = None


class Scenario(StrictModel):
    name: Name
    description: str = ""
    matrix: Matrix


class Order(StrEnum):
    listed = "listed"
    shuffled = "shuffled"


class Cache(StrEnum):
    cold = "cold"  # a fresh profile per load: no cache, no DNS, no connection reuse


class Browser(StrictModel):
    engine: Engine = Engine.selenium
    binary: str | None = Field(
        default=None, description="firefox-nightly, firefox, firefox-esr or a path"
    )
    connections_per_server: ConnectionsPerServer | dict[HttpVersionField, ConnectionsPerServer] = 6
    cache: Cache = Cache.cold
    window: tuple[
        Annotated[int, Field(ge=1280, le=16384)], Annotated[int, Field(ge=720, le=16384)]
    ] = (1366, 768)
    # When the next load's browser starts (Selenium's Firefox): once this page is
    # measured, or during it at idle priority (browser/prestart.py, docs/running.md).
    start_ahead: StartAhead = "after-page"

    @model_validator(mode="after")
    def _start_ahead_with_selenium(self) -> Browser:
        if self.start_ahead != "after-page" and self.engine is not Engine.selenium:
            raise ValueError(
                f"start_ahead {self.start_ahead} needs engine selenium (Browsertime starts "
                "each load's browser itself)"
            )
        return self

    def connections_for(self, http: str) -> int:
        c = self.connections_per_server
        if isinstance(c, int):
            return c
        by_version = {str(k.value): v for k, v in c.items()}
        return by_version.get(http, 6)


class Pages(StrictModel):
    units: Annotated[str, Field(pattern="^(si|binary)$")] = "si"
    models_file: str | None = Field(
        default=None, description="extra page models, relative to the campaign file"
    )


ImplementationNames = Annotated[
    list[Name], Field(min_length=1, max_length=8), BeforeValidator(_listify)
]


class Implementations(StrictModel):
    """Which implementation fills each role (names from clarke.registry, checked against
    it before anything runs; `clarke run --link/--server` override them). A list runs
    the whole campaign once per combination of link and server, each in its own results
    directory (clarke.run.implementations), for the cross-implementation table."""

    link: ImplementationNames | None = Field(
        default=None, description="satlink, opensand or netem, or a list of them"
    )
    server: ImplementationNames | None = Field(
        default=None, description="origin or openlitespeed, or a list of them"
    )

    @model_validator(mode="after")
    def _no_duplicates(self) -> Implementations:
        for kind in ("link", "server"):
            names = getattr(self, kind)
            if names:
                _unique(names)
        return self

    def combinations(
        self, link: str | None = None, server: str | None = None
    ) -> list[tuple[str | None, str | None]]:
        """(link, server) for every combination asked for, links first: an option given
        replaces the campaign's list; None means the registry's default."""
        links: list[str | None] = [link] if link else [None]
        servers: list[str | None] = [server] if server else [None]
        if not link and self.link:
            links = [*self.link]
        if not server and self.server:
            servers = [*self.server]
        return [(lk, sv) for lk in links for sv in servers]


class PhaseMode(StrEnum):
    fixed = "fixed"  # every load navigates at slot phase at_s
    spread = "spread"  # a cell's repetitions spread evenly over the slot
    sweep = "sweep"  # a profile's loads, in plan order, each at the next of evenly spaced phases


class SlotPhase(StrictModel):
    """Where in the link schedule's reconfiguration slot (slot_s) each load starts
    navigating, for profiles whose schedule has slots (docs/schedules.md)."""

    mode: PhaseMode
    at_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _at_with_fixed(self) -> SlotPhase:
        if (self.mode is PhaseMode.fixed) != (self.at_s is not None):
            raise ValueError("at_s is given with mode fixed, and only then")
        return self

    def phase_s(
        self, slot_s: float, repetition: int, repetitions: int, position: tuple[int, int] = (0, 1)
    ) -> float:
        """The phase a load aims at: `position` is (k, n), the load's place among the n
        runs of its profile in the plan (sweep only)."""
        if self.mode is PhaseMode.fixed:
            assert self.at_s is not None
            return self.at_s % slot_s
        if self.mode is PhaseMode.sweep:
            k, n = position
            return slot_s * (k + 0.5) / n
        return slot_s * (repetition - 0.5) / repetitions


class Campaign(StrictModel):
    name: Name
    description: str = ""
    matrix: Matrix | None = None
    scenarios: Annotated[list[Scenario], Field(min_length=1)] | None = None
    repetitions: int = Field(ge=1, le=10_000)
    order: Order = Order.listed
    seed: int | None = Field(default=None, ge=0)
    retries: int = Field(default=2, ge=0, le=10)
    browser: Browser = Browser()
    pages: Pages = Pages()
    implementations: Implementations = Implementations()
    slot_phase: SlotPhase | None = None

    @model_validator(mode="after")
    def _one_matrix_form(self) -> Campaign:
        if (self.matrix is None) == (self.scenarios is None):
            raise ValueError("give exactly one of `matrix` or `scenarios`")
        if self.scenarios:
            _unique([s.name for s in self.scenarios])
        if self.slot_phase is not None and self.browser.engine is not Engine.selenium:
            raise ValueError(
                "slot_phase needs browser.engine selenium (Browsertime navigates as soon as "
                "its browser is up)"
            )
        return self

    @model_validator(mode="after")
    def _what_chromium_honours(self) -> Campaign:
        problems = [p for _, prefix, m in self.matrices() for p in self._chromium(prefix, m)]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _chromium(self, prefix: str, m: Matrix) -> list[str]:
        """What Chromium, in a matrix's browser axis, cannot do as asked."""
        if BrowserName.chromium not in (m.browser or []):
            return []
        fixed = CHROMIUM_CONNECTIONS_PER_SERVER
        why = f"Chromium opens {fixed} connections per server and has no setting for it"
        if m.connections:
            wrong = [n for n in m.connections if n != fixed]
            return [f"{prefix}.connections: {wrong} with browser chromium: {why}"] if wrong else []
        out = []
        for http in m.http:
            n = self.browser.connections_for(http.value)
            if n != fixed:
                out.append(
                    f"browser.connections_per_server: {n} for HTTP/{http.value} with "
                    f"{prefix}.browser chromium: {why} (give {fixed})"
                )
        return out

    @property
    def varies_browser(self) -> bool:
        """Whether a matrix has the browser axis (run ids then carry it)."""
        return any(m.browser for _, _, m in self.matrices())

    @property
    def varies_connections(self) -> bool:
        """Whether a matrix has the connections axis (run ids then carry it)."""
        return any(m.connections for _, _, m in self.matrices())

    @property
    def varies_cross_traffic(self) -> bool:
        """Whether a matrix has the cross_traffic axis (run ids then carry it)."""
        return any(m.cross_traffic for _, _, m in self.matrices())

    @property
    def varies_pep(self) -> bool:
        """Whether a matrix has the pep axis (run ids then carry it)."""
        return any(m.pep for _, _, m in self.matrices())

    def matrices(self) -> list[tuple[str, str, Matrix]]:
        """(scenario name, field path prefix, matrix) for each matrix in the file."""
        if self.matrix is not None:
            return [("main", "matrix", self.matrix)]
        assert self.scenarios is not None
        return [(s.name, f"scenarios[{i}].matrix", s.matrix) for i, s in enumerate(self.scenarios)]
