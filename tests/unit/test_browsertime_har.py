"""What the Browsertime engine takes from Browsertime's HAR, without a browser: each
entry's size as Resource Timing's transferSize (a size the HAR does not know is not a
cache hit), and its start, lookup and connection set-up on the page's clock."""

from __future__ import annotations

from typing import Any

import pytest

from clarke.browser.browsertime_engine import har_timing, normalise, transfer_size

TIME_ORIGIN = 1_795_846_040_000.0  # Unix ms, as Browsertime's pageinfo gives it


@pytest.mark.parametrize(
    ("response", "size"),
    [
        ({"bodySize": 1200, "headersSize": 300}, 1500),
        ({"bodySize": 1200, "headersSize": -1}, 1200),  # HTTP/2 and /3: no header size
        ({"bodySize": -1, "headersSize": -1}, None),  # no end seen: unknown, not 0
        ({"bodySize": 0, "headersSize": -1, "fromDiskCache": True}, 0),
        ({"bodySize": 5000, "headersSize": 200, "fromDiskCache": True}, 0),
    ],
)
def test_a_size_the_har_does_not_know_is_not_a_cache_hit(
    response: dict[str, Any], size: int | None
) -> None:
    assert transfer_size(response) == size


def _entry(started: str, **timings: float) -> dict[str, Any]:
    return {"startedDateTime": started, "timings": timings}


def test_the_phases_follow_one_another_from_the_entrys_start() -> None:
    # 1,250 ms after the time origin; 3 ms blocked, a 540 ms lookup, 1,100 ms to connect.
    e = _entry("2026-11-28T06:07:21.250Z", blocked=3, dns=540, connect=1100, send=0, wait=600)
    assert har_timing(e, TIME_ORIGIN) == {
        "startTime": pytest.approx(1250),
        "domainLookupStart": pytest.approx(1253),
        "domainLookupEnd": pytest.approx(1793),
        "connectStart": pytest.approx(1793),
        "connectEnd": pytest.approx(2893),
    }


def test_phases_that_did_not_happen_are_left_out() -> None:
    # A request on a connection open already: no lookup, no connection (-1 in a HAR).
    reused = _entry("2026-11-28T06:07:21.250+00:00", blocked=-1, dns=-1, connect=-1, wait=600)
    assert har_timing(reused, TIME_ORIGIN) == {"startTime": pytest.approx(1250)}
    assert har_timing(reused, None) == {}
    assert har_timing({"timings": {"dns": 5}}, TIME_ORIGIN) == {}


def test_normalise_places_every_resource_on_the_pages_clock() -> None:
    url = "https://www.site.test/"
    result = {
        "browserScripts": [
            {
                "timings": {"navigationTiming": {"loadEventStart": 3000}, "paintTiming": {}},
                "pageinfo": {"navigationStartTime": TIME_ORIGIN},
            }
        ]
    }
    page = {
        "request": {"url": url},
        "response": {"httpVersion": "h3", "bodySize": 900, "headersSize": -1, "headers": []},
        **_entry("2026-11-28T06:07:20.010Z", dns=530, connect=560),
    }
    image = {
        "request": {"url": "https://img.cdn.test/a.jpg"},
        "response": {"httpVersion": "h3", "bodySize": -1, "headersSize": -1, "headers": []},
        **_entry("2026-11-28T06:07:21.500Z", blocked=1, dns=531, connect=540),
    }
    raw = normalise(result, {"log": {"entries": [page, image]}}, url)
    assert raw["timeOrigin"] == TIME_ORIGIN
    (resource,) = raw["resources"]
    assert resource["name"] == "https://img.cdn.test/a.jpg"
    assert resource["transferSize"] is None and resource["nextHopProtocol"] == "h3"
    assert resource["domainLookupStart"] == pytest.approx(1501)
    assert resource["connectEnd"] == pytest.approx(1501 + 531 + 540)
