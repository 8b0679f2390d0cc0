"""`clarke site record URL`: load a page in headless Firefox or Chromium (Selenium, a
new profile) through mitmdump, and import the HAR mitmdump writes as a site archive
(docs/sites.md).

mitmdump runs as a child process in a session of its own (a Ctrl-C at the terminal
reaches Clarke, which ends it by PID, so it still writes its HAR), on 127.0.0.1 and a
free port, with the addon browser/mitm_addon.py. It asks every client for credentials
made for this recording (browser/proxy_auth.py), which only the browser answers with:
no other local user gets a request through it, or into the archive.
`--resolve HOST=ADDRESS[:PORT]` sends a host to a given address instead of the
resolver's; `--only-resolved` refuses every other host, so a recording of local servers
never leaves the machine."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clarke import sh
from clarke.browser import chromium, firefox, proxy_auth
from clarke.browser import prefs as firefox_prefs
from clarke.errors import EnvironmentProblem, InputError
from clarke.sites import archive
from clarke.sites.har import HarOptions, import_har
from clarke.sites.store import Imported
from clarke.vocab import Browser

log = logging.getLogger(__name__)
ADDON = Path(__file__).with_name("mitm_addon.py")
HOST = re.compile(
    r"^(?=.{1,253}\Z)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)
# The browser's own services, which it reaches through the proxy whatever its preferences
# or switches say: never connected to, and left out of the HAR, so never recorded as the
# page's. Firefox (release builds ignore services.settings.server: browser/prefs.py):
# Remote Settings was seen in every recording; the other two serve its attachments and
# its signatures. Chromium 156 (Debian's) asked, in the first recording of the corpus
# here, its component updater (plain HTTP, despite --disable-component-update) and its
# default search engine's start page.
BROWSER_SERVICES: dict[Browser, tuple[str, ...]] = {
    Browser.firefox: (
        "firefox.settings.services.mozilla.com",
        "firefox-settings-attachments.cdn.mozilla.net",
        "content-signature-2.cdn.mozilla.net",
    ),
    Browser.chromium: ("update.googleapis.com", "start.duckduckgo.com"),
}
MITM_START_S = 60.0
MITM_STOP_S = 30.0


@dataclass(frozen=True)
class Resolve:
    """Connect to `address` (and `port`, if given) whenever the page asks for `host`."""

    host: str
    address: str
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Resolve:
        """`HOST=ADDRESS`, `HOST=ADDRESS:PORT` or `HOST=[IPv6]:PORT`; InputError naming
        what is wrong."""
        where = f"--resolve {text}"
        host, sep, target = text.partition("=")
        host = host.strip().lower().rstrip(".")
        if not sep or not HOST.fullmatch(host):
            raise InputError(f"{where}: say HOST=ADDRESS[:PORT] with a DNS name as HOST")
        m = re.fullmatch(r"\[([0-9a-fA-F:.]+)\](?::(\d+))?|([0-9.]+)(?::(\d+))?", target.strip())
        if m is None:
            raise InputError(
                f"{where}: {target!r} is not an IP address[:port] ([IPv6]:port for IPv6)"
            )
        address, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise InputError(f"{where}: {address!r} is not an IP address") from None
        if port is not None and not 1 <= int(port) <= 65535:
            raise InputError(f"{where}: port {port} is not in 1-65535")
        return cls(host, address, int(port) if port else None)


@dataclass(frozen=True)
class RecordOptions:
    url: str
    out: Path
    resolve: tuple[Resolve, ...] = ()
    only_resolved: bool = False
    upstream_ca: Path | None = None  # the CA mitmdump trusts for the servers, not certifi's
    name: str | None = None
    settle_ms: int = 2000  # after the load event: no new resource entry for this long
    timeout_s: float = 120.0
    firefox: str | None = None
    keep_har: Path | None = None
    browser: Browser = Browser.firefox
    chromium: str | None = None  # its binary (default: chromium.CANDIDATES)


def _checked(opts: RecordOptions) -> str:
    """The page's URL, normalised; InputError for what cannot be recorded, before any
    process starts."""
    if not opts.url.lower().startswith("https://"):
        raise InputError(f"{opts.url}: only https URLs are recorded (archives hold https)")
    try:
        url = archive.normalise(opts.url)
    except ValueError as e:
        raise InputError(f"{opts.url}: {e}") from None
    if opts.out.exists() and (not opts.out.is_dir() or any(opts.out.iterdir())):
        raise InputError(f"{opts.out}: exists and is not empty (a recording writes a new archive)")
    hosts = [r.host for r in opts.resolve]
    if len(set(hosts)) != len(hosts):
        raise InputError(f"--resolve: a host is given twice ({', '.join(sorted(hosts))})")
    if opts.upstream_ca is not None and not opts.upstream_ca.is_file():
        raise InputError(f"--upstream-ca {opts.upstream_ca}: no such file")
    if opts.only_resolved and archive.split_url(url)[0] not in hosts:
        raise InputError(f"{url}: --only-resolved, but its host is not in --resolve")
    if opts.settle_ms < 0 or opts.timeout_s <= 0:
        raise InputError("--settle-ms must be >= 0 and --timeout > 0")
    return url


def record(opts: RecordOptions) -> Imported:
    """Record `opts.url` and write its archive to `opts.out`."""
    url = _checked(opts)
    mitmdump = shutil.which("mitmdump")
    if mitmdump is None:
        raise EnvironmentProblem(
            "mitmdump is not installed (ci/setup.sh installs mitmproxy 11.0.2)"
        )
    with tempfile.TemporaryDirectory(prefix="clarke-record-") as tmp:
        scratch = Path(tmp)
        har = scratch / "site.har"
        proxy = _Mitmdump(mitmdump, scratch, har, opts)
        try:
            proxy.start()
            if opts.browser is Browser.chromium:
                _load_chromium(url, proxy, scratch, opts)
            else:
                _load(url, proxy, scratch, opts)
        except BaseException:
            # Interrupted (Ctrl-C) or failed: no HAR will be read, so mitmdump is killed
            # rather than asked to write one while it may hold a connection that hangs.
            proxy.kill()
            raise
        proxy.stop()
        if not har.is_file():
            raise EnvironmentProblem(f"mitmdump wrote no HAR: {proxy.log_tail()}")
        _check_page_recorded(har, url, proxy.connect_errors())
        if opts.keep_har is not None:
            shutil.copyfile(har, opts.keep_har)
        imported = import_har(har, opts.out, HarOptions(opts.name, url, False))
        # Connections that failed leave no entry in the HAR: listed with what was left out.
        imported.skipped += [f"no connection: {e}" for e in proxy.connect_errors()]
        return imported


def har_filter(services: tuple[str, ...]) -> str:
    """A mitmproxy filter for every flow but those to `services` (a refused plain-HTTP
    request is a flow without a response; refused HTTPS leaves none) and those the proxy
    answered 407 itself (the addon marks them: requests without the recording's
    credentials, a browser's first try or another user's)."""
    return "!(" + " | ".join(f"~d {re.escape(h)}" for h in services) + ") & !~marked"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Mitmdump:
    """mitmdump on 127.0.0.1, a child in its own session, ended by its PID."""

    def __init__(self, binary: str, scratch: Path, har: Path, opts: RecordOptions) -> None:
        self.port = _free_port()
        self.confdir = scratch / "mitmproxy"
        self.ca_cert = self.confdir / "mitmproxy-ca-cert.pem"
        self.log = scratch / "mitmdump.log"
        self.errors = scratch / "connect-errors.jsonl"
        resolve = {r.host: [r.address, r.port] for r in opts.resolve}
        self.services = BROWSER_SERVICES[opts.browser]
        self.secret = proxy_auth.ProxySecret.new()  # in confdir's config.yaml, at start
        # fmt: off
        self.argv = [
            binary, "--listen-host", "127.0.0.1", "--listen-port", str(self.port),
            "-s", str(ADDON),
            "--set", f"confdir={self.confdir}", "--set", f"hardump={har}",
            "--set", f"clarke_resolve={json.dumps(resolve)}",
            "--set", f"clarke_only_resolved={str(opts.only_resolved).lower()}",
            "--set", f"clarke_refuse={json.dumps(self.services)}",
            "--set", f"clarke_errors={self.errors}",
            "--set", f"save_stream_filter={har_filter(self.services)}",
        ]
        # fmt: on
        if opts.upstream_ca is not None:
            self.argv += ["--set", f"ssl_verify_upstream_trusted_ca={opts.upstream_ca.resolve()}"]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.secret.write_mitmproxy_config(self.confdir)
        with self.log.open("wb") as out:
            self.proc = sh.spawn(
                self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + MITM_START_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EnvironmentProblem(
                    f"mitmdump exited {self.proc.returncode} at start: {self.log_tail()}"
                )
            if self.ca_cert.is_file():
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    return
                except OSError:
                    pass
            time.sleep(0.1)
        raise EnvironmentProblem(
            f"mitmdump did not listen on 127.0.0.1:{self.port} within {MITM_START_S:.0f} s: "
            f"{self.log_tail()}"
        )

    def stop(self) -> None:
        """SIGINT (mitmdump writes its HAR as it shuts down), then SIGKILL if it hangs."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(MITM_STOP_S)
        except subprocess.TimeoutExpired:
            log.warning(
                "mitmdump (pid %d) did not stop within %.0f s: killed", proc.pid, MITM_STOP_S
            )
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        """SIGKILL, by its PID, and wait for it."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def connect_errors(self) -> list[str]:
        """The server connections that failed, as "host (address:port): why"."""
        try:
            lines = self.errors.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        found: dict[str, int] = {}
        for line in lines:
            e = json.loads(line)
            if e["host"] in self.services:
                continue
            where = ":".join(str(x) for x in e["address"]) if e["address"] else "?"
            text = f"{e['host']} ({where}): {e['error']}"
            found[text] = found.get(text, 0) + 1
        return [f"{text} ({n} times)" if n > 1 else text for text, n in found.items()]

    def log_tail(self) -> str:
        try:
            text = self.log.read_text(errors="replace").strip()
        except OSError:
            return "(no log)"
        return text[-1500:] or "(empty log)"


def proxy_prefs(port: int) -> tuple[firefox_prefs.Pref, ...]:
    """Every request through mitmdump; HTTP/3 off, as no HTTP proxy carries QUIC."""
    why = "every request through mitmdump, which records it"
    return (
        firefox_prefs.Pref("network.proxy.type", 1, "a manual proxy: mitmdump"),
        firefox_prefs.Pref("network.proxy.http", "127.0.0.1", why),
        firefox_prefs.Pref("network.proxy.http_port", port, why),
        firefox_prefs.Pref("network.proxy.ssl", "127.0.0.1", why),
        firefox_prefs.Pref("network.proxy.ssl_port", port, why),
        firefox_prefs.Pref("network.proxy.no_proxies_on", "", "no host bypasses the proxy"),
        firefox_prefs.Pref(
            "network.proxy.allow_hijacking_localhost", True, "localhost too goes through it"
        ),
        firefox_prefs.Pref("network.http.http3.enable", False, "QUIC cannot cross an HTTP proxy"),
    )


def _load(url: str, proxy: _Mitmdump, scratch: Path, opts: RecordOptions) -> None:
    """Load `url` in headless Firefox through the proxy, wait until no new resource
    entry appears for `settle_ms`, quit. BiDi on: it answers the proxy's challenge."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium must not look for drivers on the network
    from selenium import webdriver
    from selenium.webdriver.firefox.options import Options
    from selenium.webdriver.firefox.service import Service

    binary = firefox.find_firefox(opts.firefox)
    prefs = {p.name: p.value for p in (*firefox_prefs.BASE, *proxy_prefs(proxy.port))}
    profile = firefox.make_profile(proxy.ca_cert, prefs, parent=scratch)
    options = Options()
    options.binary_location = binary
    for arg in ("-headless", "-no-remote", "-profile", str(profile)):
        options.add_argument(arg)
    options.enable_bidi = True
    driver_log = scratch / "geckodriver.log"
    service = Service(executable_path=firefox.find_geckodriver(), log_output=str(driver_log))
    _drive(
        lambda: webdriver.Firefox(options=options, service=service),
        lambda driver: proxy_auth.answer_in_firefox(driver, proxy.secret),
        _end_by_pid,
        url,
        opts,
        driver_log,
    )


