"""Firefox preferences as data, each with the reason it is set.

Layers, applied in order and logged: BASE (every load), the requested HTTP version's
set, connections per server, the priority signals asked, CAPTURE (a load with a capture),
then the user's overrides.
browsertime's firefoxPreferences.js keeps its prefs the same way."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clarke.browser.load import BrowserSettings, BrowserSetup

PrefValue = bool | int | str

# What a load may override (`clarke load --pref`, a load request's `prefs`): tunables of
# Firefox's HTTP and TCP stack, as booleans or integers. Never a string: a string
# preference can name a file, a URL or a host (a proxy, a PAC file, a directory) that
# Firefox would then read or reach.
OVERRIDABLE_PREFIXES = ("network.http.", "network.tcp.")
PREF_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")
INT_RANGE = (-(2**31), 2**31 - 1)  # Firefox's integer preferences are 32-bit


def check_override(name: str, value: object) -> bool | int:
    """`value`, if a load may set the preference to it; else ValueError, naming it."""
    if not PREF_NAME.fullmatch(name):
        raise ValueError(f"{name[:60]!r} is not a preference name")
    if not name.startswith(OVERRIDABLE_PREFIXES):
        raise ValueError(
            f"{name}: only {', '.join(p + '*' for p in OVERRIDABLE_PREFIXES)} preferences "
            "may be overridden"
        )
    if isinstance(value, bool) or (
        isinstance(value, int) and INT_RANGE[0] <= value <= INT_RANGE[1]
    ):
        return value
    raise ValueError(f"{name}: must be true, false or a 32-bit integer, not {value!r:.60}")


@dataclass(frozen=True)
class Pref:
    name: str
    value: PrefValue
    why: str


BASE: tuple[Pref, ...] = (
    # Nothing may travel besides the page: no background traffic on the measured link.
    Pref("app.update.enabled", False, "no update checks"),
    Pref("app.update.auto", False, "no update downloads"),
    Pref("app.normandy.enabled", False, "no remote experiments"),
    Pref("app.shield.optoutstudies.enabled", False, "no studies"),
    Pref("browser.ping-centre.telemetry", False, "no telemetry pings"),
    Pref("toolkit.telemetry.enabled", False, "no telemetry"),
    Pref("toolkit.telemetry.unified", False, "no telemetry"),
    Pref("toolkit.telemetry.server", "", "no telemetry endpoint"),
    Pref("datareporting.healthreport.uploadEnabled", False, "no health report"),
    Pref("datareporting.policy.dataSubmissionEnabled", False, "no data submission"),
    Pref("browser.safebrowsing.malware.enabled", False, "no Safe Browsing list updates"),
    Pref("browser.safebrowsing.phishing.enabled", False, "no Safe Browsing list updates"),
    Pref("browser.safebrowsing.downloads.enabled", False, "no Safe Browsing lookups"),
    Pref("browser.safebrowsing.provider.mozilla.updateURL", "", "no tracking-list downloads"),
    # Release builds ignore services.settings.server unless MOZ_REMOTE_SETTINGS_DEVTOOLS=1,
    # and that variable stops the HTTP/3 testing mapping from working on the first load
    # (measured with Firefox ESR 153). Remote Settings polls are instead stopped inside the
    # client: no name but the test host resolves there (the testbed's hosts file).
    Pref("services.settings.server", "data:,", "no Remote Settings sync where honoured"),
    Pref("network.captive-portal-service.enabled", False, "no captive-portal probe"),
    Pref("network.connectivity-service.enabled", False, "no connectivity probe"),
    Pref("dom.push.enabled", False, "no push-service connection"),
    Pref("extensions.update.enabled", False, "no add-on update checks"),
    Pref("extensions.getAddons.cache.enabled", False, "no add-on metadata fetch"),
    Pref("extensions.systemAddon.update.enabled", False, "no system add-on updates"),
    Pref("browser.region.network.url", "", "no region lookup"),
    Pref("browser.search.update", False, "no search engine updates"),
    Pref("browser.newtabpage.enabled", False, "a blank new tab fetches nothing"),
    Pref("browser.startup.homepage", "about:blank", "start on a blank page"),
    Pref("browser.startup.page", 0, "start on a blank page"),
    Pref("media.gmp-manager.url", "data:,", "no media plugin downloads"),
    Pref("media.gmp-gmpopenh264.enabled", False, "no OpenH264 download"),
    Pref("security.OCSP.enabled", 0, "no OCSP requests to the testbed CA's (absent) responder"),
    Pref("security.remote_settings.crlite_filters.enabled", False, "no CRLite downloads"),
    Pref("network.trr.mode", 5, "no DNS over HTTPS"),
    # Nothing of one load may help another, and nothing may be fetched ahead of time.
    Pref("browser.cache.disk.enable", False, "no disk cache (the profile is new anyway)"),
    Pref("browser.cache.offline.enable", False, "no offline cache"),
    Pref("network.prefetch-next", False, "no link prefetching"),
    Pref("network.dns.disablePrefetch", True, "no DNS prefetching"),
    Pref("network.predictor.enabled", False, "no speculative connections from history"),
    Pref("network.http.speculative-parallel-limit", 0, "no speculative connections on hover"),
    # A recorded site's <link rel=icon> (generated pages name a data: icon): the browser's
    # fetch of it is not the page's, and it put the icon in the cache just before the
    # page's own <img> of it (python3.11-doc's py.svg), which the cache check then failed.
    Pref("browser.chrome.site_icons", False, "no favicon fetch for the tab"),
    Pref("browser.sessionstore.resume_from_crash", False, "no restored tabs"),
    # The measured page must be judged by what it draws.
    Pref("dom.enable_largest_contentful_paint", True, "LargestContentfulPaint entries"),
    Pref("privacy.reduceTimerPrecision", False, "timing entries at full precision, not 1 ms"),
    Pref("browser.tabs.remote.separatePrivilegedContentProcess", False, "fewer processes"),
)


def http_version(version: str, host: str | Sequence[str], port: int) -> tuple[Pref, ...]:
    """Force the requested HTTP version; Firefox otherwise picks the best it can. `host`:
    the testbed's server, or a recorded site's hosts (each mapped to HTTP/3)."""
    hosts = [host] if isinstance(host, str) else list(host)
    if version == "1.1":
        return (
            Pref("network.http.http2.enabled", False, "HTTP/1.1 only: no HTTP/2 over ALPN"),
            Pref("network.http.http3.enable", False, "HTTP/1.1 only: no HTTP/3"),
            Pref("network.http.altsvc.enabled", False, "ignore Alt-Svc"),
        )
    if version == "2":
        return (
            Pref("network.http.http2.enabled", True, "HTTP/2 over ALPN"),
            Pref("network.http.http3.enable", False, "HTTP/2 only: no HTTP/3"),
            Pref("network.http.altsvc.enabled", False, "ignore Alt-Svc, so no HTTP/3"),
        )
    if version == "3":
        return (
            Pref("network.http.http3.enable", True, "HTTP/3"),
            Pref(
                "network.http.http3.alt-svc-mapping-for-testing",
                ",".join(f'{h};h3=":{port}"' for h in hosts),
                "HTTP/3 from the first request, without waiting for an Alt-Svc header",
            ),
            Pref(
                "network.http.http3.disable_when_third_party_roots_found",
                False,
                "the testbed CA is a third-party root; without this Firefox falls back to h2",
            ),
            Pref(
                "network.http.http3.parallel_fallback_conn_limit",
                0,
                "no TCP connection raced beside QUIC: over GEO, where a lookup crosses the "
                "link, Firefox otherwise fetched whole origins over h2 (docs/sites.md)",
            ),
        )
    raise ValueError(f"unknown HTTP version {version!r}")


def connections(per_server: int) -> tuple[Pref, ...]:
    return (
        Pref(
            "network.http.max-persistent-connections-per-server",
            per_server,
            "the campaign's connections per server (the study: 1 for HTTP/1.1)",
        ),
        Pref(
            "network.http.max-urgent-start-excessive-connections-per-host",
            0,
            "no extra connections beyond the limit",
        ),
        Pref(
            "network.http.connection-retry-timeout",
            0,
            "no backup connection when a SYN is not answered within 250 ms, the default "
            "(every GEO handshake): with it, HTTP/1.1 with 1 connection per server used 2",
        ),
    )


def priority_signals(signals: str) -> tuple[Pref, ...]:
    """What Firefox tells the server about its requests' priorities (docs/scheduling.md).
    Its defaults: an RFC 9218 Priority header on every request whose urgency is not the
    default 3 (HTTP/2 and HTTP/3), PRIORITY_UPDATE only when the active tab changes, and
    on HTTP/2 a weight (no dependency) in every HEADERS frame, which no preference
    removes. Names and meanings from Firefox ESR 153's preference list."""
    no_header = (
        Pref("network.http.priority_header.enabled", False, "no RFC 9218 Priority header"),
        Pref("network.http.http3.priority", False, "HTTP/3: every stream at the default urgency"),
    )
    no_updates = (
        Pref("network.http.http2.priority_updates", False, "no HTTP/2 PRIORITY_UPDATE"),
        Pref(
            "network.http.http3.send_background_tabs_deprioritization",
            False,
            "no HTTP/3 PRIORITY_UPDATE",
        ),
    )
    if signals == "default":
        return ()
    if signals == "none":
        return (
            *no_header,
            *no_updates,
            Pref("network.http.http2.enabled.deps", False, "no RFC 7540 dependency tree"),
        )
    if signals == "rfc7540-tree":
        return (
            *no_header,
            *no_updates,
            Pref(
                "network.http.http2.enabled.deps",
                True,
                "HTTP/2: PRIORITY frames for idle group streams and HEADERS that depend on them",
            ),
            Pref(
                "network.http.rendering-critical-requests-prioritization",
                True,
                "the tree needs it (Firefox's default)",
            ),
        )
    raise ValueError(f"unknown priority signals {signals!r}")


