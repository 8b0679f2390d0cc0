"""What runner and role agents say to each other, as models: each request an agent
takes and each reply it gives. The agent (clarke.agent.server) validates a request
before its implementation sees it and a reply before it is sent; the runner
(clarke.agent.client) validates every reply it receives. A request names only values
(a profile, a congestion control, a number of bytes: never a file or a program).

    GET  /health          Health          every role
    GET  /state           LinkState       link roles
                          ServerState     the server
    POST /config          LinkConfig -> Configured       link roles (the whole profile)
                          ServerConfig -> Configured     the server
    GET  /stats           Stats           normalised counters (the implementation's own)
                          ServerStats     the server (its connection records)
    POST /stats/reset     Stats
    POST /capture/start   CaptureStart -> Stats          the terminal (tcpdump)
    POST /capture/stop    CaptureStopped                 the terminal
    POST /load            browser.load.LoadRequest -> LoadResult   the client
    POST /pep/config      PepConfig -> Configured        the stations (terminal, gateway)
    POST /names/start     NamesStart -> NamesStarted     client, terminal, gateway
    POST /names/stop      Reply                          (a recorded site's resolvers:
    GET  /names/queries   NamesQueries                   agent/names_slot.py)

Replies keep what an implementation adds beyond the contract (`extra`): a reply must
have the contract's fields, of their types, and may say more."""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    create_model,
)

from clarke.campaign import dimensions
from clarke.json_value import JsonObject
from clarke.pep_presets import SPLIT, Mode
from clarke.profiles import LinkProfile
from clarke.results.server_records import ReplayCounters, ServerConnection
from clarke.schema import StrictModel
from clarke.sites.zone import Zone
from clarke.vocab import PEP_NONE, CongestionControl, kind_of

# A profile's name, or a link point's: the profile's and its swept parameters
# (clarke.link_points).
ProfileName = Annotated[str, StringConstraints(min_length=1, max_length=512)]
# A recorded site's directory under the pages directory's sites/ (server/site.py).
SITE_NAME = r"^[a-z0-9][a-z0-9_.-]{0,127}$"
QUIC_CCS = tuple(c.quic for c in CongestionControl)


def _quic_cc(name: str) -> str:
    if name not in QUIC_CCS:
        raise ValueError(f"not a QUIC congestion control; allowed: {', '.join(QUIC_CCS)}")
    return name


QuicCc = Annotated[str, AfterValidator(_quic_cc)]  # CongestionControl's QUIC names


class Reply(BaseModel):
    """An agent's answer: the contract's fields, and whatever else the implementation
    reports."""

    model_config = ConfigDict(extra="allow", frozen=True)

    def body(self) -> JsonObject:
        return self.model_dump(mode="json")

    def said(self, key: str) -> Any:
        """What the implementation reported beyond the contract under `key`, or None."""
        return (self.model_extra or {}).get(key)


class Health(Reply):
    role: str
    implementation: str | None = None
    clarke: str = ""
    ready: bool = True
    error: str | None = None


class LinkState(Reply):
    """The profile a link role runs (None before its first configure)."""

    profile: str | None = None
    profile_sha256: str | None = None
    running: bool = False


class ServerState(Reply):
    """The congestion controls a server runs, and its stream scheduler (None: a server
    that does not say)."""

    tcp_cc: str | None = None
    quic_cc: str | None = None
    scheduler: str | None = None
    site: str | None = None  # the recorded site it serves, by its name under sites/


class Configured(Reply):
    """Whether a configure changed anything (a no-op when its body was in force), and
    the state after it."""

    applied: bool
    state: JsonObject


class Stats(Reply):
    """A role's counters, as its implementation normalises them (docs/architecture.md):
    a station's `bytes_onto_link` per direction, a server's connections."""


class ServerStats(Stats):
    """The server's GET /stats as the runner reads it: one record per connection since
    the last reset (results/server_records.py: what a record keeps of each), the ids of
    connections opened before the reset that served nothing since (`lingering`, origin),
    and a recorded site's replay counters (`site`, origin)."""

    connections: list[ServerConnection] = Field(default_factory=list)
    lingering: list[int | str] = Field(default_factory=list)
    site: ReplayCounters | None = None


class CaptureStopped(Reply):
    """The terminal's packets since /capture/start (base64), and tcpdump's counts."""

    interface: str
    pcap_b64: str
    bytes: int = Field(ge=0)
    truncated: bool
    captured: int | None = None
    dropped: int | None = None


class Request(StrictModel):
    """A request's body: only values (names, numbers, a profile)."""

    def body(self) -> JsonObject:
        return self.model_dump(mode="json", by_alias=True)


class LinkConfig(Request):
    """A link role's POST /config: the whole profile, under its name."""

    name: ProfileName
    profile: LinkProfile


class BaseServerConfig(Request):
    """A server's POST /config: its TCP and QUIC congestion controls, the recorded site
    it serves (the name of its directory under the pages directory's sites/:
    server/site.py; null: none), and a field for each dimension the server puts in
    force (ServerConfig: campaign/dimensions.py's `setting`s, the stream scheduler
    among them), any of them."""

    tcp_cc: CongestionControl | None = None
    quic_cc: QuicCc | None = None
    quic_initial_window: StrictInt | None = Field(default=None, ge=1)
    site: Annotated[str, StringConstraints(pattern=SITE_NAME)] | None = None

    def body(self) -> JsonObject:
        """Only the settings asked for (a null site too: it asks for none); a server
        keeps the others."""
        return self.model_dump(mode="json", exclude_unset=True)


