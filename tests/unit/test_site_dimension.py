"""A recorded site as a campaign dimension (campaign/dimensions.py SITE, DNS_CACHE): a
site's cells have no page model or size, run ids and cells carry the site, the archive
is read and checked when the campaign is (exit 2 naming the campaign file, the field and
the archive's entry), the plan names each site's digests, and a site's load is judged
on origin's replay counters (a miss fails it, naming the URL) and its connections per
origin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from clarke import paths, schema
from clarke.campaign.dimensions import DNS_CACHE, MODEL, SITE, SIZE, Cell, table_columns
from clarke.campaign.model import Campaign
from clarke.campaign.plan import plan_file
from clarke.contract import ServerStats
from clarke.errors import InputError, ValidationFailed
from clarke.results.details import DnsQuery, LoadDetails, OriginRow
from clarke.results.meta import Meta
from clarke.results.server_records import ReplayMiss
from clarke.run.loop.apply import put_in_force
from clarke.run.session import site
from clarke.sites import archive
from clarke.sites.archive import Exchange, Origin, SiteArchive, Source
from clarke.vocab import DnsCache
from helpers import FakeSession, server_connections

HTML = b"<!doctype html><title>t</title><img src=https://img.cdn.test/a.jpg>"
JPG = b"\xff\xd8not really a jpeg\xff\xd9"


def _site(directory: Path, name: str = "two-origins") -> Path:
    bodies = {"html": HTML, "jpg": JPG}
    (directory / archive.BODIES).mkdir(parents=True)
    sha = {}
    for kind, body in bodies.items():
        sha[kind] = archive.sha256_of(body)
        (directory / archive.BODIES / sha[kind]).write_bytes(body)
    archive.write(
        directory,
        SiteArchive(
            name=name,
            start_url="https://www.site.test/",
            source=Source(kind="files"),
            origins=[
                Origin(host="www.site.test", protocols=["h2"], certificate_names=["www.site.test"]),
                Origin(host="img.cdn.test", protocols=["h2"], certificate_names=["img.cdn.test"]),
            ],
            exchanges=[
                Exchange(
                    method="GET", url="https://www.site.test/", status=200, body=sha["html"],
                    size=len(HTML),
                ),
                Exchange(
                    method="GET", url="https://img.cdn.test/a.jpg", status=200, body=sha["jpg"],
                    size=len(JPG),
                ),
            ],
        ),
    )  # fmt: skip
    return directory


def _campaign(tmp_path: Path, matrix: dict[str, Any]) -> Path:
    f = tmp_path / "c.yaml"
    base = {"profiles": ["lan"], "http": [2], "cc": ["bbr"]}
    f.write_text(yaml.safe_dump({"name": "s", "repetitions": 1, "matrix": {**base, **matrix}}))
    return f


def test_a_site_cell_is_its_own_page_beside_the_generated_ones(tmp_path: Path) -> None:
    _site(tmp_path / "sites" / "two-origins")
    f = _campaign(
        tmp_path,
        {
            "models": ["uniform"],
            "sizes": ["100k"],
            "sites": ["none", "sites/two-origins"],
            "dns_cache": ["none", "terminal"],
        },
    )
    plan = plan_file(f)
    assert [r.run_id for r in plan.runs] == [
        "lan-h2-bbr-uniform-100k-r1",
        "lan-h2-bbr-two-origins-r1",
        "lan-h2-bbr-two-origins-dnsterminal-r1",
    ]
    generated, plain, cached = (r.cell for r in plan.runs)
    assert (generated.site, generated.page, generated[DNS_CACHE]) == (
        None, "uniform-100k", DnsCache.none,
    )  # fmt: skip
    assert (plain[SITE], plain[MODEL], plain[SIZE], plain.page) == (
        "sites/two-origins", "-", "-", "two-origins",
    )  # fmt: skip
    assert cached[DNS_CACHE] is DnsCache.terminal
    # The record keeps every dimension; a cell read back is the cell of its run.
    assert plain.record()["site"] == "sites/two-origins"
    assert Cell.parse(cached.record()) == cached
    # The site and its cache have columns once a cell has them.
    cells = [r.cell for r in plan.runs]
    assert {SITE, DNS_CACHE} <= set(table_columns(cells))
    assert SITE not in table_columns([generated])
    # The plan names what is replayed, exactly.
    described = plan.sites["sites/two-origins"].describe()
    assert described["digest"] == archive.read(tmp_path / "sites/two-origins").digest
    assert (
        described["content_digest"]
        == archive.read(tmp_path / "sites/two-origins").archive.content_digest()
    )
    assert described["start_url"] == "https://www.site.test/" and described["origins"] == 2


def test_a_campaign_of_sites_only_needs_no_page_model(tmp_path: Path) -> None:
    _site(tmp_path / "two-origins")
    plan = plan_file(_campaign(tmp_path, {"sites": "two-origins"}))
    assert [r.run_id for r in plan.runs] == ["lan-h2-bbr-two-origins-r1"]


@pytest.mark.parametrize(
    ("matrix", "said"),
    [
        ({"sites": ["none"]}, "matrix.models: required for the generated pages"),
        (
            {"models": ["uniform"], "sizes": ["100k"]} | {"sites": ["x"]},
            "matrix.models: every cell",
        ),
        ({"models": ["uniform"], "sizes": ["100k"], "dns_cache": ["terminal"]}, "lists no site"),
        ({"sites": ["a/x", "b/x"]}, "one directory name, 'x'"),
        ({"sites": ["../outside"]}, "matrix.sites[0]: '../outside' leads outside"),
        ({"sites": [".hidden/.."]}, "must start with a letter or digit"),
        (
            {"models": ["uniform"], "sizes": ["100k"], "sites": ["none", "x"]}
            | {"cross_traffic": ["none", "web"]},
            "matrix.cross_traffic: web cross traffic fetches the cell's generated page",
        ),
    ],
)
def test_what_a_matrix_cannot_mean_is_refused(
    tmp_path: Path, matrix: dict[str, Any], said: str
) -> None:
    with pytest.raises(InputError, match=said.replace("[", r"\[").replace("]", r"\]")):
        plan_file(_campaign(tmp_path, matrix))


def test_a_broken_archive_is_refused_naming_the_file_the_field_and_the_entry(
    tmp_path: Path,
) -> None:
    source = _site(tmp_path / "two-origins")
    (source / archive.BODIES / archive.sha256_of(JPG)).unlink()
    f = _campaign(tmp_path, {"sites": ["two-origins"]})
    with pytest.raises(ValidationFailed) as e:
        plan_file(f)
    assert e.value.source == str(f)
    assert e.value.problems == [
        f"matrix.sites[0]: two-origins: exchanges[1] (GET https://img.cdn.test/a.jpg): its body "
        f"{archive.sha256_of(JPG)} is missing from bodies/"
    ]
    # The command says it so, exit 2, no traceback.
    proc = subprocess.run(
        [sys.executable, "-m", "clarke", "campaign", "plan", str(f)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "matrix.sites[0]: two-origins: exchanges[1]" in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr
    missing = _campaign(tmp_path, {"sites": ["nowhere"]})
    with pytest.raises(ValidationFailed, match=r"matrix.sites\[0\]: nowhere: not a directory"):
        plan_file(missing)


def test_the_plan_json_names_each_sites_digests(tmp_path: Path) -> None:
    _site(tmp_path / "two-origins")
    f = _campaign(tmp_path, {"sites": ["two-origins"]})
    proc = subprocess.run(
        [sys.executable, "-m", "clarke", "campaign", "plan", str(f), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    printed = json.loads(proc.stdout)
    assert (
        printed["sites"]["two-origins"]["digest"] == archive.read(tmp_path / "two-origins").digest
    )
    assert printed["runs"][0]["site"] == "two-origins"


def test_the_hook_puts_each_cells_site_and_cache_in_force_once(tmp_path: Path) -> None:
    _site(tmp_path / "two-origins")
    f = _campaign(
        tmp_path,
        {"models": ["uniform"], "sizes": ["100k"], "sites": ["none", "two-origins"],
         "dns_cache": ["none", "terminal"]},
    )  # fmt: skip
    testbed = FakeSession()
    for r in plan_file(f).runs:
        put_in_force(testbed, r.cell)
    assert [a for a in testbed.applied if a[0] == "site"] == [
        ("site", "two-origins none"),
        ("site", "two-origins terminal"),
    ]


def _conn(server_name: str, requests: int, *, on_site: bool = True, protocol: str = "h2") -> dict:  # type: ignore[type-arg]
    return {
        "requests": requests, "protocol": protocol, "cc": "bbr", "site": on_site,
        "server_name": server_name, "app_bytes_sent": 1000 * requests,
    }  # fmt: skip


def _counters(missed: list[str] | None = None, requests: int = 3) -> dict[str, Any]:
    misses = [{"method": "GET", "url": u} for u in missed or []]
    return {
        "requests": requests, "exact": requests - len(misses), "query": 0, "prefix": 0,
        "missed": len(misses), "misses": misses,
    }  # fmt: skip


START = "https://www.site.test/"


def judged(stats: dict[str, Any], *asked: Any) -> LoadDetails:
    """site.verdict of the server's /stats `stats`, as a load's details take it."""
    details = LoadDetails()
    site.verdict(ServerStats.model_validate(stats), *asked).into(details)
    return details


def test_a_site_load_is_judged_on_every_origins_connections_and_the_replays_misses() -> None:
    conns = [_conn("www.site.test", 2), _conn("img.cdn.test", 1)]
    ok = judged({"connections": conns, "site": _counters()}, "2", "bbr", 6, START)
    assert ok.failure == "", ok.failure
    assert ok.connections_per_origin == {"img.cdn.test": 1, "www.site.test": 1}
    assert ok.metrics["site_missed"] == 0 and ok.metrics["origins_reached"] == 2

    missed = judged(
        {"connections": conns, "site": _counters(["https://img.cdn.test/b.jpg"])},
        "2",
        "bbr",
        6,
        START,
    )
    assert missed.failure == (
        "the replay missed 1 of 3 requests (not in the archive): GET https://img.cdn.test/b.jpg"
    )
    assert missed.replay.misses == [ReplayMiss(method="GET", url="https://img.cdn.test/b.jpg")]

    # Any origin's connection on another protocol fails the load.
    fell_back = [_conn("www.site.test", 2), _conn("img.cdn.test", 1, protocol="h1")]
    wrong = judged({"connections": fell_back, "site": _counters()}, "2", "bbr", 6, START)
    assert "server saw h1 on 1 of 2 connections, asked for h2" in wrong.failure

    # The connection limit holds per origin, not for the whole page, and per pool: a
    # host may have the limit's connections with credentials and as many without.
    many = [_conn("www.site.test", 1, protocol="h1") for _ in range(3)]
    many.append(_conn("img.cdn.test", 1, protocol="h1"))
    one_each = judged({"connections": many, "site": _counters(requests=4)}, "1.1", "bbr", 1, START)
    assert one_each.failure == (
        "requests came on more connections than the browser's 2 pools of 1 per server "
        "allow: www.site.test 3"
    )
    assert (
        judged(
            {"connections": many[1:], "site": _counters(requests=2)}, "1.1", "bbr", 1, START
        ).failure
        == ""
    )

    # The browser's own /favicon.ico at the page's origin (Chromium's, where the page
    # names no icon and the archive, recorded in Firefox, lacks it) is listed, not judged;
    # at another origin it is the page's miss.
    favicon = "https://www.site.test/favicon.ico"
    own = judged({"connections": conns, "site": _counters([favicon])}, "2", "bbr", 6, START)
    assert own.failure == "" and own.metrics["site_missed"] == 0, own.failure
    assert own.replay is not None and own.replay.missed == 1
    assert own.replay.browser_own == [ReplayMiss(method="GET", url=favicon)]
    elsewhere = _counters(["https://img.cdn.test/favicon.ico"])
    other = judged({"connections": conns, "site": elsewhere}, "2", "bbr", 6, START)
    assert other.failure.startswith("the replay missed 1 of 3"), other.failure

    # A request beside the site's listeners (the generated pages'): not this page.
    beside = [*conns, _conn("server.clarke.test", 1, on_site=False)]
    assert (
        "beside the site's"
        in judged({"connections": beside, "site": _counters()}, "2", "bbr", 6, START).failure
    )


def test_each_origins_lookup_and_connection_from_resource_timing() -> None:
    raw = {
        "navigation": {
            "name": "https://www.site.test/", "startTime": 0, "nextHopProtocol": "h2",
            "domainLookupStart": 1.0, "domainLookupEnd": 531.0,
            "connectStart": 531.0, "connectEnd": 1600.0,
        },
        "resources": [
            {"name": "https://img.cdn.test/a.jpg", "startTime": 1700, "nextHopProtocol": "h2",
             "domainLookupStart": 1701.0, "domainLookupEnd": 2235.0,
             "connectStart": 2235.0, "connectEnd": 3300.0},
            {"name": "https://img.cdn.test/b.jpg", "startTime": 1701, "nextHopProtocol": "h2",
             "domainLookupStart": 3301.0, "domainLookupEnd": 3301.0,
             "connectStart": 3301.0, "connectEnd": 3301.0},
        ],
    }  # fmt: skip
    rows, metrics = site.origins(raw)
    assert rows["www.site.test"].written() == {
        "requests": 1, "protocols": ["h2"], "dns_ms": 530.0, "dns_start_ms": 1.0,
        "connect_ms": 1069.0,
    }  # fmt: skip
    assert rows["img.cdn.test"].requests == 2 and rows["img.cdn.test"].dns_ms == 534.0
    assert metrics == {
        "origins": 2.0, "dns_lookups": 2.0, "dns_ms_sum": 1064.0, "dns_ms_max": 534.0,
    }  # fmt: skip


def test_each_origins_connections_and_handshakes_as_the_server_saw_them() -> None:
    rows = _rows({"www.site.test": {"requests": 1, "protocols": ["h2"], "dns_ms": 530.0}})
    t0 = 1_000_000.0
    conns = [
        {"server_name": name, "start_unix_ms": t0 + at, "tls_handshake": {"kind": kind}}
        for name, at, kind in [
            ("img.cdn.test", 2300, "full"),
            ("www.site.test", 540, "full"),
            ("img.cdn.test", 2250, "resumed"),
        ]
    ]
    out = site.server_side(rows, server_connections(conns), t0)
    assert out["www.site.test"].written() == {
        "requests": 1, "protocols": ["h2"], "dns_ms": 530.0,
        "server_connections": 1, "handshakes": {"full": 1}, "server_opened_ms": 540.0,
    }  # fmt: skip
    # An origin the browser's timing did not list still gets its row; its first
    # connection is the earliest accepted, not the first listed.
    assert out["img.cdn.test"].server_connections == 2
    assert out["img.cdn.test"].handshakes == {"resumed": 1, "full": 1}
    assert out["img.cdn.test"].server_opened_ms == 2250.0
    assert not rows["www.site.test"].has("server_connections")  # rows are not changed


def test_each_origins_lookup_beside_the_client_resolvers_own_times() -> None:
    """The client resolver's A query that served an origin's first lookup: the last
    one for that name answered by the lookup's end (an earlier lookup of the name, or
    a later one, is not it), from the navigation's start."""
    t0 = 1_795_000_000_000.0  # the navigation's start, Unix ms
    rows = _rows({
        "www.site.test": {"requests": 1, "dns_ms": 530.0, "dns_start_ms": 1.0},
        "img.cdn.test": {"requests": 2, "dns_ms": 534.0, "dns_start_ms": 1701.0},
        "known.test": {"requests": 1, "dns_ms": None},  # never looked up in this load
    })  # fmt: skip

    def query(name: str, qtype: str, at_ms: float, answered_ms: float) -> dict[str, Any]:
        return {
            "name": name, "type": qtype, "at": (t0 + at_ms) / 1000,
            "answered_at": (t0 + answered_ms) / 1000,
        }  # fmt: skip

    queries = [
        query("www.site.test", "A", 3.0, 529.0),
        query("www.site.test", "HTTPS", 3.5, 530.5),
        query("img.cdn.test", "A", 40.0, 570.0),  # an earlier lookup of the name
        query("img.cdn.test", "A", 1750.0, 2234.0),
        query("img.cdn.test", "A", 2300.0, 2830.0),  # a later one
    ]
    asked = [DnsQuery.model_validate(q) for q in queries]
    out = site.resolver_side(rows, asked, t0)
    www, img = out["www.site.test"], out["img.cdn.test"]
    assert abs((www.resolver_taken_ms or 0) - 3.0) < 0.01
    assert abs((www.resolver_answered_ms or 0) - 529.0) < 0.01
    assert abs((img.resolver_taken_ms or 0) - 1750.0) < 0.01
    assert abs((img.resolver_answered_ms or 0) - 2234.0) < 0.01
    assert not out["known.test"].has("resolver_taken_ms")
    assert not rows["www.site.test"].has("resolver_taken_ms")  # rows are not changed
    assert site.resolver_side(rows, asked, None) == rows  # no navigation start: as is


