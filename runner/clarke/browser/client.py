"""The client role: a browser that loads one page per request, inside the client's
place, with the browser and engine the request names (browser/engines). The browser
binaries, the testbed CA and the server's name are fixed when the role starts
(BrowserSetup); a request carries values only (browser/load.py).

Both browsers are implementations of the client role (registry: firefox, chromium); a
client agent serves loads in every browser installed in its place, so that a campaign
can interleave browsers on one testbed (`browser: [firefox, chromium]`). The one it was
started as is its default, and the one it checks for at start."""

from __future__ import annotations

from clarke import __version__
from clarke.browser import chromium, contexts, firefox, prestart
from clarke.browser.load import BrowserSetup, LoadRequest, LoadResult
from clarke.errors import ClarkeError, UnknownName
from clarke.json_value import JsonObject
from clarke.place import Place
from clarke.place.plan import HTTPS_PORT
from clarke.roles import Implementation, RoleProcess
from clarke.tls import DEFAULT_HOST
from clarke.vocab import ENGINES, Browser, Engine


def _load(engine: Engine, req: LoadRequest, setup: BrowserSetup) -> LoadResult:
    """One load by `engine`, whose module is imported here: the registry holds this
    module, and every role's agent reads the registry, a browser only the client's."""
    if engine is Engine.browsertime:
        from clarke.browser import browsertime_engine

        return browsertime_engine.load(req, setup)
    from clarke.browser import selenium_engine

    return selenium_engine.load(req, setup)


class BrowserClient:
    """Every load a new browser process with a new profile, or (context isolation) a new
    context in a browser kept between loads."""

    role = "client"

    def __init__(
        self,
        place: Place,
        binary: str | None = None,
        implementation: str = Browser.firefox,
        chromium_binary: str | None = None,
    ) -> None:
        self.place = place
        self.implementation = implementation
        self.setup = BrowserSetup(
            firefox=binary,
            chromium=chromium_binary,
            ca_cert=place.pki_dir / "ca.pem",
            server_name=DEFAULT_HOST,
            server_port=HTTPS_PORT,
            server_address=place.plan.addresses.get("server"),
        )
        self.loads = 0

    def health(self) -> JsonObject:
        out: JsonObject = {
            "role": self.role,
            "implementation": self.implementation,
            "clarke": __version__,
        }
        try:
            binary = firefox.find_firefox(self.setup.firefox)
            out |= {Browser.firefox: binary, f"{Browser.firefox}_version": firefox.version(binary)}
        except ClarkeError as e:
            out["firefox_error"] = str(e)
        try:
            binary = chromium.find_chromium(self.setup.chromium)
            chromium.find_chromedriver()
            out |= {
                Browser.chromium: binary,
                f"{Browser.chromium}_version": chromium.version(binary),
            }
        except ClarkeError as e:
            out["chromium_error"] = str(e)
        error = out.get(f"{self.implementation}_error")
        return out | ({"ready": False, "error": error} if error else {"ready": True})

    def state(self) -> JsonObject:
        return {}

    def configure(self, body: JsonObject) -> JsonObject:
        return {"applied": False, "state": {}}

    def stats(self) -> JsonObject:
        return {"loads": self.loads}

    def reset_stats(self) -> JsonObject:
        return {}

    def problem(self) -> str | None:
        return None

    def stop(self) -> None:
        prestart.SPARES.discard()
        contexts.RESIDENT.discard()

    def load(self, body: JsonObject, engine: str) -> JsonObject:
        """One page load; InputError (nothing started) for an unknown engine or a body
        that is not a LoadRequest for this client (ValidationFailed naming the fields)."""
        if engine not in ENGINES:
            raise UnknownName("engine", engine, list(ENGINES))
        req = LoadRequest.for_agent(body, self.setup)
        self.loads += 1
        if engine != Engine.selenium:
            # Only Selenium's loads start a browser ahead, or keep one between loads.
            prestart.SPARES.discard()
            contexts.RESIDENT.discard()
        try:
            result = _load(Engine(engine), req, self.setup)
        except ClarkeError as e:
            result = LoadResult.failed(engine, f"{e.kind}: {e}")
        return result.model_copy(update={"browser": req.browser}).model_dump(mode="json")


class Firefox(Implementation):
    kind = "client"
    name = Browser.firefox.value
    summary = "Firefox (Nightly, release or ESR) with geckodriver, by Selenium or Browsertime"
    install = "install firefox-esr (Debian) and geckodriver (ci/setup.sh installs both)"

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary

    def check_environment(self) -> None:
        firefox.find_firefox(self.binary)
        firefox.find_geckodriver()

    def start(self, place: Place) -> RoleProcess:
        return BrowserClient(place, self.binary)


class Chromium(Implementation):
    kind = "client"
    name = Browser.chromium.value
    summary = (
        "Chromium with chromedriver, by Selenium or Browsertime (6 connections per server "
        "for HTTP/1.1, fixed)"
    )
    install = "install the Debian packages chromium and chromium-driver (ci/setup.sh does)"

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary

    def check_environment(self) -> None:
        chromium.find_chromium(self.binary)
        chromium.find_chromedriver()

    def start(self, place: Place) -> RoleProcess:
        return BrowserClient(place, implementation=self.name, chromium_binary=self.binary)
