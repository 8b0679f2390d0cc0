"""The run matrix's dimensions, each declared once.

A dimension is what a campaign may vary from one run to the next: the link profile, the
HTTP version, the congestion control, the page (a recorded site and where its lookups
may be cached, or a generated page's model and size), the connections per server, the
cross traffic, the PEP, the browser, the server's stream scheduler. Each is one
`Dimension` below: its campaign key and vocabulary (typed, from `vocab.py`, or names
of shipped data), its default, its part of the run id, its record field (also its
InfluxDB tag and its column in summaries and exports), its label for people and its part
in a figure's legend.
Everything else is derived from `DIMENSIONS`, in this order:

    campaign/model.py     Matrix: one axis per dimension (its key, its item type)
    campaign/plan.py      the expansion into runs, the run id, Run.cell
    results/record.py     RunRecord.cell: one field per dimension in the journal
    results/influx.py     one tag per dimension
    results/summary.py    cells, summary tables, compare, exports, report columns
    report/figures.py     series labels (Dimension.legend)

A cell (`Cell`) holds one value per dimension, read by dimension: `cell[HTTP]` is an
`HttpVersion`, never a value found by its position. How a run puts a dimension's value
in force on the testbed is the run layer's part (clarke.run.loop.apply): the data
here says what the value is, not how a testbed applies it.

A dimension declared elsewhere (a plug-in, a test) is added with `declare()` before any
of the models above is built; `seal()`, called as they are built, makes a later
declaration an error instead of a dimension missing from half of Clarke."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import total_ordering
from pathlib import PurePosixPath
from typing import Annotated, Any, cast

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

from clarke import link_points, pep_presets
from clarke.campaign.cross import NO_CROSS_TRAFFIC, CrossTraffic, CrossTrafficEntry
from clarke.campaign.dimension import (
    NO_BROWSER_SETTINGS,
    BrowserSettings,
    Dimension,
    ServerSetting,
    Shown,
    V,
    fixed,
)
from clarke.campaign.initial_window import (
    IW_DEFAULT,
    IW_FIELD,
    QUIC_DATAGRAM_BYTES,
    InitialWindowValue,
    in_force,
)
from clarke.ids import ID_RE
from clarke.json_value import JsonObject
from clarke.link_points import PROFILE_OWN
from clarke.vocab import PEP_NONE, Browser, CongestionControl, DnsCache, HttpVersion, Scheduler


def _http_version(v: Any) -> Any:
    """YAML reads `1.1` as a float and `2` as an int; accept them as the version strings."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float):
        return {1.1: "1.1", 2: "2", 3: "3"}.get(v, str(v))
    return v


HttpVersionField = Annotated[HttpVersion, BeforeValidator(_http_version)]
Name = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=64)]
ConnectionsPerServer = Annotated[int, Field(ge=1, le=256)]


def _connections_default(coordinates: Mapping[str, object], browser: BrowserSettings) -> int:
    """Without the axis, the campaign's browser block decides per HTTP version."""
    return browser.connections_for(str(coordinates["http"]))


PROFILE: Dimension[str] = Dimension(
    name="profile",
    key="profiles",
    item=Name,
    help="the emulated link: a link profile",
    column="profile",
    required=True,
)


def _link_parameter(p: link_points.Parameter) -> Dimension[str]:
    """A link parameter swept over the cell's profile (clarke.link_points): put in force
    with the profile, as the link point `Cell.link` names, and checked as that point's
    profile is (each link implementation's check_profile), not by capability data."""
    return Dimension(
        name=p.name,
        key=p.name,
        item=Annotated[str, BeforeValidator(p.text)],
        help=f"{p.help} ({p.allowed()})",
        column=p.column,
        default=fixed(PROFILE_OWN),
        run_id=lambda v: "" if v == PROFILE_OWN else f"{p.run_id}{v}",
        legend=lambda v: (
            "" if v == PROFILE_OWN else ", " + " ".join(filter(None, (p.label, v, p.unit)))
        ),
        legend_shown=Shown.several,
        column_shown=Shown.not_default,
    )


LINK_PARAMETERS: tuple[Dimension[str], ...] = tuple(
    _link_parameter(p) for p in link_points.PARAMETERS
)


