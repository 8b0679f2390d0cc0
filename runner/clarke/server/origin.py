"""origin, Clarke's own web server (origin/README.md), in the server role: HTTP/1.1, /2
and /3 with the congestion control chosen per protocol, per-connection statistics on a
control endpoint that only this role's agent reaches (the loopback of its place)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import ClassVar

import httpx

from clarke import paths, tls
from clarke.campaign.dimensions import CC, INITIAL_WINDOW, SCHEDULER, SITE
from clarke.campaign.initial_window import IW_DEFAULT, IW_FIELD, QUIC_DATAGRAM_BYTES
from clarke.errors import ClarkeError, EnvironmentProblem, InputError
from clarke.json_value import JsonObject, object_at
from clarke.place import Place, procs
from clarke.place.plan import HTTPS_PORT, ORIGIN_CONTROL
from clarke.roles import EVERY, Capabilities, RoleProcess, ServerImplementation, health_of
from clarke.server import serve_link_checks, tcp_cc
from clarke.server import site as sites
from clarke.vocab import CongestionControl, Scheduler

START_TIMEOUT_S = 30.0
SETTINGS = ("tcp_cc", "quic_cc", "quic_initial_window", "scheduler")
# origin's own scheduler: h2's and quinn's round-robin, untouched (origin/README.md).
OWN_SCHEDULER = Scheduler.round_robin


def origin_binary() -> Path | None:
    """$CLARKE_ORIGIN, else the checkout's release build, else `origin` on PATH."""
    env = os.environ.get("CLARKE_ORIGIN")
    root = paths.source_root()
    for candidate in (
        Path(env) if env else None,
        root / "origin/target/release/origin" if root else None,
        Path(shutil.which("origin") or "/nonexistent"),
    ):
        if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


