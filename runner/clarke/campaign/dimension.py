"""What a dimension of the run matrix is (`Dimension`) and what its declaration may say:
when it is shown (`Shown`), its default, how a server puts it in force (`ServerSetting`).
The declared dimensions are in clarke.campaign.dimensions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Annotated, Any, Generic, Protocol, TypeVar, get_args, get_origin

from pydantic import TypeAdapter

from clarke.json_value import JsonObject
from clarke.vocab import HttpVersion

V = TypeVar("V")


class Shown(StrEnum):
    """When a dimension has a column in a results table, or a part in a figure's legend."""

    always = "always"
    several = "several"  # only when the results hold more than one of its values
    not_default = "not-default"  # only when the results hold a value besides its default
    never = "never"


class BrowserSettings(Protocol):
    """What a default may depend on besides the run's other coordinates (the
    campaign's `browser:` block)."""

    def connections_for(self, http: str) -> int: ...


Default = Callable[[Mapping[str, object], BrowserSettings], Any]


@dataclass(frozen=True)
class ServerSetting:
    """How a testbed puts a dimension's value in force when the server applies it: the
    field of the server's POST /config it fills (contract.ServerConfig takes a field
    for every declared setting), that field's type as the request carries it, and the
    field's value for a value of the dimension. Which servers take which values is each
    server's capability data (roles.Implementation.supports), checked when a campaign is
    planned."""

    field: str
    type: Any
    value: Callable[[Any], Any] = lambda v: v
    # Whether one of the server's connection records (what it started the connection
    # with) shows the value in force: why not, or None. Each load is verified so.
    check: Callable[[Any, Mapping[str, object]], str | None] | None = None


@dataclass(frozen=True, eq=False)
class Dimension(Generic[V]):
    """One dimension of the run matrix (the module's docstring says what derives from it).

    `item` is the pydantic type of one value of its axis in a campaign file; `record`
    turns a value into what the record, the plan and the summary keep (text, or an int),
    and `item`'s validation turns that back. `run_id` is its part of the run id, which
    carries it always (`required`) or when a matrix of the campaign gives the axis.
    `legend` is its part of a figure series' label ("" when the value says nothing)."""

    name: str
    key: str
    item: Any
    help: str
    column: str
    required: bool = False
    default: Default | None = None
    record: Callable[[V], str | int] = str
    run_id: Callable[[V], str] = str
    label: Callable[[V], str] = str
    legend: Callable[[V], str] | None = None
    legend_shown: Shown = Shown.never
    column_shown: Shown = Shown.always
    numeric: bool = False  # a number in tables (right-aligned, after the text columns)
    # Where its values are names of shipped data (PEP presets, peps/): every name it
    # takes, read when a campaign is, and what one is called in an error.
    names: Callable[[], Sequence[str]] | None = None
    noun: str = ""
    describe: Callable[[V], JsonObject] | None = None  # more of a value for plan.json
    # Whether the dimension means anything in a cell with these coordinates (of the
    # dimensions declared before it); where not, the cell takes its default whatever a
    # matrix lists (a recorded site's cell has no page model or size).
    applies: Callable[[Mapping[str, object]], bool] | None = None
    # The kind of role that puts the value in force (a server, the link ...), whose
    # implementations' capability data says which values each takes (checked when a
    # campaign is planned: registry.check_supported); None: the load request's own.
    applied_by: str | None = None
    # How the server puts it in force, where a field of its POST /config does; None: a
    # runner step of its own (run/loop/apply.py), or the load request's own.
    setting: ServerSetting | None = None
    _adapter: TypeAdapter[Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_adapter", TypeAdapter(self.item))

    def parse(self, value: Any) -> V:
        """A value as a campaign file, a record or a plan gives it (ValidationError if
        it is not one)."""
        parsed: V = self._adapter.validate_python(value)
        return parsed

    def text(self, value: V) -> str:
        return str(self.record(value))

    @property
    def vocabulary(self) -> tuple[str, ...] | None:
        """Every value the dimension can take, where its item is a vocabulary of
        clarke.vocab (an enum); None where its values are names (profiles, pages, PEP
        presets) or numbers."""
        item = self.item
        if get_origin(item) is Annotated:
            item = get_args(item)[0]
        if isinstance(item, type) and issubclass(item, Enum):
            return tuple(str(v.value) for v in item)
        return None

    def default_for(self, coordinates: Mapping[str, object], browser: BrowserSettings) -> V:
        if self.default is None:
            raise ValueError(f"dimension {self.name} has no default: a campaign gives it")
        value: V = self.default(coordinates, browser)
        return value

    def __repr__(self) -> str:
        return f"Dimension({self.name})"

    def default_text(self) -> str | None:
        """The value a cell takes when no matrix gives one, where it takes one whatever
        its other coordinates (None where it depends on them: the connections)."""
        try:
            return self.text(self.default_for({}, NO_BROWSER_SETTINGS))
        except (ValueError, KeyError):
            return None


def fixed(value: Any) -> Default:
    return lambda _coordinates, _browser: value


class NoBrowserSettings:
    """For cells read back from records: every default but the connections is fixed,
    and records have always carried their connections."""

    def connections_for(self, http: str) -> int:
        return HttpVersion(http).default_connections


NO_BROWSER_SETTINGS = NoBrowserSettings()
