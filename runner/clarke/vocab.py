"""Clarke's vocabularies: every name with a fixed set of values is declared here once,
with what each value is called elsewhere. CLI choices, campaign validation and help are
generated from these declarations (role implementations have their own registry,
clarke.registry).

    HttpVersion         1.1 | 2 | 3         run ids: h1 h2 h3; Firefox: http/1.1 h2 h3
    CongestionControl   cubic | bbr | reno  QUIC stacks: cubic bbr newreno
    Engine              selenium | browsertime
    Browser             firefox | chromium  run ids: -firefox -chromium (with a browser axis)
    Isolation           profile | context    how a load's browser state is made new
    Scheduler           own | round-robin | sequential | rfc9218: the server's stream
                        scheduler (own: the server's own; origin's is round-robin)
    QueueDiscipline     drop_tail | drop_head | codel | fq_codel
    Substrate           netns | compose
    PEP_NONE            none: no performance-enhancing proxy (pep implementations:
                        clarke.registry)
    PepImplementation   splittcp | pepsal: what a PEP preset (peps/) runs, as the
                        registry names the pep kind's implementations
    PEP_ROLES           terminal, gateway: where a PEP runs (started gateway, terminal)
    roles               client, terminal, satellite, gateway, server
    link roles          terminal, satellite, gateway; started satellite, gateway, terminal
    directions          forward (gateway -> terminal), return (terminal -> gateway)
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal, TypeVar, get_args

from clarke.errors import UnknownName

E = TypeVar("E", bound=StrEnum)


class HttpVersion(StrEnum):
    h1 = "1.1"
    h2 = "2"
    h3 = "3"

    @property
    def tag(self) -> HttpTag:
        """In run ids and in the server's connection records: h1, h2, h3."""
        return http_tag(self.name)

    @property
    def next_hop_protocol(self) -> str:
        """What Firefox reports as a resource's nextHopProtocol."""
        return {"1.1": "http/1.1", "2": "h2", "3": "h3"}[self.value]

    @property
    def label(self) -> str:
        """For people: HTTP/1.1, HTTP/2, HTTP/3."""
        return f"HTTP/{self.value}"

    @property
    def default_connections(self) -> int:
        """Connections per server when nothing is said (the study: 1 for HTTP/1.1)."""
        return 1 if self is HttpVersion.h1 else 6


class CongestionControl(StrEnum):
    cubic = "cubic"
    bbr = "bbr"
    reno = "reno"

    @property
    def quic(self) -> str:
        """The QUIC stacks' name of the same family (QUIC has NewReno for reno)."""
        return "newreno" if self is CongestionControl.reno else self.value


class Engine(StrEnum):
    selenium = "selenium"
    browsertime = "browsertime"


class Browser(StrEnum):
    firefox = "firefox"
    chromium = "chromium"


class Isolation(StrEnum):
    """How each load gets a browser with nothing of an earlier load (docs/running.md,
    "Isolation"): a new browser with a new profile, or a new isolated context (a
    WebDriver BiDi user context) in a browser kept running between loads."""

    profile = "profile"
    context = "context"


class Scheduler(StrEnum):
    """Which response on an HTTP/2 or HTTP/3 connection the server sends next
    (docs/scheduling.md; origin: origin/crates/origin/src/sched.rs)."""

    own = "own"  # the server's own, untouched: origin's is round-robin
    round_robin = "round-robin"
    sequential = "sequential"
    rfc9218 = "rfc9218"

    @property
    def tag(self) -> str:
        """In run ids: sown, srr, sseq, s9218."""
        return {"own": "sown", "round-robin": "srr", "sequential": "sseq", "rfc9218": "s9218"}[
            self.value
        ]


class QueueDiscipline(StrEnum):
    """A link direction's queue (queues.py, docs/queues.md)."""

    drop_tail = "drop_tail"
    drop_head = "drop_head"
    codel = "codel"
    fq_codel = "fq_codel"


class Substrate(StrEnum):
    netns = "netns"
    compose = "compose"


HTTP_VERSIONS: Final = tuple(v.value for v in HttpVersion)
CONGESTION_CONTROLS: Final = tuple(c.value for c in CongestionControl)
ENGINES: Final = tuple(e.value for e in Engine)
BROWSERS: Final = tuple(b.value for b in Browser)
ISOLATIONS: Final = tuple(i.value for i in Isolation)
SCHEDULERS: Final = tuple(s.value for s in Scheduler)
SUBSTRATES: Final = tuple(s.value for s in Substrate)