class OriginServer:
    role = "server"
    implementation = "origin"

    def __init__(self, place: Place, binary: Path) -> None:
        self.place, self.binary = place, binary
        self.children = procs.Children()
        self._http = httpx.Client(base_url=f"http://{ORIGIN_CONTROL}", timeout=15, trust_env=False)
        self.site: sites.PlacedSite | None = None
        self.initial_window = IW_DEFAULT  # in force: the kernel's and quinn's own
        self.site_addresses = sites.Addresses(place)
        # Set while origin is restarted on purpose (a site): the agent's supervisor, which
        # stops the role when a child has exited, must not take that for a death.
        self._restarting = False

    def start(self, site: sites.PlacedSite | None = None) -> None:
        """origin serving the pages and, with `site`, a recorded site on the addresses
        its placement gives (added to the server's LAN interface first)."""
        place = self.place
        pki = tls.ensure_testbed_pki(place.pki_dir, label=place.substrate)
        place.pages_dir.mkdir(parents=True, exist_ok=True)
        place.run_dir.mkdir(parents=True, exist_ok=True)
        argv = [
            str(self.binary), "--root", str(place.pages_dir),
            "--listen", f"{place.plan.addresses['server']}:{HTTPS_PORT}",
            "--cert", str(pki.cert), "--key", str(pki.key),
            "--control", ORIGIN_CONTROL,
            "--tcp-cc", CongestionControl.cubic, "--quic-cc", CongestionControl.cubic,
            "--log", str(place.run_dir / "origin-connections.log"),
        ]  # fmt: skip
        if site is not None:
            self.site_addresses.add(site.placement.distinct)
            argv += ["--site", str(site.directory), "--site-certs", str(site.certs_dir)]
            argv += site.limit_options()
            for listen in site.listen():
                argv += ["--site-listen", listen]
        self.children.spawn("origin", place.argv(argv))

        def answering() -> bool:
            try:
                self._http.get("/health", timeout=1)
            except httpx.TransportError:
                return False
            return True

        self.children.started("origin", answering, "origin", START_TIMEOUT_S, lambda: "")
        self.site = site
        if "iperf3" not in self.children.procs:
            serve_link_checks(place, self.children)

    def _serve_site(self, name: str | None) -> None:
        """Restart origin with site `name` (None: without a site), keeping the settings
        in force. The site is read, placed and given its certificates before origin
        stops, so a broken archive leaves the running one as it was."""
        site = sites.prepare(self.place, name) if name is not None else None
        settings = {k: v for k, v in self.state().items() if k in SETTINGS}
        self._restarting = True
        try:
            self.children.stop("origin")
            self.site = None
            self.site_addresses.remove()
            try:
                self.start(site)
            except ClarkeError:
                # The pages go on being served; the site's failure is the answer.
                self.children.stop("origin")
                self.site_addresses.remove()
                self.start(None)
                raise
        finally:
            self._restarting = False
        kept = {k: v for k, v in settings.items() if v is not None}
        if kept:
            self._call("POST", "/config", kept)

    def _call(self, method: str, path: str, body: JsonObject | None = None) -> JsonObject:
        try:
            resp = self._http.request(method, path, json=body)
        except httpx.TransportError as e:
            raise ClarkeError(f"origin's control endpoint {ORIGIN_CONTROL}: {e}") from None
        if resp.status_code >= 400:
            raise InputError(f"origin refused {method} {path}: {resp.text.strip()}")
        return resp.json() if resp.content else {}

    # --- the contract --------------------------------------------------------------------
    def state(self) -> JsonObject:
        settings = object_at(self._call("GET", "/health"), "settings")
        return {
            **{k: settings.get(k) for k in SETTINGS},
            IW_FIELD: self.initial_window,
            sites.SITE_KEY: self.site.name if self.site else None,
        }

    def _set_initial_window(self, value: str) -> None:
        """TCP's initial window on the route towards the clients (read at accept from
        TCP_INFO in each connection's record), QUIC's in origin's own settings."""
        segments = None if value == IW_DEFAULT else int(value)
        plan = self.place.plan
        tcp_cc.set_route_metric(
            "initcwnd",
            segments,
            str(plan.remote_lan("server").prefix),
            plan.next_hop("server"),
            self.place.ns,
        )
        quic = None if segments is None else segments * QUIC_DATAGRAM_BYTES
        self._call("POST", "/config", {"quic_initial_window": quic})
        self.initial_window = value

    def configure(self, body: JsonObject) -> JsonObject:
        """{"tcp_cc", "quic_cc", "quic_initial_window", "scheduler", "site"} (any
        subset), sent to origin only when something differs from what is in force;
        scheduler `own` is origin's round-robin; `site` restarts origin with that site
        (server/site.py). Any other key is refused (origin would refuse it too; compared
        with what is in force, a null one would have passed as a no-op)."""
        allowed = (*SETTINGS, IW_FIELD, sites.SITE_KEY)
        unknown = sorted(set(body) - set(allowed))
        if unknown:
            raise InputError(
                f"unknown key(s) {', '.join(map(repr, unknown))} in POST /config; "
                f"allowed: {', '.join(allowed)}"
            )
        if body.get("scheduler") == Scheduler.own:
            body = {**body, "scheduler": OWN_SCHEDULER.value}
        current = self.state()
        if all(current.get(k) == v for k, v in body.items()):
            return {"applied": False, "state": current}
        body = dict(body)
        if sites.SITE_KEY in body:
            name = sites.check_name(body.pop(sites.SITE_KEY))
            if name != current[sites.SITE_KEY]:
                self._serve_site(name)
        window = body.pop(IW_FIELD, None)
        if window is not None and window != self.initial_window:
            self._set_initial_window(str(window))
        if body:
            self._call("POST", "/config", body)
        return {"applied": True, "state": self.state()}

    def health(self) -> JsonObject:
        return health_of(
            self.role,
            self.implementation,
            origin=self._call("GET", "/health"),
        )

    def stats(self) -> JsonObject:
        return self._call("GET", "/stats")

    def reset_stats(self) -> JsonObject:
        return self._call("POST", "/stats/reset")

    def problem(self) -> str | None:
        return None if self._restarting else self.children.exited()

    def stop(self) -> None:
        self.children.stop()
        self.site_addresses.remove()
        self._http.close()


class Origin(ServerImplementation):
    name = "origin"
    summary = "Clarke's own server (origin/): congestion control and wire bytes per connection"
    supports: ClassVar[Capabilities] = {
        CC.name: EVERY,
        SCHEDULER.name: EVERY,
        SITE.name: EVERY,
        INITIAL_WINDOW.name: EVERY,
    }
    own_scheduler = "round-robin: h2's per DATA frame, quinn's per STREAM frame"
    install = "build it with `cargo build --release` in origin/ (ci/build.sh), or set CLARKE_ORIGIN"
    reports_handshakes = True  # tls_handshake in every TLS connection's record
    holds_responses = True  # server_delays_ms: each response held as the page asks

    def check_environment(self) -> None:
        if origin_binary() is None:
            raise EnvironmentProblem(f"the origin binary is missing: {self.install}")

    def start(self, place: Place) -> RoleProcess:
        binary = origin_binary()
        if binary is None:
            raise EnvironmentProblem(f"the origin binary is missing: {self.install}")
        server = OriginServer(place, binary)
        try:
            server.start()
        except BaseException:
            server.stop()
            raise
        return server
