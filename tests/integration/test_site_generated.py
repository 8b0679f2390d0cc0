"""A generated multi-origin site (clarke site generate, Web Almanac 2024 mobile figures)
replayed by origin on a lan netns testbed and loaded by Firefox over HTTP/2, names
resolved across the link: no miss, and every generated resource requested, so the
browser parsed the stylesheets (fonts, background images) and ran the scripts that
insert scripts, stylesheets and images and fetch JSON, three requests deep (issue 33)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from clarke.browser.load import LoadRequest
from clarke.place.plan import NetnsPlan
from clarke.run.session.names import SiteNames
from clarke.run.session.session import Session
from clarke.sites import archive, staging
from clarke.sites.generate import build, statistics
from clarke.sites.placement import place
from clarke.testbed.substrate import NetnsSubstrate
from clarke.vocab import Browser, Engine, HttpVersion
from conftest import need
from testbeds import lan_session

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def lan() -> Iterator[tuple[Session, NetnsSubstrate]]:
    need(os.geteuid() == 0, "root (network namespaces)")
    need(shutil.which("geckodriver") is not None, "geckodriver (ci/setup.sh)")
    substrate = NetnsSubstrate(server="origin")
    with lan_session(substrate, []) as session:
        yield session, substrate


def test_firefox_requests_every_resource_of_a_generated_site(
    lan: tuple[Session, NetnsSubstrate], tmp_path: Path
) -> None:
    session, substrate = lan
    assert isinstance(session.plan, NetnsPlan)
    generated = build.generate(statistics.read(), 1, tmp_path / "site")
    site = archive.read(generated.path).archive
    urls = {e.url for e in site.exchanges}
    agents = session._agents()
    name = staging.stage(generated.path, substrate.pages_dir)
    agents.ensure_site(name)
    names = SiteNames(agents)
    try:
        names.start(place(site, session.plan.gw_lan.prefix).zone_names())
        agents["server"].reset_stats()
        request = LoadRequest(
            url=site.start_url,
            http=HttpVersion("2"),
            browser=Browser("firefox"),
            site_hosts=tuple(site.hosts()),
            timeout_s=120,
            settle_ms=2000,
        )
        result = agents["client"].load(request, Engine.selenium, timeout=300)
        loaded = result.model_dump(mode="json")
        stats = agents["server"].stats()["site"]
        looked_up = {q["name"] for q in names.queries() if q["type"] == "A"}
    finally:
        names.stop()
        agents.ensure_site(None)
    assert loaded["status"] == "ok", (loaded["reason"], sorted(loaded["protocols"]))
    assert stats["missed"] == 0 and stats["misses"] == [], stats
    # Each generated exchange asked for once, and nothing else.
    assert stats["requests"] == stats["exact"] == len(site.exchanges) == 66, stats
    # What the browser's Resource Timing lists: all of it but, in Firefox, the images
    # that CSS asks for (background-image), which origin served all the same (above).
    seen = set(loaded["protocols"])
    css_images = {r.url for r in generated.plan.of("image") if r.role == "css"}
    assert seen <= urls and urls - seen <= css_images, (sorted(urls - seen), sorted(seen - urls))
    print(f"not in Firefox's Resource Timing: {sorted(urls - seen)}")
    assert set(loaded["protocols"].values()) == {"h2"}
    assert looked_up == set(site.hosts())
    deepest = [r.url for r in generated.plan.resources if r.depth == 3]
    assert deepest and set(deepest) <= seen
    metrics = loaded["metrics"]
    print(
        f"generated site seed 1 on lan, Firefox HTTP/2: {len(seen)} resources from "
        f"{len(site.origins)} origins, PLT {metrics['plt_ms']:.0f} ms, "
        f"FCP {metrics.get('fcp_ms', 0):.0f} ms, LCP {metrics.get('lcp_ms', 0):.0f} ms"
    )