def _with_declared_settings() -> type[BaseServerConfig]:
    # pydantic's field definitions are (type, default) pairs typed Any by pydantic.
    fields: dict[str, Any] = {
        d.setting.field: (d.setting.type | None, None)
        for d in dimensions.seal()
        if d.setting is not None
    }
    return create_model("ServerConfig", __base__=BaseServerConfig, **fields)


# The server's POST /config: BaseServerConfig's fields and the declared settings'.
ServerConfig: Final = _with_declared_settings()


class CaptureStart(Request):
    """The most bytes of packets the terminal keeps."""

    max_bytes: StrictInt = Field(ge=1)


MAX_HOP_BUFFER_BYTES: Final = 1 << 30
MAX_HOP_INITIAL_WINDOW: Final = 65_535  # segments (a route's initcwnd)
MAX_HOP_PACING_RATE: Final = 1 << 40  # bytes per second
MAX_POOL: Final = 256
PepName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=64)]


class _PerDirection(StrictModel):
    """One value per direction of the link; each station takes the one it sends
    (the gateway: forward, the terminal: return)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def of(self, direction: str) -> int:
        value: int = getattr(self, "return_" if direction == "return" else direction)
        return value


class HopWindow(_PerDirection):
    """The hop's first window, in segments (0: the kernel's)."""

    forward: StrictInt = Field(default=0, ge=0, le=MAX_HOP_INITIAL_WINDOW)
    return_: StrictInt = Field(default=0, ge=0, le=MAX_HOP_INITIAL_WINDOW, alias="return")


class HopPacing(_PerDirection):
    """The hop's pacing cap (SO_MAX_PACING_RATE), bytes per second (0: none)."""

    forward: StrictInt = Field(default=0, ge=0, le=MAX_HOP_PACING_RATE)
    return_: StrictInt = Field(default=0, ge=0, le=MAX_HOP_PACING_RATE, alias="return")


class PepSettings(Request):
    """What a station's PEP runs with: a preset (peps/) made into numbers for the link
    profile in force by the runner (run/session/pep.py). `hop_*` is the satellite hop's
    connection; `pool_*` the accelerated mode's pre-opened hop connections."""

    preset: Annotated[str, StringConstraints(max_length=64)] = ""
    mode: Mode = SPLIT
    hop_cc: CongestionControl = CongestionControl.cubic
    hop_buffer_bytes: StrictInt = Field(default=0, ge=0, le=MAX_HOP_BUFFER_BYTES)
    hop_initial_window: HopWindow = HopWindow()
    hop_max_pacing_rate: HopPacing = HopPacing()
    pool_size: StrictInt = Field(default=0, ge=0, le=MAX_POOL)
    pool_max_opening: StrictInt = Field(default=1, ge=1, le=64)
    pool_spare: StrictInt = Field(default=0, ge=0, le=MAX_POOL)


class PepConfig(PepSettings):
    """A station's POST /pep/config: the PEP implementation to run (a name of the
    registry's `pep` kind, which the station's agent checks; or none) and its settings.
    Idempotent: the same name and settings are a no-op (agent/pep_slot.py)."""

    name: PepName = PEP_NONE

    def settings(self) -> PepSettings:
        return PepSettings.model_validate(self.model_dump(exclude={"name"}))

    def body(self) -> JsonObject:
        """Without a PEP, only its name: no settings apply."""
        if self.name == PEP_NONE:
            return {"name": PEP_NONE}
        return super().body()


class NamesStart(Request):
    """POST /names/start: a recorded site's names (host -> address, the archive's
    placement on the server's LAN) for the role's resolver to answer (the gateway) or
    forward (the client's stub); `cache`: the client's stub forwards to the terminal's
    cache instead of the gateway. The agent chooses every address and file itself."""

    zone: Zone | None = None
    cache: StrictBool = False


class NamesStarted(Reply):
    """Which resolver the role runs now and where it listens."""

    resolver: str
    listen: str


class NamesQueries(Reply):
    """The queries the role's resolver answered since it started, from the `since`-th
    on (a load's own: the count before it), and how many there are in all."""

    queries: list[JsonObject]
    total: int = Field(ge=0)


CONFIGS: dict[str, type[Request]] = {"link": LinkConfig, "server": ServerConfig}
STATES: dict[str, type[Reply]] = {"link": LinkState, "server": ServerState}


def kind_of_role(role: str) -> str | None:
    """The kind of implementation a role takes; None for a role Clarke does not have
    (an agent serving a test's stand-in)."""
    try:
        return kind_of(role)
    except ValueError:
        return None


def config_of(kind: str | None) -> type[Request] | None:
    """The POST /config request of a kind of role (None: the kind takes none)."""
    return CONFIGS.get(kind or "")


def state_of(kind: str | None) -> type[Reply]:
    """The GET /state reply of a kind of role."""
    return STATES.get(kind or "", Reply)