def _drive(
    start: Callable[[], Any],
    answer: Callable[[Any], None],
    end: Callable[[Any], None],
    url: str,
    opts: RecordOptions,
    driver_log: Path,
) -> None:
    """Start the browser (`start`), make it answer the proxy's challenge (`answer`),
    load `url` and settle, quit; `end` kills it where a load was interrupted (Ctrl-C)
    or failed mid-way, as quit() would wait for the navigation. A driver that fails or
    drops its connection (HTTP to the driver, or BiDi's WebSocket to the browser) is an
    EnvironmentProblem that carries the tail of the driver's log, which is removed with
    the recording's scratch directory."""
    name, driver_errors = opts.browser.value.capitalize(), _driver_errors()
    try:
        driver = start()
    except driver_errors as e:
        raise _driver_failed(f"could not start {name}", e, driver_log) from None
    try:
        try:
            answer(driver)
        except driver_errors as e:
            raise _driver_failed(
                f"{name} cannot answer the recording proxy's authentication", e, driver_log
            ) from None
        try:
            _navigate(driver, url, opts)
        except driver_errors as e:
            raise _driver_failed(f"{name} failed while loading {url}", e, driver_log) from None
    except BaseException:
        end(driver)
        raise
    try:
        driver.quit()
    except Exception as e:  # the browser may be gone already
        log.info("%s did not quit cleanly: %s", name, e)


