"""The campaign file, as typed models. See docs/campaigns.md for the format."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    create_model,
    model_validator,
)

from clarke.campaign import dimensions
from clarke.campaign.cross import CrossKind
from clarke.campaign.dimensions import (
    BROWSER,
    CONNECTIONS,
    CROSS_TRAFFIC,
    DNS_CACHE,
    HTTP,
    MODEL,
    NO_PAGE,
    SITE,
    SITE_NONE,
    SIZE,
    ConnectionsPerServer,
    Dimension,
    HttpVersionField,
    Name,
    site_label,
)
from clarke.schema import FORM, StrictModel
from clarke.sequential import MAX_HORIZON, StoppingRule, first_bounded
from clarke.vocab import (
    LOADS_PER_BROWSER,
    MAX_LOADS_PER_BROWSER,
    Engine,
    Isolation,
    PrioritySignals,
    StartAhead,
    signals_refused,
)
from clarke.vocab import Browser as BrowserName

V = TypeVar("V")


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


# Chromium's fixed limit for HTTP/1.1 (browser/load.py's CHROMIUM_CONNECTIONS).
CHROMIUM_CONNECTIONS_PER_SERVER = 6


class MatrixAxes(StrictModel):
    """What every matrix offers; its fields are the dimensions' axes (one each,
    under the dimension's key: clarke.campaign.dimensions)."""

    def axis(self, dimension: Dimension[V]) -> list[V] | None:
        """The values the matrix lists for `dimension`; None where it gives none (a
        dimension with a default then takes it)."""
        values: list[V] | None = getattr(self, dimension.key)
        return values


def _axis_field(d: Dimension[Any]) -> tuple[Any, Any]:
    # The axis's type is built at run time from the declaration: pydantic reads it.
    item = cast(Any, Axis)[d.item]
    if d.required:
        return (item, Field(description=d.help))
    return (item | None, Field(default=None, description=d.help))


if TYPE_CHECKING:
    Matrix = MatrixAxes
else:
    # One axis per dimension: a required one for the dimensions a campaign must give, an
    # optional one (None: the dimension's default) for the others.
    Matrix = create_model(
        "Matrix",
        __base__=MatrixAxes,
        __module__=__name__,
        **{d.key: _axis_field(d) for d in dimensions.seal()},
    )


