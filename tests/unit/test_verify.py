"""Verification turns every way a load can be wrong into a failed load with a reason."""

from __future__ import annotations

import copy

import pytest

from clarke.browser import prefs
from clarke.browser.load import ExpectedObject, LoadRequest, judge, metrics_of
from clarke.results.record import Status

BASE = "https://www.clarke.test/uniform-100k/"


def _raw(proto: str = "h2") -> dict:
    return {
        "navigation": {
            "name": BASE + "index.html",
            "nextHopProtocol": proto,
            "loadEventStart": 900.5,
            "responseStart": 300.0,
            "connectStart": 10.0,
            "connectEnd": 250.0,
            "secureConnectionStart": 120.0,
            "transferSize": 1200,
            "domContentLoadedEventStart": 320.0,
        },
        "fcp": 500.0,
        "lcp": {"startTime": 800.0, "url": BASE + "o2.jpg", "size": 1000},
        "resources": [
            {
                "name": BASE + f"o{i}.jpg",
                "nextHopProtocol": proto,
                "transferSize": 12600,
                "encodedBodySize": 12500,
                "decodedBodySize": 12500,
                "responseEnd": 850.0,
            }
            for i in (1, 2)
        ],
    }


def _req(http: str = "2") -> LoadRequest:
    return LoadRequest(
        url=BASE + "index.html",
        http=http,
        expected_objects=[
            ExpectedObject(path=f"uniform-100k/o{i}.jpg", bytes=12500) for i in (1, 2)
        ],
        lcp_candidates=["uniform-100k/o1.jpg", "uniform-100k/o2.jpg"],
    )


def test_good_load() -> None:
    status, reason, protocols, lcp = judge(_req(), _raw())
    assert (status, reason, lcp) == (Status.ok, "", "uniform-100k/o2.jpg")
    assert len(protocols) == 3
    m = metrics_of(_raw())
    assert m["plt_ms"] == 900.5 and m["connect_ms"] == 240.0 and m["tls_ms"] == 130.0
    assert m["transfer_bytes"] == 1200 + 2 * 12600


def _mutate(fn) -> dict:  # type: ignore[no-untyped-def]
    raw = copy.deepcopy(_raw())
    fn(raw)
    return raw


@pytest.mark.parametrize(
    ("http", "raw", "reason"),
    [
        ("3", _raw("h2"), "asked for h3, fell back to h2: 3 of 3 resources"),
        (
            "2",
            _mutate(lambda r: r["resources"][0].update(nextHopProtocol="http/1.1")),
            "asked for h2, fell back to http/1.1: 1 of 3 resources",
        ),
        (
            "2",
            _mutate(lambda r: r["navigation"].update(loadEventStart=0)),
            "the page did not finish loading",
        ),
        ("2", _mutate(lambda r: r["resources"].pop()), "object uniform-100k/o2.jpg was not loaded"),
        (
            "2",
            _mutate(lambda r: r["resources"][1].update(decodedBodySize=99)),
            "object uniform-100k/o2.jpg: 99 bytes received, 12500 expected",
        ),
        ("2", _mutate(lambda r: r.update(fcp=None)), "no first-contentful-paint entry"),
        (  # Chromium's error page is a page with a load event and paints of its own
            "3",
            _mutate(lambda r: r.update(errorPage="ERR_QUIC_HANDSHAKE_FAILED")),
            "the browser showed its error page: ERR_QUIC_HANDSHAKE_FAILED",
        ),
        ("2", _mutate(lambda r: r.update(lcp=None)), "no largest-contentful-paint entry"),
        (
            "2",
            _mutate(lambda r: r["lcp"].update(url=BASE + "index.html")),
            "LCP element was uniform-100k/index.html, expected one of",
        ),
    ],
)
def test_failures_have_reasons(http: str, raw: dict, reason: str) -> None:
    status, got, _, _ = judge(_req(http), raw)
    assert status is Status.failed
    assert got.startswith(reason), got


def test_prefs_force_each_http_version() -> None:
    h1 = prefs.layered("1.1", "www.clarke.test", 443, 1)
    assert h1["network.http.http2.enabled"] is False and h1["network.http.http3.enable"] is False
    assert h1["network.http.max-persistent-connections-per-server"] == 1
    h2 = prefs.layered("2", "www.clarke.test", 443, 6)
    assert h2["network.http.http2.enabled"] is True and h2["network.http.http3.enable"] is False
    h3 = prefs.layered("3", "www.clarke.test", 8443, 6, {"network.http.http3.enable": True})
    assert h3["network.http.http3.alt-svc-mapping-for-testing"] == 'www.clarke.test;h3=":8443"'
    assert h3["network.http.http3.disable_when_third_party_roots_found"] is False
    js = prefs.user_js(h3)
    mapping = 'www.clarke.test;h3=\\":8443\\"'
    assert f'user_pref("network.http.http3.alt-svc-mapping-for-testing", "{mapping}");' in js
    assert all(p.why for p in prefs.BASE)