def _driver_errors() -> tuple[type[BaseException], ...]:
    from selenium.common.exceptions import WebDriverException
    from urllib3.exceptions import HTTPError
    from websocket import WebSocketException

    # OSError: a connection reset or refused under the driver's own layers, raised raw
    # by the WebSocket client when it sends on a connection the browser dropped.
    return (WebDriverException, HTTPError, WebSocketException, OSError)


def _driver_failed(what: str, error: BaseException, driver_log: Path) -> EnvironmentProblem:
    from selenium.common.exceptions import WebDriverException

    why = (error.msg or str(error)) if isinstance(error, WebDriverException) else str(error)
    try:
        tail = driver_log.read_text(errors="replace").strip()[-2000:] or "(empty)"
    except OSError:
        tail = "(no log)"
    return EnvironmentProblem(
        f"{what}: {type(error).__name__}: {why.strip()}\n{driver_log.name}, its end:\n{tail}"
    )


def proxy_switches(port: int, mitm_ca: Path) -> tuple[chromium.Switch, ...]:
    """Every request through mitmdump, whose certificates Chromium takes by their key;
    HTTP/3 off, as no HTTP proxy carries QUIC."""
    return (
        chromium.Switch("proxy-server", f"http://127.0.0.1:{port}", "mitmdump records"),
        chromium.Switch(
            "proxy-bypass-list", "<-loopback>", "no host bypasses the proxy, loopback neither"
        ),
        chromium.Switch(
            "ignore-certificate-errors-spki-list",
            chromium.spki_sha256(mitm_ca),
            "mitmdump's certificates: it signs each with its CA's key, which they carry",
        ),
        chromium.Switch("disable-quic", None, "QUIC cannot cross an HTTP proxy"),
    )