def _rows(rows: dict[str, dict[str, Any]]) -> dict[str, OriginRow]:
    return {host: OriginRow.model_validate(row) for host, row in rows.items()}


@pytest.mark.parametrize(
    ("file", "site", "runs", "first"),
    [
        ("corpus-geo", "python-pathlib", 2 * 3 * 2 * 2 * 5, "lan-h1-bbr-python-pathlib-firefox-r1"),
        (
            "handbook-geo",
            "handbook-installation",
            3 * 2 * 5,
            "geo-h1-bbr-handbook-installation-firefox-r1",
        ),
        ("generated-geo", "generated-1", 3 * 2 * 5, "geo-h1-bbr-generated-1-firefox-r1"),
        # Beside a generated page (site none), with and without the accelerated PEP.
        ("geo-consumer", "python-pathlib", 3 * 2 * 2 * 5, "geo-consumer-h1-bbr-uniform-1m-none-r1"),
    ],
)
def test_the_corpus_campaigns_plan_once_the_corpus_is_built(
    file: str, site: str, runs: int, first: str
) -> None:
    """campaigns/sites/*.yaml name what `make corpus` builds: their shape is checked
    always, their plan where the corpus exists (a clean checkout has none)."""
    f = paths.data_dir("campaigns") / "sites" / f"{file}.yaml"
    c = schema.read(Campaign, f)
    assert [v for v in c.values(SITE) if v != "none"] == [f"../../build/corpus/{site}"]
    corpus = paths.corpus_dir()
    assert corpus is not None
    if not (corpus / site / archive.SITE_JSON).is_file():
        pytest.skip("no corpus here: make corpus (root) builds it")
    plan = plan_file(f)
    assert len(plan.runs) == runs
    assert plan.runs[0].run_id == first


