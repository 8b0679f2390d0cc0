"""A recorded site's load request (browser/load.py, prefs.py, chromium.py): the URL must
be one of the site's hosts on 443; each host is mapped to HTTP/3 in both browsers;
Chromium resolves the site's names through the system (the testbed's DNS) and no other;
a load that reached anything but the site's port 443 and the client's DNS stub fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from clarke.browser import chromium, prefs
from clarke.browser.load import (
    BrowserSetup,
    LoadRequest,
    elsewhere_than_site,
)
from clarke.errors import ValidationFailed

SETUP = BrowserSetup(server_name="www.clarke.test", ca_cert=Path("/nonexistent"))
HOSTS = ["www.site.test", "img.cdn.test"]


def test_a_site_load_goes_to_one_of_its_hosts_only() -> None:
    body = {"url": "https://img.cdn.test/x.jpg", "http": "2", "site_hosts": HOSTS}
    req = LoadRequest.for_agent(body, SETUP)
    assert req.hosts(SETUP) == tuple(HOSTS)
    for url in (
        "https://www.clarke.test/",  # the testbed's server is not one of the site's
        "https://other.test/",
        "https://www.site.test:8443/",
    ):
        with pytest.raises(ValidationFailed, match="recorded site"):
            LoadRequest.for_agent({**body, "url": url}, SETUP)
    with pytest.raises(ValidationFailed, match="site_hosts"):
        LoadRequest.for_agent({**body, "site_hosts": ["Not A Host"]}, SETUP)
    plain = LoadRequest.for_agent({"url": "https://www.clarke.test/", "http": "2"}, SETUP)
    assert plain.hosts(SETUP) == ("www.clarke.test",)


def test_each_host_goes_to_http3_from_its_first_request() -> None:
    firefox = {p.name: p.value for p in prefs.http_version("3", HOSTS, 443)}
    assert firefox["network.http.http3.alt-svc-mapping-for-testing"] == (
        'www.site.test;h3=":443",img.cdn.test;h3=":443"'
    )
    assert {p.name: p.value for p in prefs.http_version("3", "h", 443)}[
        "network.http.http3.alt-svc-mapping-for-testing"
    ] == 'h;h3=":443"'
    forced = {s.name: s.value for s in chromium.http_version("3", HOSTS, 443)}
    assert forced["origin-to-force-quic-on"] == "www.site.test:443,img.cdn.test:443"


def test_chromium_resolves_the_sites_names_through_the_system_only(tmp_path: Path) -> None:
    load = {
        "user_data_dir": tmp_path,
        "window": (800, 600),
        "host": "www.clarke.test",
        "address": "198.18.2.2",
        "ca_spki": None,
        "netlog": tmp_path / "n",
    }
    plain = {s.name: s.value for s in chromium.load_switches(**load)}
    assert plain["host-resolver-rules"] == "MAP www.clarke.test 198.18.2.2, MAP * ~NOTFOUND"
    site = {s.name: s.value for s in chromium.load_switches(**load, site_hosts=HOSTS)}
    assert site["host-resolver-rules"] == (
        "MAP * ~NOTFOUND, EXCLUDE www.site.test, EXCLUDE img.cdn.test"
    )
    argv = chromium.switches("3", 443, **load, site_hosts=HOSTS)
    assert "--origin-to-force-quic-on=www.site.test:443,img.cdn.test:443" in argv


def test_a_site_load_may_reach_its_origins_and_the_dns_stub_only() -> None:
    assert elsewhere_than_site(["127.0.0.1:53", "198.18.2.64:443", "198.18.2.65:443"]) == ""
    assert "198.18.2.64:80" in elsewhere_than_site(["198.18.2.64:443", "198.18.2.64:80"])
    assert "198.18.2.1:53" in elsewhere_than_site(["198.18.2.1:53"])
