"""Chromium: finding it and chromedriver, its command-line switches as data (each with
the reason it is set, as browser/prefs.py keeps Firefox's preferences), and what its
NetLog tells about a load (the QUIC congestion control it used, every address it
connected to).

Layers, in order: BASE (every load), the requested HTTP version's switches, then the
load's own (profile directory, window, name resolution, the testbed CA's key, NetLog).
Chromium has no per-server connection setting: HTTP/1.1 opens at most 6 connections per
host (FIXED_CONNECTIONS_PER_SERVER), so a load asks for 6 or is refused."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from clarke import sh
from clarke.browser.load import BrowserSetup
from clarke.errors import EnvironmentProblem

# The real binary first: Debian's /usr/bin/chromium is a launcher script that adds the
# flags of /etc/chromium.d (extensions loaded from /usr/share, remote extensions on,
# Google API keys in the environment), none of which a measurement wants.
CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome")
FIXED_CONNECTIONS_PER_SERVER = 6
NETLOG = "netlog.json"


@dataclass(frozen=True)
class Switch:
    name: str  # without the leading dashes
    value: str | None
    why: str

    @property
    def arg(self) -> str:
        return f"--{self.name}" if self.value is None else f"--{self.name}={self.value}"


# Features turned off by name (--disable-features), each a service that would reach the
# network on its own or fetch ahead of the page.
DISABLED_FEATURES: tuple[tuple[str, str], ...] = (
    ("OptimizationHints", "no optimization-guide downloads"),
    ("OptimizationHintsFetching", "no optimization-guide hint fetches"),
    ("Translate", "no translate service"),
    ("MediaRouter", "no Cast discovery (mDNS, DIAL)"),
    ("DialMediaRouteProvider", "no DIAL discovery"),
    ("AutofillServerCommunication", "no autofill server queries"),
    ("CertificateTransparencyComponentUpdater", "no CT log list downloads"),
    ("NetworkTimeServiceQuerying", "no network time queries"),
    ("SafeBrowsingEnhancedProtection", "no real-time Safe Browsing lookups"),
    ("InterestFeedContentSuggestions", "no feed suggestions"),
    ("PrivacySandboxSettings4", "no Privacy Sandbox attestation downloads"),
    ("LoadingPredictorUseLocalPredictions", "no preconnects predicted from history"),
)

BASE: tuple[Switch, ...] = (
    Switch("headless", "new", "no display in the client's namespace or container"),
    # Chromium refuses to run as root without it; the client agent runs as root in its
    # namespace, with nothing but the testbed's page to load.
    Switch("no-sandbox", None, "the client agent runs as root"),
    Switch("disable-dev-shm-usage", None, "containers' /dev/shm is 64 MB; use /tmp"),
    Switch("no-first-run", None, "no first-run pages"),
    Switch("no-default-browser-check", None, "no default-browser prompt"),
    Switch("password-store", "basic", "no keyring daemon over D-Bus"),
    # Nothing may travel besides the page: no background traffic on the measured link.
    Switch(
        "disable-background-networking",
        None,
        "no background requests: variations (field trials) seed, GCM, update and "
        "translate checks, Safe Browsing list updates",
    ),
    Switch("disable-component-update", None, "no component updater downloads"),
    Switch("disable-sync", None, "no sync service"),
    Switch("disable-default-apps", None, "no default apps installed"),
    Switch("disable-extensions", None, "no extensions (and their update checks)"),
    Switch("disable-component-extensions-with-background-pages", None, "no background pages"),
    Switch("disable-client-side-phishing-detection", None, "no phishing model downloads"),
    Switch("safebrowsing-disable-auto-update", None, "no Safe Browsing list updates"),
    Switch("disable-domain-reliability", None, "no Domain Reliability beacons"),
    Switch("disable-breakpad", None, "no crash reports"),
    Switch("metrics-recording-only", None, "no metrics uploads (UMA records, never sends)"),
    Switch("disable-field-trial-config", None, "no field trials: the same features every load"),
    Switch("no-pings", None, "no hyperlink auditing pings"),
    Switch("dns-prefetch-disable", None, "no DNS prefetching"),
    Switch(
        "disable-features",
        ",".join(name for name, _ in DISABLED_FEATURES),
        "; ".join(f"{name}: {why}" for name, why in DISABLED_FEATURES),
    ),
    # Nothing of one load may help another (the profile directory is new anyway).
    Switch("disk-cache-size", "1", "no disk cache worth the name"),
    Switch("disable-renderer-backgrounding", None, "a headless tab is never throttled"),
    Switch("disable-background-timer-throttling", None, "timers run at full rate"),
)


def http_version(version: str, host: str | Sequence[str], port: int) -> tuple[Switch, ...]:
    """Force the requested HTTP version; Chromium otherwise picks the best it can. `host`:
    the testbed's server, or a recorded site's hosts (each forced to HTTP/3)."""
    hosts = [host] if isinstance(host, str) else list(host)
    if version == "1.1":
        return (
            Switch("disable-http2", None, "HTTP/1.1 only: no HTTP/2 over ALPN"),
            Switch("disable-quic", None, "HTTP/1.1 only: no HTTP/3 (Alt-Svc ignored)"),
        )
    if version == "2":
        return (Switch("disable-quic", None, "HTTP/2 only: no HTTP/3 (Alt-Svc ignored)"),)
    if version == "3":
        return (
            Switch("enable-quic", None, "HTTP/3"),
            Switch(
                "origin-to-force-quic-on",
                ",".join(f"{h}:{port}" for h in hosts),
                "HTTP/3 from the first request, without waiting for an Alt-Svc header",
            ),
        )
    raise ValueError(f"unknown HTTP version {version!r}")


def load_switches(
    *,
    user_data_dir: Path,
    window: tuple[int, int],
    host: str,
    address: str | None,
    ca_spki: str | None,
    netlog: Path,
    site_hosts: Sequence[str] = (),
) -> tuple[Switch, ...]:
    out = [
        Switch("user-data-dir", str(user_data_dir), "a new profile per load: no cache, no state"),
        Switch("window-size", f"{window[0]},{window[1]}", "the campaign's window"),
        Switch(
            "log-net-log",
            str(netlog),
            "the load's NetLog: the QUIC congestion control used, every address reached",
        ),
    ]
    if site_hosts:
        out.append(
            Switch(
                "host-resolver-rules",
                ", ".join(["MAP * ~NOTFOUND", *(f"EXCLUDE {h}" for h in site_hosts)]),
                "a recorded site's names resolved as the system does (the testbed's DNS "
                "across the link), every other name unresolved",
            )
        )
    elif address:
        out.append(
            Switch(
                "host-resolver-rules",
                f"MAP {host} {address}, MAP * ~NOTFOUND",
                "the test host to the server, every other name unresolved: no DNS query "
                "leaves (Chromium has its own resolver besides the hosts file)",
            )
        )
    if ca_spki:
        out.append(
            Switch(
                "ignore-certificate-errors-spki-list",
                ca_spki,
                "trust chains holding the testbed CA's key: the server sends the CA, and "
                "Chromium's QUIC takes no locally added root (a pin is the way it allows)",
            )
        )
    return tuple(out)


def switches(version: str, port: int, **load: Any) -> list[str]:
    """The command line's switches for one load (load: load_switches' arguments)."""
    host = load.get("site_hosts") or load["host"]
    return [s.arg for s in (*BASE, *http_version(version, host, port), *load_switches(**load))]


def switches_in(
    setup: BrowserSetup,
    http: str,
    window: tuple[int, int],
    profile: Path,
    site_hosts: Sequence[str] = (),
) -> list[str]:
    """The switches for one load by the client agent (its `setup`), in a new `profile`
    directory (its user data and NetLog inside)."""
    return switches(
        http,
        setup.server_port,
        user_data_dir=profile / "data",
        window=window,
        host=setup.server_name,
        address=setup.server_address,
        ca_spki=spki_sha256(setup.ca_cert) if setup.ca_cert else None,
        netlog=profile / NETLOG,
        site_hosts=site_hosts,
    )


def spki_sha256(cert_pem: Path) -> str:
    """base64(SHA-256(SubjectPublicKeyInfo)) of a PEM certificate, the form
    --ignore-certificate-errors-spki-list takes."""
    cert = x509.load_pem_x509_certificate(cert_pem.read_bytes())
    der = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def find_chromium(wanted: str | None = None) -> str:
    names = (wanted,) if wanted else CANDIDATES
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise EnvironmentProblem(
        f"no Chromium found (looked for {', '.join(names)}); install the Debian packages "
        "chromium and chromium-driver (ci/setup.sh installs both)"
    )


def find_chromedriver() -> str:
    found = shutil.which("chromedriver")
    if not found:
        raise EnvironmentProblem(
            "chromedriver is not installed (Debian package chromium-driver; ci/setup.sh "
            "installs it)"
        )
    return found


def version(binary: str) -> str:
    """ "156.0.8078.79" from "Chromium 156.0.8078.79 built on Debian GNU/Linux 12"."""
    out = sh.run([binary, "--version"], timeout=30).stdout.strip()
    m = re.search(r"(\d+\.\d+\.\d+\.\d+)", out)
    return m.group(1) if m else out


def make_profile(parent: Path | None = None) -> Path:
    """A new, empty user-data-dir."""
    return Path(tempfile.mkdtemp(prefix="clarke-chromium-", dir=parent))


def netlog_summary(path: Path) -> dict[str, Any]:
    """From a NetLog file: the QUIC congestion control each QUIC session configured
    (Chromium's own, for what it sends: requests and acknowledgements) and every
    address:port a socket connected to. Empty when Chromium wrote no NetLog."""
    try:
        log = json.loads(path.read_text())
    except (OSError, ValueError):
        # Chromium ends the file's event list as it exits; a file cut short is repaired
        # the way Chromium's own viewer does it.
        try:
            log = json.loads(path.read_text().rstrip().rstrip(",") + "]}")
        except (OSError, ValueError):
            return {}
    names = {v: k for k, v in log.get("constants", {}).get("logEventTypes", {}).items()}
    return summarize(log.get("events", []), names)


def summarize(events: list[dict[str, Any]], names: dict[int, str]) -> dict[str, Any]:
    """netlog_summary's figures from NetLog events (`names`: event type -> name)."""
    quic_cc: list[str] = []
    address_of: dict[int, str] = {}  # UDP socket (NetLog source id) -> its peer
    sent: set[int] = set()  # UDP sockets that sent a datagram
    reached: set[str] = set()
    for event in events:
        name = names.get(event.get("type", -1), "")
        params = event.get("params") or {}
        source = int((event.get("source") or {}).get("id", -1))
        if name == "QUIC_CONGESTION_CONTROL_CONFIGURED":
            quic_cc.append(str(params.get("congestion_control_type", "")))
        elif name == "TCP_CONNECT_ATTEMPT" and params.get("address"):
            reached.add(str(params["address"]))  # a SYN went out, answered or not
        elif name == "UDP_CONNECT" and params.get("address"):
            address_of[source] = str(params["address"])
        elif name == "UDP_BYTES_SENT":
            sent.add(source)
    # A UDP connect alone sends nothing: Chromium probes for its own address with one to
    # a public address (no route reaches it here), and that is not traffic.
    reached |= {address_of[s] for s in sent if s in address_of}
    return {
        "quic_cc": sorted(set(quic_cc)),
        "reached": sorted(reached),
    }


class NetlogTail:
    """The NetLog of a Chromium kept between loads (context isolation), read as it
    grows: Chromium writes one event per line (`{...},`) after a first line with the
    constants, and ends the list only when it exits. Each load takes the events from
    its own start on (a NetLog time plus the file's `timeTickOffset` is Unix ms); lines
    Chromium has not finished writing wait for the next read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._names: dict[int, str] = {}
        self._tick_offset: float | None = None
        # A UDP socket connected in one load may send in the next (its NetLog source id
        # is kept across reads, so its address is known).
        self._address_of: dict[int, dict[str, Any]] = {}

    def _lines(self) -> list[bytes]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        return [line.strip().rstrip(b",") for line in complete.split(b"\n") if line.strip()]

    def _head(self, line: bytes) -> None:
        """The first line: {"constants": {...}, possibly with "events": [ after it."""
        text = line.decode(errors="replace")
        cut = text.find(',"events"')
        head = json.loads((text[:cut] if cut >= 0 else text) + "}")
        constants = head.get("constants", {})
        self._names = {v: k for k, v in constants.get("logEventTypes", {}).items()}
        self._tick_offset = float(constants.get("timeTickOffset", 0))

    def since(self, unix_ms: float) -> dict[str, Any]:
        """netlog_summary's figures for the events written since `unix_ms`."""
        events: list[dict[str, Any]] = []
        for line in self._lines():
            if self._tick_offset is None and line.startswith(b'{"constants"'):
                try:
                    self._head(line)
                except ValueError:
                    return {}
                continue
            if not line.startswith(b"{"):
                continue  # "events": [
            try:
                event = json.loads(line)
            except ValueError:
                continue
            name = self._names.get(event.get("type", -1), "")
            source = int((event.get("source") or {}).get("id", -1))
            if name == "UDP_CONNECT":
                self._address_of[source] = event
            try:
                at = float(event.get("time", 0)) + (self._tick_offset or 0)
            except (TypeError, ValueError):
                continue
            if at >= unix_ms:
                events.append(event)
        # Sockets connected before this load that sent during it.
        sending = {
            int((e.get("source") or {}).get("id", -1))
            for e in events
            if self._names.get(e.get("type", -1), "") == "UDP_BYTES_SENT"
        }
        earlier = [
            self._address_of[s]
            for s in sending
            if s in self._address_of and self._address_of[s] not in events
        ]
        if self._tick_offset is None:
            return {}
        return summarize(earlier + events, self._names)
