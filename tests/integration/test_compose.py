"""The compose substrate for real: the offline stack (docker-compose.yml +
docker-compose.offline.yml: satlink, origin, Firefox ESR, InfluxDB from Debian) built
from base images made without any registry (ci/offline-images), the smoke campaign run
by `docker compose up` exactly as docs/compose.md says, its points read back from the
published InfluxDB, its records compared with the same campaign on the netns
substrate, both browsers and a recorded site (names across the link) in a client
container of their own, and `down -v` leaving no container, network or volume behind.

Needs root, a running Docker daemon with Compose v2 and debootstrap (ci/docker-setup.sh
installs and starts them in CI)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from clarke import profiles
from clarke.campaign.dimensions import BROWSER, CC, CONNECTIONS, DNS_CACHE, HTTP, PROFILE
from clarke.campaign.plan import plan_file
from clarke.results.journal import Journal
from clarke.results.record import RunRecord, Status
from clarke.testbed import lifecycle
from clarke.vocab import DnsCache
from compose_part import COMPOSE_MARKS
from conftest import need
from site_archive import HOSTS, write_three_origins

pytestmark = COMPOSE_MARKS

ROOT = Path(__file__).resolve().parents[2]
FILES = ["-f", "docker-compose.yml", "-f", "docker-compose.offline.yml"]
PROJECT = "clarke"  # docker-compose.yml's name: the contract's command, unchanged
INFLUX = "http://127.0.0.1:8086"
SMOKE = ROOT / "campaigns/smoke.yaml"
# A link parameter swept over the smoke profile (lan): its own link inside the stack.
SWEEP = {"rtt_ms": [120], "browser": ["firefox"]}


def _compose(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "compose", *FILES, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _left_behind() -> dict[str, list[str]]:
    label = f"label=com.docker.compose.project={PROJECT}"
    out = {}
    for kind, argv in {
        "containers": ["docker", "ps", "-a", "-q", "--filter", label],
        "networks": ["docker", "network", "ls", "-q", "--filter", label],
        "volumes": ["docker", "volume", "ls", "-q", "--filter", label],
    }.items():
        out[kind] = subprocess.run(argv, capture_output=True, text=True).stdout.split()
    return out


def _docker_ready() -> bool:
    if shutil.which("docker") is None:
        return False
    info = subprocess.run(["docker", "info"], capture_output=True)
    version = subprocess.run(["docker", "compose", "version"], capture_output=True)
    return info.returncode == 0 and version.returncode == 0


@dataclass
class Stack:
    env: dict[str, str]
    results: Path
    exit_code: int
    client_log: str
    up_seconds: float


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    need(os.geteuid() == 0, "root (the compose stack's TUN devices and sysctls)")
    need(_docker_ready(), "a running Docker daemon with Compose v2 (ci/docker-setup.sh)")
    need(shutil.which("debootstrap") is not None, "debootstrap (ci/offline-images)")
    leftovers = _left_behind()
    need(not any(leftovers.values()), f"a compose project {PROJECT!r} exists: {leftovers}")
    results = tmp_path_factory.mktemp("compose-results")
    env = {
        **os.environ,
        "CAMPAIGN": "smoke",
        "RESULTS_DIR": str(results),
        "LINK_CHECK": "quick",
        "CLARKE_GIT_REV": "compose-test",
    }
    images = subprocess.run(["sh", "ci/offline-images"], cwd=ROOT, capture_output=True, text=True)
    assert images.returncode == 0, images.stdout + images.stderr
    try:
        start = time.monotonic()
        up = _compose("up", "-d", "--build", env=env, timeout=3600)
        assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
        up_seconds = time.monotonic() - start
        client = _compose("ps", "-a", "-q", "client", env=env, timeout=60).stdout.strip()
        assert client, "no client container"
        waited = subprocess.run(
            ["docker", "wait", client], capture_output=True, text=True, timeout=1200
        )
        log = _compose("logs", "--no-color", "client", env=env, timeout=60).stdout
        yield Stack(env, results, int(waited.stdout.strip() or -1), log, up_seconds)
    finally:
        down = _compose("down", "-v", "--remove-orphans", env=env, timeout=300)
        if down.returncode != 0:
            print(down.stdout, down.stderr, file=sys.stderr)


def _records(results: Path) -> list[RunRecord]:
    dirs = [d for d in results.iterdir() if (d / "journal.jsonl").is_file()]
    assert len(dirs) == 1, dirs
    return list(Journal.in_dir(dirs[0]).records())


def test_smoke_campaign_through_docker_compose_up(stack: Stack) -> None:
    assert stack.exit_code == 0, stack.client_log[-6000:]
    assert "per cell" in stack.client_log
    records = _records(stack.results)
    plan_ids = {r.run_id for r in plan_file(SMOKE).runs}
    ok = {r.run_id for r in records if r.status is Status.ok}
    assert ok == plan_ids, [(r.run_id, r.reason) for r in records if r.status is not Status.ok]
    for r in records:
        assert r.implementations == {"link": "satlink", "server": "origin", "client": "firefox"}
        assert r.details.substrate == "compose"
        assert r.git_rev == "compose-test"
    # start_ahead during-page: the client container may move a browser back from idle
    # priority (SYS_NICE), so every load after the first takes one started during the last.
    started = [r.details.browser_started for r in records]
    assert started[1:] == ["ahead, during the previous page, at idle priority"] * (
        len(records) - 1
    ), started
    meta = json.loads(next(stack.results.glob("*/meta.json")).read_text())
    assert [(c["phase"], c["substrate"]) for c in meta["link"]] == [
        ("before", "compose"),
        ("after", "compose"),
    ]
    # The smoke campaign's lan: the quick check measures the RTT and leaves its unlimited
    # rates out (nothing would judge them).
    assert all(c["rtt_mean_ms"] > 0 and c["forward_mbps"] is None for c in meta["link"])


def test_points_in_the_published_influxdb(stack: Stack) -> None:
    records = _records(stack.results)
    cid = records[0].campaign_id
    q = (
        'SELECT "plt_ms", "fcp_ms", "lcp_ms", "impl_link", "impl_server", "http" '
        f"FROM page_load WHERE campaign_id = '{cid}' AND status = 'ok'"
    )
    # InfluxDB asks for credentials: the reader's password from the stack's secrets.
    anonymous = httpx.get(f"{INFLUX}/query", params={"db": "clarke", "q": q}, trust_env=False)
    assert anonymous.status_code == 401, anonymous.text
    secret = _compose(
        "exec", "-T", "influxdb", "cat", "/run/clarke-secrets/influx-reader-password",
        env=stack.env, timeout=60,
    )  # fmt: skip
    assert secret.returncode == 0 and secret.stdout.strip(), secret.stderr
    resp = httpx.get(
        f"{INFLUX}/query",
        params={"db": "clarke", "q": q},
        auth=("grafana", secret.stdout.strip()),
        trust_env=False,
    )
    series = resp.json()["results"][0]["series"][0]
    rows = [dict(zip(series["columns"], v, strict=True)) for v in series["values"]]
    assert sorted(r["http"] for r in rows) == ["1.1", "2", "3"]
    for row in rows:
        assert row["plt_ms"] > 0 and row["fcp_ms"] > 0 and row["lcp_ms"] > 0
        assert (row["impl_link"], row["impl_server"]) == ("satlink", "origin")


def _identity(r: RunRecord) -> dict[str, Any]:
    """What must not depend on the substrate: everything but timings, ids and hosts.
    The LCP element is left out: of a uniform page's equally large objects, the one that
    paints first is the LCP element, and that is timing (each ok load was verified to
    have one of its page's largest objects as LCP element)."""
    return {
        "run": (
            r.run_id,
            r.run_index,
            r.cell[PROFILE],
            r.cell[HTTP],
            r.cell[CC],
            r.page,
            r.repetition,
        ),
        "browser": (r.engine, r.cell[BROWSER], r.cell[CONNECTIONS]),
        "implementations": r.implementations,
        "status": (r.status, r.reason),
        "protocols": sorted(set(r.details.protocols.values())),
        "urls": sorted(r.details.protocols),
        "server_cc": r.details.server_cc,
        "metric_names": sorted(r.metrics),
        "server": {k: r.metrics[k] for k in ("server_requests", "app_bytes", "connections_used")},
    }


def test_same_records_as_on_the_netns_substrate(stack: Stack, tmp_path: Path) -> None:
    before = set(lifecycle.known_ids())
    try:
        argv = ["run", str(SMOKE), "--link-check", "quick", "--results", str(tmp_path)]
        netns = subprocess.run(
            [sys.executable, "-m", "clarke", *argv, "--campaign-id", "smoke-netns"],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    finally:
        for testbed_id in set(lifecycle.known_ids()) - before:
            lifecycle.down(testbed_id)
    assert netns.returncode == 0, netns.stdout[-3000:] + netns.stderr[-3000:]
    on_netns = {r.run_id: _identity(r) for r in _records(tmp_path) if r.status is Status.ok}
    on_compose = {r.run_id: _identity(r) for r in _records(stack.results) if r.status is Status.ok}
    assert on_compose == on_netns


def test_testbed_check_inside_the_stack(stack: Stack) -> None:
    """`clarke testbed check` from a client container: the GEO profile applied through
    the link agents, RTT and rate measured from the client, the link's own counters,
    each judged against the profile. How close the stack comes to the profile (GEO's
    RTT within 1 % of 530 ms, its rates within 3 %) is a benchmark figure
    (docs/validation.md), as for OpenSAND: on a busy machine it need not."""
    verify = _compose(
        "run", "--rm", "--no-deps", "client", "clarke", "serve", "client", "--",
        "clarke", "testbed", "check", "--substrate", "compose", "--profile", "geo",
        "--samples", "10", "--duration", "5", "--omit", "2", "--json",
        env=stack.env, timeout=300,
    )  # fmt: skip
    # The report is the JSON document that starts on a line of its own; what `run`
    # printed before it (the image's build, pull_policy: build) may hold braces too.
    start = re.search(r"^\{$", verify.stdout, re.M)
    assert start, verify.stdout[-3000:] + verify.stderr[-3000:]
    report = json.loads(verify.stdout[start.start() :])
    checks = {c["name"]: c for c in report["checks"]}
    assert report["profile"] == "geo" and report["link"] == "satlink"
    assert 500 < checks["rtt p50"]["measured"] < 700, checks["rtt p50"]
    assert checks["rtt p50"]["verdict"] in ("ok", "fail")
    for rate in ("forward rate", "return rate"):
        assert 0 < checks[rate]["measured"] <= 11 and checks[rate]["expected"] == 10.0
    assert verify.returncode == (0 if report["ok"] else 1), (checks, verify.stderr[-3000:])
    assert report["ping"]["received"] == 10
    rates = report["throughput"]
    assert {d: rates[d]["rate_from"] for d in rates} == {
        "forward": "link counters",
        "return": "link counters",
    }


def test_both_browsers_and_a_recorded_site_inside_the_stack(stack: Stack, tmp_path: Path) -> None:
    """One campaign from the offline client image (the lan link checked once for both):
    - Firefox and Chromium each loading over HTTP/3 through the stack's link
      (campaigns/smoke-browsers.yaml's matrix): both verified, each record naming its
      browser and version;
    - a recorded site of three origins (tests/site_archive.py) with its names across
      the link (the gateway container's resolver, the client container's stub), and
      through the terminal container's cache: every origin's resources over the
      protocol asked, no miss, every lookup answered where it should have been;
    - a link point (lan with rtt_ms 120 swept over it) on its own link, with its own
      link checks."""
    work = tmp_path / "work"
    write_three_origins(work / "three-origins")
    browsers = yaml.safe_load((ROOT / "campaigns/smoke-browsers.yaml").read_text())
    site_cells = {
        "profiles": browsers["matrix"]["profiles"], "http": [2, 3], "cc": ["bbr"],
        "sites": ["three-origins"], "dns_cache": ["none", "terminal"],
    }  # fmt: skip
    (work / "campaign.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "browsers-and-site",
                "repetitions": 1,
                "retries": 0,
                "browser": browsers["browser"],
                "scenarios": [
                    {"name": "browsers", "matrix": browsers["matrix"]},
                    {"name": "site", "matrix": site_cells | {"browser": ["firefox"]}},
                    # A link parameter swept over the profile (issue 51).
                    {"name": "sweep", "matrix": browsers["matrix"] | SWEEP},
                ],
            }
        )
    )
    results = tmp_path / "results"
    results.mkdir()
    run = _compose(
        "run", "--rm", "--no-deps", "-v", f"{work}:/work:ro", "client",
        "clarke", "serve", "client", "--",
        "clarke", "run", "/work/campaign.yaml", "--results=/results",
        "--campaign-id=browsers-and-site-compose", "--link-check=quick",
        env={**stack.env, "RESULTS_DIR": str(results)}, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    records = _records(results)
    unswept = [r for r in records if r.cell.link == r.cell[PROFILE]]
    pages = {r.cell[BROWSER]: r for r in unswept if r.cell.site is None}
    assert set(pages) == {"firefox", "chromium"}
    for browser, r in pages.items():
        assert r.status is Status.ok, (browser, r.reason)
        assert r.cell[HTTP] == "3" and r.browser_version, (browser, r.cell[HTTP], r.browser_version)
    # Chromium's own QUIC congestion control, from its NetLog (docs/browsers.md)
    netlog = pages["chromium"].details.browser_netlog
    assert netlog is not None and netlog.quic_cc

    # The sweep's point ran on its own link, checked before and after under its name.
    (swept,) = [r for r in records if r.cell.link != r.cell[PROFILE]]
    point = f"{browsers['matrix']['profiles'][0]}+rtt_ms={SWEEP['rtt_ms'][0]}"
    assert swept.status is Status.ok and swept.cell.link == point, (swept.cell.link, swept.reason)
    (run_dir,) = [d for d in results.iterdir() if (d / "meta.json").is_file()]
    meta = json.loads((run_dir / "meta.json").read_text())
    checked = {(c["phase"], c["profile"]): c for c in meta["link"]}
    assert {("before", point), ("after", point)} <= set(checked), list(checked)
    # Its RTT is the point's, well above the profile's own (lan: under a millisecond);
    # how close is the timing phase's judgement (tests/integration/test_link_sweep.py).
    assert all(checked[(p, point)]["rtt_mean_ms"] > 100 for p in ("before", "after")), checked

    sites = {(r.cell[HTTP], r.cell[DNS_CACHE]): r for r in records if r.cell.site is not None}
    assert set(sites) == {(h, c) for h in ["2", "3"] for c in DnsCache}
    link = profiles.read(site_cells["profiles"][0])
    # The link's idle round trip, less the profile's own tolerance.
    floor_ms = link.idle_rtt_ms * (1 - link.tolerance.rtt_pct / 100) - link.tolerance.rtt_ms
    for (http, cache), r in sites.items():
        assert r.status is Status.ok, (http, cache, r.reason)
        details = r.details.written()  # as the journal has them
        assert details["replay"]["missed"] == 0
        assert {u.split("/")[2] for u in details["protocols"]} == set(HOSTS)
        assert set(details["protocols"].values()) == {"h2" if http == "2" else "h3"}
        dns = details["dns"]
        asked = {q["name"] for q in dns["client_resolver_queries"] if q["type"] == "A"}
        assert set(HOSTS) <= asked, dns["client_resolver_queries"]
        if cache is DnsCache.none:
            # Each name crossed the link to the gateway container for this load, each
            # lookup at least the link's round trip at the client's stub.
            assert {f"A {h}" for h in HOSTS} <= set(dns["gateway_names"]), dns["gateway_names"]
            forwarded = [q for q in dns["client_resolver_queries"] if q["forwarded"]]
            assert forwarded and min(q["upstream_ms"] for q in forwarded) >= floor_ms, forwarded
        else:
            # The terminal container's cache, warmed before the load, answered them all.
            assert dns["gateway_queries"] == 0, dns["gateway_names"]
            assert dns["terminal_hits"] == dns["terminal_queries"] > 0, dns


def test_down_leaves_nothing(stack: Stack) -> None:
    down = _compose("down", "-v", "--remove-orphans", env=stack.env, timeout=300)
    assert down.returncode == 0, down.stderr
    assert _left_behind() == {"containers": [], "networks": [], "volumes": []}
    # and the published InfluxDB is gone with it
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{INFLUX}/ping", timeout=2, trust_env=False)