ROLES: Final = ("client", "terminal", "satellite", "gateway", "server")
LINK_ROLES: Final = ("terminal", "satellite", "gateway")
# The order link roles start and take a new profile in: the satellite first, then the
# gateway, then the terminal, which logs on to the gateway through the satellite
# (OpenSAND needs it; the others do not mind).
LINK_START_ORDER: Final = ("satellite", "gateway", "terminal")
DIRECTIONS: Final = ("forward", "return")
# A performance-enhancing proxy (PEP) runs at both ends of the satellite hop; "none"
# is the campaign's and `clarke load --pep`'s name for running without one.
PEP_NONE: Final = "none"


class DnsCache(StrEnum):
    """Where a recorded site's lookups may be answered from a cache (agent/names_slot.py):
    nowhere (each crosses the link to the gateway side's resolver), or at the
    terminal, as some satellite terminals do."""

    none = "none"
    terminal = "terminal"


class PepImplementation(StrEnum):
    """The registry's `pep` implementations, which a preset names (the registry is above
    the presets' layer; tests/unit/test_pep.py keeps the two equal)."""

    splittcp = "splittcp"
    pepsal = "pepsal"


PEP_ROLES: Final = ("terminal", "gateway")
# The order the stations take a PEP in: the gateway first, so that its listener is up
# when the terminal's PEP opens its hop connections to it.
PEP_START_ORDER: Final = ("gateway", "terminal")
# Which station puts each direction onto the link, and which one receives it there.
SENDER: Final = {"forward": "gateway", "return": "terminal"}
RECEIVER: Final = {"forward": "terminal", "return": "gateway"}


def kind_of(role: str) -> str:
    """The kind of implementation that fills a role: link, server or client."""
    if role in LINK_ROLES:
        return "link"
    if role in ("server", "client"):
        return role
    raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")


def sends(role: str) -> str | None:
    """The direction a station puts onto the link (None for the satellite)."""
    return next((d for d, r in SENDER.items() if r == role), None)


def receives(role: str) -> str | None:
    """The direction the link delivers at a station (None for the satellite)."""
    return next((d for d, r in RECEIVER.items() if r == role), None)


# When a load's client starts the next load's browser (browser/prestart.py): once the
# page is measured, or during it at idle priority.
StartAhead = Literal["after-page", "during-page"]
# In context isolation, a browser serves at most this many loads, one context each, by
# default (browser.loads_per_browser), and then a new one starts.
LOADS_PER_BROWSER: Final = 50
MAX_LOADS_PER_BROWSER: Final = 1000

# The HTTP priority signals a load's browser sends (browser/prefs.py, docs/scheduling.md):
# its own (`default`), none it can be kept from sending (`none`, Firefox), or Firefox's
# RFC 7540 HTTP/2 dependency tree instead of RFC 9218's Priority header (`rfc7540-tree`).
PrioritySignals = Literal["default", "none", "rfc7540-tree"]


def vocabulary_value(field: str, vocabulary: type[E], given: str) -> E:
    """`given` as a value of `vocabulary` (one already, or its text); UnknownName naming
    the field and the values it allows."""
    try:
        return vocabulary(given)
    except ValueError:
        raise UnknownName(field, str(given), [v.value for v in vocabulary]) from None


def signals_refused(signals: PrioritySignals, http: HttpVersion, browser: Browser) -> str | None:
    """Why `browser` cannot send `signals` over `http`, or None: the one rule a campaign's
    plan and a load request (at the client's agent) both apply."""
    if signals == "rfc7540-tree" and http is not HttpVersion.h2:
        return f"rfc7540-tree is an HTTP/2 dependency tree, not for HTTP/{http.value}"
    if browser is Browser.chromium and signals != "default":
        return f"{signals}: Chromium has no switch for the priority signals it sends (only default)"
    return None


# An HTTP version by its tag (HttpVersion.tag), as files write it where they name the
# protocols something offered (a site archive's origins: docs/sites.md).
HttpTag = Literal["h1", "h2", "h3"]
HTTP_TAGS: tuple[HttpTag, ...] = get_args(HttpTag)


def http_tag(text: str) -> HttpTag:
    """`text` as an HTTP version's tag; ValueError if it is none."""
    for tag in HTTP_TAGS:
        if tag == text:
            return tag
    raise ValueError(f"{text!r} is not an HTTP version's tag ({', '.join(HTTP_TAGS)})")