def _load_chromium(url: str, proxy: _Mitmdump, scratch: Path, opts: RecordOptions) -> None:
    """Load `url` in headless Chromium through the proxy (the measured loads' base
    switches: no background traffic), settle as Firefox does, quit. No BiDi: the
    DevTools protocol answers the proxy's challenge (browser/proxy_auth.py)."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium must not look for drivers on the network
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chromium.find_chromium(opts.chromium)
    profile = scratch / "browser-profile"
    own = (chromium.Switch("user-data-dir", str(profile), "a new profile"),)
    for switch in (*chromium.BASE, *proxy_switches(proxy.port, proxy.ca_cert), *own):
        options.add_argument(switch.arg)
    driver_log = scratch / "chromedriver.log"
    service = Service(
        executable_path=chromium.find_chromedriver(),
        log_output=str(driver_log),
        # A session of its own, ended as a group: chromedriver and Chromium's processes.
        popen_kw={"start_new_session": True},
    )
    _drive(
        lambda: webdriver.Chrome(options=options, service=service),
        lambda driver: proxy_auth.answer_in_chromium(driver, proxy.secret, proxy.port),
        _end_group,
        url,
        opts,
        driver_log,
    )


def _end_group(driver: Any) -> None:
    """SIGKILL to chromedriver's process group (Chromium and its helpers are in it)."""
    process = driver.service.process
    if process is not None and process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _navigate(driver: Any, url: str, opts: RecordOptions) -> None:
    from selenium.common.exceptions import WebDriverException

    driver.set_page_load_timeout(opts.timeout_s)
    try:
        driver.get(url)
    except WebDriverException as e:
        # Firefox's error pages (a refused or failed connection) raise here; what the
        # proxy saw is in the HAR, and _check_page_recorded names it.
        log.info("%s: %s", opts.browser, (e.msg or str(e)).strip())
        return
    _settle(driver, opts.settle_ms, time.monotonic() + opts.timeout_s)


