"""The recording proxy's credentials (`clarke site record`, browser/record.py). mitmdump
listens on 127.0.0.1, where any local user can reach it, and whatever passes through it
lands in the archive: it asks every client for a user name and password made anew for
each recording (mitmproxy's `proxyauth`), and only the recording's browser has them.

- mitmdump reads them from config.yaml in its confdir, which mitmproxy loads at start:
  the directory is the recording's scratch (0700), the file 0600. Never on a command
  line: any user may read /proc/PID/cmdline.
- Firefox answers the proxy's challenge (407) through WebDriver BiDi: an intercept in the
  authRequired phase (network.authRequired, then network.continueWithAuth).
- Chromium answers it through the DevTools protocol on the page's target: Fetch.enable
  with handleAuthRequests, then Fetch.continueWithAuth for a challenge whose source is
  the proxy. Its BiDi does not: chromedriver's BiDi mapper (Chromium 156) answers
  network.continueWithAuth for a proxy challenge with "Invalid InterceptionId", and the
  load never ends. With Fetch enabled every request of the page pauses until continued:
  each is continued at once, unchanged.

Other challenges (a server's 401) are left to the browser, as without an intercept:
the proxy's credentials go only to the proxy."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clarke.private_files import DIR_MODE, PrivateDir

log = logging.getLogger(__name__)
CONFIG = "config.yaml"  # what mitmproxy reads from its confdir at start
REALM = "mitmproxy"  # the realm of mitmproxy's Proxy-Authenticate


@dataclass(frozen=True)
class ProxySecret:
    """A recording's proxy credentials; never printed (repr leaves the password out)."""

    user: str
    password: str = field(repr=False)

    @classmethod
    def new(cls) -> ProxySecret:
        """Fresh random values (URL-safe: no `:`, which would end mitmproxy's user)."""
        return cls(f"clarke-{secrets.token_hex(8)}", secrets.token_urlsafe(32))

    def write_mitmproxy_config(self, confdir: Path) -> None:
        """`confdir` made new (0700) with a config.yaml (0600) that sets `proxyauth`."""
        confdir.mkdir(mode=DIR_MODE)
        with PrivateDir.open(confdir) as d:
            d.write_new(CONFIG, f'proxyauth: "{self.user}:{self.password}"\n'.encode())


def _quietly(what: str, answer: Callable[[Any], None]) -> Callable[[Any], None]:
    """`answer` for an event, in the driver's event thread: a request that is gone by
    the time it is answered (the page navigated away, the browser quit) is logged, not
    raised into a thread nobody joins."""

    def run(event: Any) -> None:
        try:
            answer(event)
        except Exception as e:
            log.info("%s: %s", what, e)

    return run


def answer_in_firefox(driver: Any, secret: ProxySecret) -> None:
    """Firefox (started with BiDi) gives `secret` to the proxy's challenges from now on."""

    def answer(challenge: Any) -> None:
        # A challenge left alone continues as the browser would without the intercept.
        if challenge.realm == REALM and str(challenge.scheme).lower() == "basic":
            challenge.provide_credentials(secret.user, secret.password)

    driver.network.add_authentication_handler(_quietly("proxy authentication", answer))


def answer_in_chromium(driver: Any, secret: ProxySecret, port: int) -> None:
    """Chromium gives `secret` to the challenges of the proxy on 127.0.0.1:`port`, for
    the page's requests from now on (and so for every later connection to the proxy:
    Chromium sends credentials it has cached for a proxy without waiting for a 407)."""
    devtools, connection = driver.start_devtools()
    fetch = devtools.fetch
    proxy = f"http://127.0.0.1:{port}"

    def go_on(event: Any) -> None:
        connection.execute(fetch.continue_request(event.request_id))

    def answer(event: Any) -> None:
        challenge = event.auth_challenge
        if challenge.source == "Proxy" and challenge.origin == proxy:
            response = fetch.AuthChallengeResponse(
                "ProvideCredentials", secret.user, secret.password
            )
        else:
            response = fetch.AuthChallengeResponse("Default")
        connection.execute(fetch.continue_with_auth(event.request_id, response))

    connection.add_callback(fetch.RequestPaused, _quietly("a paused request", go_on))
    connection.add_callback(fetch.AuthRequired, _quietly("proxy authentication", answer))
    connection.execute(
        fetch.enable(patterns=[fetch.RequestPattern(url_pattern="*")], handle_auth_requests=True)
    )