HTTP: Dimension[HttpVersion] = Dimension(
    name="http",
    key="http",
    item=HttpVersionField,
    help="HTTP version, forced and verified",
    column="http",
    required=True,
    record=lambda v: v.value,
    run_id=lambda v: v.tag,
    label=lambda v: v.label,
    legend=lambda v: v.label,
    legend_shown=Shown.always,
)
CC: Dimension[CongestionControl] = Dimension(
    name="cc",
    key="cc",
    item=CongestionControl,
    help="the server's congestion control (QUIC: reno is NewReno)",
    column="cc",
    required=True,
    applied_by="server",
    record=lambda v: v.value,
    run_id=lambda v: v.value,
)
SITE_NONE = "none"  # the generated pages (MODEL, SIZE)
NO_PAGE = "-"  # a recorded site's cell's page model and size: the site is its page
# A recorded site: a site archive's directory, relative to the campaign file (checked
# where it leads and read when the campaign is: campaign/paths.py, campaign/plan.py).
SITE_PATH_CHARS = r"[A-Za-z0-9_./-]"


def _site_path(value: str) -> str:
    if value != SITE_NONE and not ID_RE.fullmatch(site_label(value)):
        raise ValueError(
            f"{value!r}: the archive directory's own name (the run id's part) must start with "
            "a letter or digit"
        )
    return value


SitePath = Annotated[
    str, StringConstraints(pattern=rf"^{SITE_PATH_CHARS}{{1,512}}$"), AfterValidator(_site_path)
]


def site_label(value: str) -> str:
    """A site's part of run ids and legends: its archive directory's own name (`none`:
    the generated pages)."""
    return value if value == SITE_NONE else PurePosixPath(value).name


def _generated_pages(coordinates: Mapping[str, object]) -> bool:
    return coordinates.get("site", SITE_NONE) == SITE_NONE


def _no_page(coordinates: Mapping[str, object], _browser: BrowserSettings) -> str:
    if _generated_pages(coordinates):
        raise ValueError("a generated page's model and size come from the campaign")
    return NO_PAGE


def _page_part(value: str) -> str:
    return "" if value == NO_PAGE else value


SITE: Dimension[str] = Dimension(
    name="site",
    key="sites",
    item=SitePath,
    help=f"a recorded site: its archive directory (in a campaign, relative to the campaign "
    f"file; {SITE_NONE}: the generated pages of models and sizes; docs/sites.md)",
    column="site",
    default=fixed(SITE_NONE),
    run_id=lambda v: "" if v == SITE_NONE else site_label(v),
    label=site_label,
    legend=lambda v: "" if v == SITE_NONE else f", {site_label(v)}",
    legend_shown=Shown.several,
    column_shown=Shown.not_default,
    applied_by="server",
)
DNS_CACHE: Dimension[DnsCache] = Dimension(
    name="dns_cache",
    key="dns_cache",
    item=DnsCache,
    help="where a recorded site's lookups may be answered from a cache: none (each "
    "crosses the link) or terminal (a resolver cache at the terminal); a site's cells only",
    column="dns cache",
    default=fixed(DnsCache.none),
    record=lambda v: v.value,
    run_id=lambda v: "" if v is DnsCache.none else f"dns{v.value}",
    legend=lambda v: "" if v is DnsCache.none else f", DNS cache at the {v.value}",
    legend_shown=Shown.several,
    column_shown=Shown.not_default,
    applies=lambda coordinates: not _generated_pages(coordinates),
)
# Page model and size: required by a matrix that loads the generated pages (site none;
# campaign/model.py checks), and nothing in a site's cell.
PageName = Annotated[str, StringConstraints(pattern=r"^(-|[a-z0-9][a-z0-9_.-]*)$", max_length=64)]
MODEL: Dimension[str] = Dimension(
    name="model",
    key="models",
    item=PageName,
    help=f"page model (pages/), for the generated pages ({SITE.key} {SITE_NONE})",
    column="model",
    default=_no_page,
    run_id=_page_part,
    applies=_generated_pages,
)
SIZE: Dimension[str] = Dimension(
    name="size",
    key="sizes",
    item=PageName,
    help="page size, as the page model names it",
    column="size",
    default=_no_page,
    run_id=_page_part,
    applies=_generated_pages,
)
CONNECTIONS: Dimension[int] = Dimension(
    name="connections",
    key="connections",
    item=ConnectionsPerServer,
    help="connections per server (the connection studies [C], [K])",
    column="connections",
    default=_connections_default,
    record=int,
    run_id=lambda v: f"c{v}",
    column_shown=Shown.always,
    numeric=True,
)
CROSS_TRAFFIC: Dimension[CrossTraffic] = Dimension(
    name="cross_traffic",
    key="cross_traffic",
    item=CrossTrafficEntry,
    help="what else crosses the link during the load (campaign/cross.py)",
    column="cross traffic",
    default=fixed(NO_CROSS_TRAFFIC),
    record=lambda v: v.label,
    run_id=lambda v: f"x{v.label}",
    legend=lambda v: f" + {v.label}" if v.active else "",
    legend_shown=Shown.always,
    describe=lambda v: {"cross": v.describe()},
)
PEP: Dimension[str] = Dimension(
    name="pep",
    key="pep",
    item=Name,
    help=f"performance-enhancing proxy at terminal and gateway ({PEP_NONE}: without one)",
    column="pep",
    default=fixed(PEP_NONE),
    legend=lambda v: "" if v == PEP_NONE else f", PEP {v}",
    legend_shown=Shown.always,
    names=pep_presets.names,
    noun="PEP",
)
BROWSER: Dimension[Browser] = Dimension(
    name="browser",
    key="browser",
    item=Browser,
    help="the client's browser",
    column="browser",
    default=fixed(Browser.firefox),
    record=lambda v: v.value,
    run_id=lambda v: v.value,
    legend=lambda v: f" {v.value}",
    legend_shown=Shown.several,
    column_shown=Shown.several,
)

