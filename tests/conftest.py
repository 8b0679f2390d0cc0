"""Shared fixtures. Tests that need a real part (InfluxDB, root, a browser) use it for
real; where the part is missing they skip on a developer's machine and fail in CI
(CI=true), so CI can never pass by skipping.

The suite runs in two phases (ci/test.sh): the tests marked `timing` one at a time with
nothing else running, then all the others on several pytest-xdist workers at once
(most of a test's time is waiting on a link, not computing). For the second phase:

- the tests that share a module's fixture (a testbed, a cluster) stay on one worker (an
  `xdist_group` of the module and the fixture's parameters), so it is built once; the
  others spread over the workers; a module may name a group of its own, as the compose
  tests do (one stack at a time);
- each worker has a testbed state dir of its own (CLARKE_STATE_DIR, unless a test sets
  its own), so that no test reads, counts or removes another worker's testbeds."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(condition: bool, why: str) -> None:
    """Skip locally, fail in CI, when a real part the test needs is missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI must provide this: {why}")
    pytest.skip(why)


# A campaign of four small LAN loads (HTTP/1.1 and /2, 2 repetitions) for the tests that
# run whole campaigns; each gives it a name of its own.
SMALL_LAN_CAMPAIGN = {
    "matrix": {
        "profiles": ["lan"],
        "http": [1.1, 2],
        "cc": ["bbr"],
        "models": ["uniform"],
        "sizes": ["100k"],
    },
    "repetitions": 2,
    "retries": 1,
    "browser": {"engine": "selenium", "connections_per_server": {1.1: 1, 2: 6}},
}


SHARED_SCOPES = ("class", "module", "package")
# The modules whose tests take longest in one group (a CI run's durations), started first
# so that the workers end together instead of one finishing a long group alone: xdist
# hands groups out in the order they were collected.
LONGEST_FIRST = (
    "tests/integration/test_compose.py",
    "tests/integration/test_slurm.py",
    "tests/integration/test_site_netns.py",
    "tests/integration/test_load.py",
    "tests/integration/test_testbed.py",
    "tests/integration/test_cross_traffic_netns.py",
)


def _group(item: pytest.Item) -> str:
    """The xdist group of a test: its module's, and the parameters of its module's
    fixtures, where it uses a fixture built once for several tests (a testbed, a stack, a
    cluster); else its own, so that a module of independent tests spreads over the
    workers."""
    info = getattr(item, "_fixtureinfo", None)
    shared = [
        name
        for name, defs in (info.name2fixturedefs.items() if info else [])
        if defs and defs[-1].scope in SHARED_SCOPES
    ]
    if not shared:
        return item.nodeid
    callspec = getattr(item, "callspec", None)
    params = [f"{n}={callspec.params[n]}" for n in shared if callspec and n in callspec.params]
    return "::".join([item.nodeid.split("::")[0], *params])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test without an xdist group of its own goes into _group's: first, before
    xdist's own hook writes each test's group into its node id. The longest groups are
    collected first (LONGEST_FIRST)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_group(item)))

    def rank(item: pytest.Item) -> int:
        module = item.nodeid.split("::")[0]
        return LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Where a phase's time went: with CLARKE_TEST_TIMELINE naming a file (ci/test.sh),
    each test's start and end (setup and teardown included) and its worker, appended as
    a JSON line; ci/suite_timeline.py sums it up. One short write per test, whole lines
    (O_APPEND), so the workers share the file."""
    started = time.time()
    yield
    timeline = os.environ.get("CLARKE_TEST_TIMELINE")
    if timeline:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        line = {"test": item.nodeid, "worker": worker, "start": started, "end": time.time()}
        with open(timeline, "a") as f:
            f.write(json.dumps(line) + "\n")


@pytest.fixture(scope="session", autouse=True)
def _worker_state_dir(worker_id: str) -> Iterator[None]:
    """A testbed state dir for this worker's session (its testbeds' ids are the host's
    still: `up` picks them under a host-wide lock). Made by clarke itself on first use,
    0711 below a sticky /tmp: OpenLiteSpeed's workers, as `nobody`, pass through to the
    pages. Its testbeds are taken down at the end, whatever a test left."""
    if os.geteuid() != 0 or os.environ.get("CLARKE_STATE_DIR"):
        yield
        return
    parent = Path(tempfile.mkdtemp(prefix=f"clarke-tests-{worker_id}-"))
    parent.chmod(0o711)
    state = parent / "testbeds"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CLARKE_STATE_DIR", str(state))
        try:
            yield
        finally:
            from clarke.testbed import lifecycle
            from clarke.testbed.state import Store

            try:
                lifecycle.down_all(Store(state))
            finally:
                shutil.rmtree(parent, ignore_errors=True)


# The marks of a test that runs on netns testbeds in a state directory of its own.
OWN_STATE = pytest.mark.usefixtures("netns_state")
ON_OWN_TESTBEDS = [pytest.mark.root, pytest.mark.browser, pytest.mark.slow, OWN_STATE]


@pytest.fixture
def netns_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Root, and a testbed state directory of the test's own, which the runners it starts
    inherit: other testbeds on this host are never read or removed. Afterwards, what a
    runner killed with SIGKILL could not tear down is removed, from this directory only."""
    need(os.geteuid() == 0, "root (network namespaces)")
    state = tmp_path / "testbeds"
    monkeypatch.setenv("CLARKE_STATE_DIR", str(state))
    yield state
    from clarke.testbed import lifecycle
    from clarke.testbed.state import Store

    lifecycle.down_all(Store(state))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _influx_config(root: Path, http_port: int, rpc_port: int) -> Path:
    """The demo's influxd configuration without authentication (ci/demo_influxdb.py)."""
    # ci/ holds scripts, not a package (imported here, not at the top: test_suite_groups
    # runs a copy of this file elsewhere).
    ci = str(Path(__file__).resolve().parents[1] / "ci")
    if ci not in sys.path:
        sys.path.insert(0, ci)
    from demo_influxdb import influxd_conf

    conf = root / "influxdb.conf"
    conf.write_text(influxd_conf(root, http_port, rpc_port, auth=False))
    return conf


@pytest.fixture(scope="session")
def influxd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real InfluxDB 1.x (Debian's influxd) on a loopback port; yields its base URL."""
    binary = shutil.which("influxd")
    need(binary is not None, "influxd (Debian package influxdb) is not installed")
    assert binary is not None
    root = tmp_path_factory.mktemp("influxdb")
    port = free_port()
    conf = _influx_config(root, port, free_port())
    log = (root / "influxd.log").open("wb")
    proc = subprocess.Popen([binary, "-config", str(conf)], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"influxd exited {proc.returncode}: see {root}/influxd.log")
            try:
                if httpx.get(f"{url}/ping", timeout=1, trust_env=False).status_code == 204:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("influxd did not answer /ping within 30 s")
            time.sleep(0.2)
        yield url
    finally:
        from processes import ended  # here: test_suite_groups runs a copy of this file alone

        ended(proc)
        log.close()


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run `clarke ARGS` in-process; returns (exit code, stdout, stderr)."""
    from clarke.cli import main

    def _run(*args: str) -> tuple[int, str, str]:
        code = 0
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return _run