class Scenario(StrictModel):
    name: Name
    description: str = ""
    matrix: Matrix
    # More loads for this scenario's cells than the campaign's fixed `repetitions`: for
    # the cells whose spread needs them (campaigns/nightly.yaml). A cell that several
    # scenarios list gets the most any of them asks.
    repetitions: int | None = Field(default=None, ge=1, le=10_000)


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
    # How each load's browser state is made new: a new browser and profile per load, or
    # a new isolated context in a running browser (browser/contexts.py,
    # docs/running.md "Isolation"); either way every load's isolation is verified.
    isolation: Isolation = Isolation.profile
    # With context isolation: a new browser after this many loads (and after any failed
    # load, and whenever a load asks its browser for other settings).
    loads_per_browser: Annotated[int, Field(ge=1, le=MAX_LOADS_PER_BROWSER)] = LOADS_PER_BROWSER
    # The HTTP priority signals the browser sends (docs/scheduling.md): its own, or
    # Firefox's with the Priority header and PRIORITY_UPDATE off, or its RFC 7540 tree.
    priority_signals: PrioritySignals = "default"

    @model_validator(mode="after")
    def _start_ahead_with_selenium(self) -> Browser:
        if self.start_ahead != "after-page" and self.engine is not Engine.selenium:
            raise ValueError(
                f"start_ahead {self.start_ahead} needs engine selenium (Browsertime starts "
                "each load's browser itself)"
            )
        if self.isolation is Isolation.context and self.engine is not Engine.selenium:
            raise ValueError(
                f"isolation {Isolation.context} needs engine selenium: Browsertime starts "
                "and quits its browser in every run, so it cannot keep one between loads"
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
    directory (clarke.run.implementations.several), for the cross-implementation table."""

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


def _percent(v: Any) -> Any:
    """`2%` (or `2 %`) as 0.02; a number as given (a share)."""
    if isinstance(v, str) and v.strip().endswith("%"):
        try:
            return float(v.strip()[:-1]) / 100
        except ValueError:
            return v
    return v


Share = Annotated[float, BeforeValidator(_percent), Field(allow_inf_nan=False)]


class StopMetric(StrEnum):
    """The metric a sequential cell's interval is about (the record's `<name>_ms`)."""

    plt = "plt"
    fcp = "fcp"
    lcp = "lcp"

    @property
    def record_metric(self) -> str:
        return f"{self.value}_ms"


class Until(StrictModel):
    """When a cell has enough loads: its interval for the median of `metric` (valid
    under optional stopping: clarke.sequential) reaches no further than `half_width`
    from the median."""

    metric: StopMetric = StopMetric.plt
    half_width: Share = Field(gt=0, lt=1, description="e.g. 2% of the median")
    confidence: Share = Field(default=0.95, ge=0.5, le=0.999, description="e.g. 95%")


class SequentialRepetitions(StrictModel):
    """Repetitions that stop when the answer is known (docs/campaigns.md): every cell
    gets at least `min` successful loads and at most `max` runs, interleaved as the
    order says, and stops as soon as its interval is as narrow as `until` asks."""

    min: int = Field(default=3, ge=1, le=MAX_HORIZON)
    max: int = Field(ge=2, le=MAX_HORIZON)
    until: Until

    @model_validator(mode="after")
    def _can_stop_early(self) -> SequentialRepetitions:
        if self.min > self.max:
            raise ValueError(f"min {self.min} is more than max {self.max}")
        first = first_bounded(self.until.confidence, self.max)
        if first is None or first >= self.max:
            hint = first_bounded(self.until.confidence, 30)
            raise ValueError(
                f"max {self.max}: no load count up to {self.max} has a "
                f"{100 * self.until.confidence:g} % interval for the median that holds under "
                f"optional stopping, so no cell could stop early (docs/campaigns.md); raise "
                f"max (with 30 the first interval is at {hint} loads) or give a fixed number"
            )
        return self

    def describe(self) -> str:
        """What the rule does, in one sentence for people."""
        u = self.until
        earliest = self.rule.earliest
        return (
            f"up to {self.max} repetitions, each cell until the {u.confidence:.0%} interval "
            f"for its {u.metric.value.upper()} median is within ±{100 * u.half_width:g} % of "
            f"it (sequential; at {earliest} successful loads at the earliest, min {self.min})"
        )

    @property
    def rule(self) -> StoppingRule:
        return StoppingRule(
            self.until.metric.record_metric,
            self.until.half_width,
            self.min,
            self.max,
            self.until.confidence,
        )


FIXED, SEQUENTIAL = f"{FORM}fixed", f"{FORM}sequential"


class Campaign(StrictModel):
    name: Name
    description: str = ""
    matrix: Matrix | None = None
    scenarios: Annotated[list[Scenario], Field(min_length=1)] | None = None
    # A fixed number per cell, or sequential (a cell stops when its interval is tight):
    # a mapping is read as sequential, anything else as a number, so that an error names
    # the fields of the form meant.
    repetitions: Annotated[
        Annotated[int, Field(ge=1, le=10_000), Tag(FIXED)]
        | Annotated[SequentialRepetitions, Tag(SEQUENTIAL)],
        Discriminator(lambda v: SEQUENTIAL if isinstance(v, dict | BaseModel) else FIXED),
    ]
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
            self._scenario_repetitions_fit()
        if self.slot_phase is not None and self.browser.engine is not Engine.selenium:
            raise ValueError(
                "slot_phase needs browser.engine selenium (Browsertime navigates as soon as "
                "its browser is up)"
            )
        return self

    @model_validator(mode="after")
    def _pages_or_sites(self) -> Campaign:
        """A matrix loads the generated pages (site none, the default: it gives models
        and sizes) or recorded sites (their cells have no page model or size), or both."""
        problems: list[str] = []
        for _, prefix, m in self.matrices():
            generated = SITE_NONE in (m.axis(SITE) or [SITE_NONE])
            for d in (MODEL, SIZE):
                given = m.axis(d)
                if generated and not given:
                    problems.append(
                        f"{prefix}.{d.key}: required for the generated pages ({prefix}."
                        f"{SITE.key} absent or listing {SITE_NONE})"
                    )
                elif given and not generated:
                    problems.append(
                        f"{prefix}.{d.key}: every cell of this matrix replays a recorded site "
                        f"(its {SITE.key} do not list {SITE_NONE}), which is its own page: "
                        f"leave {d.key} out, or list {SITE_NONE} among the {SITE.key} to load "
                        "the generated pages too"
                    )
                elif given and NO_PAGE in given:
                    problems.append(f"{prefix}.{d.key}: {NO_PAGE!r} is no page {d.name}")
            sites = set(m.axis(SITE) or [SITE_NONE]) - {SITE_NONE}
            web = [c for c in m.axis(CROSS_TRAFFIC) or [] if c.name is CrossKind.web]
            if sites and web:
                problems.append(
                    f"{prefix}.{CROSS_TRAFFIC.key}: web cross traffic fetches the cell's "
                    f"generated page beside the load, and a recorded site's cell has none "
                    f"({prefix}.{SITE.key}: {', '.join(sorted(sites))}): give those cells "
                    "other cross traffic (a scenario of their own), or load only the "
                    "generated pages with web"
                )
            if m.axis(DNS_CACHE) and set(m.axis(SITE) or [SITE_NONE]) == {SITE_NONE}:
                problems.append(
                    f"{prefix}.{DNS_CACHE.key}: only a recorded site's loads look names up, "
                    f"and this matrix lists no site ({prefix}.{SITE.key})"
                )
        labels: dict[str, str] = {}
        for site in self.values(SITE):
            if site == SITE_NONE:
                continue
            other = labels.setdefault(site_label(site), site)
            if other != site:
                problems.append(
                    f"{SITE.key}: {other!r} and {site!r} have one directory name, "
                    f"{site_label(site)!r}, which is each one's part of the run ids"
                )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _what_chromium_honours(self) -> Campaign:
        problems = [p for _, prefix, m in self.matrices() for p in self._chromium(prefix, m)]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _what_the_signals_need(self) -> Campaign:
        signals = self.browser.priority_signals
        problems = {
            f"browser.priority_signals: {why} (in {prefix})"
            for _, prefix, m in self.matrices()
            for http in m.axis(HTTP) or []
            for browser in m.axis(BROWSER) or [BROWSER.default_for({}, self.browser)]
            if (why := signals_refused(signals, http, browser))
        }
        if problems:
            raise ValueError("; ".join(sorted(problems)))
        return self

    def _chromium(self, prefix: str, m: Matrix) -> list[str]:
        """What Chromium, in a matrix's browser axis, cannot do as asked."""
        if BrowserName.chromium not in (m.axis(BROWSER) or []):
            return []
        fixed = CHROMIUM_CONNECTIONS_PER_SERVER
        why = f"Chromium opens {fixed} connections per server and has no setting for it"
        connections = m.axis(CONNECTIONS)
        if connections:
            wrong = [n for n in connections if n != fixed]
            key = f"{prefix}.{CONNECTIONS.key}"
            return [f"{key}: {wrong} with browser chromium: {why}"] if wrong else []
        out = []
        for http in m.axis(HTTP) or []:
            n = self.browser.connections_for(http.value)
            if n != fixed:
                out.append(
                    f"browser.connections_per_server: {n} for HTTP/{http.value} with "
                    f"{prefix}.{BROWSER.key} chromium: {why} (give {fixed})"
                )
        return out

    def _scenario_repetitions_fit(self) -> None:
        assert self.scenarios is not None
        given = [(i, s.repetitions) for i, s in enumerate(self.scenarios) if s.repetitions]
        if not given:
            return
        where = f"scenarios[{given[0][0]}].repetitions"
        if not isinstance(self.repetitions, int):
            raise ValueError(
                f"{where}: a scenario's own repetitions need a fixed number of `repetitions` "
                "for the campaign (a sequential rule decides per cell when to stop)"
            )
        for k, fewer in given:
            if fewer < self.repetitions:
                raise ValueError(
                    f"scenarios[{k}].repetitions: {fewer} is fewer than the campaign's "
                    f"{self.repetitions}; a scenario may only ask for more"
                )
        if self.slot_phase is not None:
            raise ValueError(
                f"{where}: slot_phase spreads every cell's repetitions over the slot, so its "
                "cells need one number of repetitions"
            )

    def repetitions_of(self, scenarios: list[str]) -> int:
        """Runs in the plan for a cell that these scenarios list: the campaign's, or the
        most a scenario of them asks for."""
        own = [
            s.repetitions
            for s in self.scenarios or ()
            if s.name in scenarios and s.repetitions is not None
        ]
        return max([self.planned_repetitions, *own])

    @property
    def planned_repetitions(self) -> int:
        """Runs per cell in the plan: the fixed number, or a sequential rule's max."""
        r = self.repetitions
        return r.max if isinstance(r, SequentialRepetitions) else r

    @property
    def stopping(self) -> StoppingRule | None:
        """The sequential repetitions' stopping rule; None for fixed repetitions."""
        r = self.repetitions
        return r.rule if isinstance(r, SequentialRepetitions) else None

    def varies(self, dimension: Dimension[Any]) -> bool:
        """Whether a matrix gives the dimension's axis (run ids then carry it)."""
        return any(m.axis(dimension) for _, _, m in self.matrices())

    def values(self, dimension: Dimension[V]) -> list[V]:
        """Every value a matrix lists for the dimension, in order, once each."""
        seen = [v for _, _, m in self.matrices() for v in m.axis(dimension) or []]
        return list(dict.fromkeys(seen))

    def matrices(self) -> list[tuple[str, str, Matrix]]:
        """(scenario name, field path prefix, matrix) for each matrix in the file."""
        if self.matrix is not None:
            return [("main", "matrix", self.matrix)]
        assert self.scenarios is not None
        return [(s.name, f"scenarios[{i}].matrix", s.matrix) for i, s in enumerate(self.scenarios)]
