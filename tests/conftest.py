"""Shared fixtures. Tests that need a real part (InfluxDB, root, a browser) use it for
real; where the part is missing they skip on a developer's machine and fail in CI
(CI=true), so CI can never pass by skipping."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _influx_config(root: Path, http_port: int, rpc_port: int) -> Path:
    conf = root / "influxdb.conf"
    conf.write_text(f"""
reporting-disabled = true
bind-address = "127.0.0.1:{rpc_port}"
[meta]
  dir = "{root}/meta"
[data]
  dir = "{root}/data"
  wal-dir = "{root}/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:{http_port}"
  log-enabled = false
""")
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
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
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