CAPTURE: tuple[Pref, ...] = (
    Pref(
        "network.http.http3.enable_qlog",
        True,
        "a load with a capture keeps a qlog of every HTTP/3 connection (browser/capture.py)",
    ),
)


def layered(
    version: str,
    host: str | Sequence[str],
    port: int,
    per_server: int,
    overrides: Mapping[str, PrefValue] | None = None,
    capture: bool = False,
    signals: str = "default",
) -> dict[str, PrefValue]:
    prefs: dict[str, PrefValue] = {}
    layers = (
        BASE,
        http_version(version, host, port),
        connections(per_server),
        priority_signals(signals),
        CAPTURE if capture else (),
    )
    for layer in layers:
        prefs.update({p.name: p.value for p in layer})
    prefs.update(overrides or {})
    return prefs


def for_load(settings: BrowserSettings, setup: BrowserSetup, capture: bool) -> dict[str, PrefValue]:
    """The preferences of a Firefox that loads with `settings` on `setup`'s testbed."""
    return layered(
        settings.http,
        settings.hosts(setup),
        setup.server_port,
        settings.connections,
        settings.prefs,
        capture=capture,
        signals=settings.priority_signals,
    )


def user_js(prefs: dict[str, PrefValue]) -> str:
    return "".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in prefs.items())