SCHEDULER: Dimension[Scheduler] = Dimension(
    name="scheduler",
    key="scheduler",
    item=Scheduler,
    help="the server's stream scheduler on HTTP/2 and /3 (own: the server's own; "
    "docs/scheduling.md)",
    column="scheduler",
    default=fixed(Scheduler.own),
    record=lambda v: v.value,
    run_id=lambda v: v.tag,
    legend=lambda v: f", {v.value}",
    legend_shown=Shown.several,
    column_shown=Shown.several,
    applied_by="server",
    setting=ServerSetting("scheduler", Scheduler, lambda v: v.value),
)

INITIAL_WINDOW: Dimension[str] = Dimension(
    name="initial_window",
    key="initial_window",
    item=InitialWindowValue,
    help=f"the server's initial congestion window, in segments: TCP's (its route's initcwnd) "
    f"and QUIC's (as many {QUIC_DATAGRAM_BYTES}-byte datagrams); {IW_DEFAULT}: the kernel's "
    "and the QUIC stack's own, ten ([M] Table 5)",
    column="iw",
    default=fixed(IW_DEFAULT),
    run_id=lambda v: f"iw{v}",
    legend=lambda v: "" if v == IW_DEFAULT else f", IW {v}",
    legend_shown=Shown.several,
    column_shown=Shown.not_default,
    applied_by="server",
    setting=ServerSetting(IW_FIELD, InitialWindowValue, check=in_force),
)

_declared: list[Dimension[Any]] = [
    PROFILE,
    *LINK_PARAMETERS,
    HTTP,
    CC,
    SITE,
    DNS_CACHE,
    MODEL,
    SIZE,
    CONNECTIONS,
    CROSS_TRAFFIC,
    PEP,
    BROWSER,
    SCHEDULER,
    INITIAL_WINDOW,
]
_sealed = False


def declare(dimension: Dimension[Any]) -> None:
    """Add a dimension after the built-in ones; before anything derived is built."""
    if _sealed:
        raise RuntimeError(
            f"dimension {dimension.name}: declared after the matrix was built from the "
            "dimensions (declare it before importing the campaign model)"
        )
    if any(d.name == dimension.name or d.key == dimension.key for d in _declared):
        raise ValueError(f"dimension {dimension.name}: its name or key is taken")
    _declared.append(dimension)


def seal() -> tuple[Dimension[Any], ...]:
    """Every dimension, in order; none can be declared from now on."""
    global _sealed
    _sealed = True
    return tuple(_declared)


def by_name(name: str) -> Dimension[Any]:
    for d in _declared:
        if d.name == name:
            return d
    raise KeyError(name)