def test_every_campaign_of_the_corpus_is_tested_above() -> None:
    shipped = sorted(p.stem for p in (paths.data_dir("campaigns") / "sites").glob("*.yaml"))
    assert shipped == ["corpus-geo", "generated-geo", "geo-consumer", "handbook-geo"]


def test_the_report_and_the_export_of_a_campaign_with_sites(tmp_path: Path) -> None:
    """A generated page's cells beside a site's: the report is made (the site's cells
    have no page size to plot by), its tables and the export carry the site."""
    from clarke.report.html import build
    from clarke.results import store
    from clarke.results.export import rows
    from clarke.results.journal import Journal
    from helpers import moved, record

    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        "name: t\nrepetitions: 3\nmatrix: {profiles: [lan], http: [2], cc: [bbr], "
        "models: [uniform], sizes: [100k]}\n"
    )
    d = store.create(tmp_path, "t-1", campaign, {"campaign": "t", "runs": []}, Meta(campaign="t"))
    records = [record(i) for i in range(3)]
    records += [
        moved(record(3 + i), site="sites/pathlib", dns_cache=cache, model="-", size="-").model_copy(
            update={
                "page": "pathlib",
                "run_id": f"lan-h2-bbr-pathlib-{cache}-r{i}",
                "metrics": record(3 + i).metrics | {"dns_ms_sum": lookups + i},
            }
        )
        for i in range(3)
        for cache, lookups in (("none", 1650.0), ("terminal", 30.0))
    ]
    with Journal.in_dir(d) as journal:
        for r in records:
            journal.append(r)
    page = build(d)
    assert "sites/pathlib" in page and "dns cache" in page
    # The sites' figure: a panel per metric and one of the lookups, a bar per cache.
    figure = page[page.index('id="fig-sites"') :]
    figure = figure[: figure.index("</figure>")]
    assert "lan: DNS lookups in the load" in figure and "lan: PLT" in figure
    assert "DNS cache at the terminal" in figure
    assert figure.count('<g id="patch_') > 8  # bars drawn (per metric, per cache)
    _, exported = rows(list(Journal.in_dir(d).records()))
    assert {r["site"] for r in exported} == {"none", "sites/pathlib"}