def _end_by_pid(driver: Any) -> None:
    """SIGKILL to Firefox (its PID from the session's capabilities) and to geckodriver."""
    pid = driver.capabilities.get("moz:processID")
    if isinstance(pid, int):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process = driver.service.process
    if process is not None and process.poll() is None:
        process.kill()
        process.wait()


def _settle(driver: Any, settle_ms: int, deadline: float) -> None:
    count, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = len(driver.execute_script("return performance.getEntriesByType('resource')"))
        if now != count:
            count, since = now, time.monotonic()
        elif (time.monotonic() - since) * 1000 >= settle_ms:
            return
        time.sleep(0.1)


def _check_page_recorded(har: Path, url: str, connect_errors: list[str]) -> None:
    """InputError naming why, when the page itself got no response (a name that does
    not resolve, a host refused by --only-resolved, a server that is down)."""
    try:
        entries = json.loads(har.read_text(encoding="utf-8"))["log"]["entries"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise EnvironmentProblem(f"mitmdump's HAR is unreadable: {e}") from None
    errors = []
    for entry in entries:
        try:
            same = archive.normalise(entry["request"]["url"]) == url
        except (KeyError, TypeError, ValueError):
            continue
        if not same:
            continue
        response = entry.get("response") or {}
        if response.get("status"):
            return
        errors.append(str(response.get("_error") or "no response"))
    host = archive.split_url(url)[0]
    failed = [e for e in connect_errors if e.startswith(f"{host} ")]
    if failed:
        why = f"could not connect to {failed[0]}"
    elif errors:
        why = errors[0]
    else:
        why = "the browser did not request it through the proxy"
    raise InputError(f"{url}: not recorded: {why}")