@total_ordering
class Cell:
    """A matrix cell: one value per dimension, read by dimension (`cell[HTTP]`). Equal,
    hashed and ordered by the values' record form, so that a cell from a plan and one
    from a record of the same run are one cell."""

    __slots__ = ("_key", "_values")

    def __init__(self, values: Mapping[str, object]) -> None:
        dims = seal()
        missing = [d.name for d in dims if d.name not in values]
        extra = sorted(set(values) - {d.name for d in dims})
        if missing or extra:
            raise ValueError(f"a cell has every dimension: missing {missing}, unknown {extra}")
        self._values = {d.name: values[d.name] for d in dims}
        self._key = tuple(d.text(self._values[d.name]) for d in dims)

    @classmethod
    def parse(cls, values: Mapping[str, object]) -> Cell:
        """From record or plan values (text, numbers, mappings): each parsed by its
        dimension; a dimension missing from `values` (records written before it was
        declared) takes its default."""
        out: JsonObject = {}
        for d in seal():
            if d.name in values:
                out[d.name] = d.parse(values[d.name])
            else:
                out[d.name] = d.default_for(out, NO_BROWSER_SETTINGS)
        return cls(out)

    def __getitem__(self, dimension: Dimension[V]) -> V:
        # The value was parsed by this dimension (Cell.of), so it is the dimension's type.
        return cast(V, self._values[dimension.name])

    def replace(self, dimension: Dimension[V], value: V) -> Cell:
        return Cell({**self._values, dimension.name: value})

    def items(self) -> Iterator[tuple[Dimension[Any], Any]]:
        for d in seal():
            yield d, self._values[d.name]

    def record(self) -> dict[str, str | int]:
        """Each dimension's value as the record keeps it, by field name."""
        return {d.name: d.record(v) for d, v in self.items()}

    def texts(self) -> dict[str, str]:
        """Each dimension's value as text, by field name (tags, tables, JSON reports)."""
        return {d.name: d.text(v) for d, v in self.items()}

    @property
    def path(self) -> str:
        """The cell in one word: its values joined with `/` (compare's tables), its link
        (the profile with the parameters swept over it) as one."""
        swept = {d.name for d in LINK_PARAMETERS}
        texts = [
            self.link if d is PROFILE else text
            for d, text in zip(seal(), self._key, strict=True)
            if d.name not in swept
        ]
        return "/".join(texts)

    @property
    def link(self) -> str:
        """The link a run loads over: its profile with the parameters the cell sweeps over
        it, as one name (clarke.link_points; the profile's name where it sweeps none)."""
        return link_points.point_name(self[PROFILE], {d.name: self[d] for d in LINK_PARAMETERS})

    @property
    def site(self) -> str | None:
        """The recorded site a run loads (its archive directory as the campaign gives it),
        or None for a generated page."""
        site = self[SITE]
        return None if site == SITE_NONE else site

    @property
    def page(self) -> str:
        """The page a run loads: a generated page's model and size, as `clarke pages
        build` names it; a recorded site's name in run ids."""
        site = self.site
        return site_label(site) if site is not None else f"{self[MODEL]}-{self[SIZE]}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cell) and self._key == other._key

    def __lt__(self, other: Cell) -> bool:
        return self._key < other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Cell({self.path})"


def shown(dimension: Dimension[Any], policy: Shown, cells: list[Cell]) -> bool:
    """Whether `policy` shows `dimension` for these cells."""
    if policy is Shown.always:
        return True
    if policy is Shown.never:
        return False
    if policy is Shown.not_default:
        default = dimension.text(dimension.default_for({}, NO_BROWSER_SETTINGS))
        return any(dimension.text(c[dimension]) != default for c in cells)
    return len({c[dimension] for c in cells}) > 1


def legend(cell: Cell, cells: list[Cell]) -> str:
    """A figure series' label for `cell` among `cells`: every dimension's legend part
    (HTTP/2, + bulk-cubic, , PEP splittcp, firefox) where its policy shows it."""
    parts = [
        d.legend(v)
        for d, v in cell.items()
        if d.legend is not None and shown(d, d.legend_shown, cells)
    ]
    # The part that heads a label (HTTP/2) first, then those written to follow one
    # (", loss 0.01", " + bulk-cubic"), whatever the dimensions' order: a swept link
    # parameter comes before the HTTP version among the dimensions.
    parts.sort(key=lambda part: part[:1] in (",", " ", "+"))
    return "".join(parts).strip()


def table_columns(cells: list[Cell]) -> list[Dimension[Any]]:
    """The dimensions a results table shows for these cells: the text ones in order,
    then the numeric ones, so that numbers start at one column."""
    dims = [d for d in seal() if shown(d, d.column_shown, cells)]
    return [d for d in dims if not d.numeric] + [d for d in dims if d.numeric]
