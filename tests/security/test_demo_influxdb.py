"""The demo's InfluxDB (issue 37, finding 4): any local user could read, write or drop
the demo's results (no authentication), and it kept 127.0.0.1:8086, the port a
following `docker compose up` publishes.

The demo's InfluxDB (ci/demo_influxdb.py, what ci/demo.sh starts), started here on a
free port in a directory of the test's: every request without a password is refused
(queries, writes, DROP), also from `nobody`, who cannot read its data or credentials
either (0700, 0600); `clarke results push` and `clarke run --influx` write with the
writer's password read from its 0600 file; a password file others may read is refused;
its default port is not the compose stack's; an earlier, unauthenticated demo
InfluxDB of the same directory is replaced on the next start."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from conftest import free_port, need

pytestmark = [pytest.mark.root, pytest.mark.influx]
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "ci" / "demo_influxdb.py"
RECORDED = ROOT / "tests" / "data" / "recorded-lan"
NOBODY = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]


@dataclass
class Demo:
    dir: Path
    url: str
    env: dict[str, str]  # the environment to run it with
    printed: dict[str, str]  # what `start` printed for the shell


def _script(action: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), action], capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    need(os.geteuid() == 0, "root (the bootstrap's network namespace)")
    need(shutil.which("influxd") is not None, "influxd (Debian package influxdb)")
    need(shutil.which("setpriv") is not None, "setpriv (util-linux), to act as nobody")
    base = tmp_path_factory.mktemp("demo-influx")
    base.chmod(0o755)
    d = base / "influxdb"
    port = free_port()
    env = {**os.environ, "CLARKE_DEMO_INFLUX_DIR": str(d), "CLARKE_INFLUX_PORT": str(port)}
    started = _script("start", env)
    try:
        assert started.returncode == 0, started.stderr
        printed = dict(line.split("=", 1) for line in started.stdout.splitlines())
        yield Demo(d, f"http://127.0.0.1:{port}", env, printed)
    finally:
        _script("stop", env)


def _anonymous(url: str) -> dict[str, int]:
    with httpx.Client(base_url=url, trust_env=False, timeout=10) as c:
        return {
            "show": c.get("/query", params={"q": "SHOW DATABASES"}).status_code,
            "select": c.get(
                "/query", params={"db": "clarke", "q": "SELECT * FROM page_load"}
            ).status_code,
            "write": c.post("/write", params={"db": "clarke"}, content=b"m v=1\n").status_code,
            "drop": c.post("/query", params={"q": "DROP DATABASE clarke"}).status_code,
            "guess": c.get(
                "/query", params={"q": "SHOW DATABASES", "u": "admin", "p": "admin"}
            ).status_code,
        }


def test_nothing_without_a_password(demo: Demo) -> None:
    assert demo.printed["INFLUX_URL"] == demo.url
    answers = _anonymous(demo.url)
    assert all(code in (401, 403) for code in answers.values()), answers
    # nobody, with the standard library only
    probe = (
        "import json, sys, urllib.request, urllib.error\n"
        "out = {}\n"
        "for q in ('SHOW DATABASES', 'DROP DATABASE clarke'):\n"
        "    try:\n"
        "        urllib.request.urlopen(sys.argv[1] + '/query?q=' + q.replace(' ', '+'))\n"
        "        out[q] = 200\n"
        "    except urllib.error.HTTPError as e:\n"
        "        out[q] = e.code\n"
        "for p in sys.argv[2:]:\n"
        "    try:\n"
        "        open(p).read(); out[p] = 'read'\n"
        "    except OSError as e:\n"
        "        out[p] = type(e).__name__\n"
        "print(json.dumps(out))\n"
    )
    secrets = [str(p) for p in (demo.dir / "credentials").iterdir()]
    data = [str(p) for p in (demo.dir / "meta").rglob("*") if p.is_file()]
    proc = subprocess.run(
        [*NOBODY, "--reset-env", "/usr/bin/python3", "-I", "-c", probe, demo.url, *secrets, *data],
        capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip
    out = json.loads(proc.stdout)
    assert out.pop("SHOW DATABASES") in (401, 403) and out.pop("DROP DATABASE clarke") in (401, 403)
    assert secrets and data and set(out.values()) == {"PermissionError"}, out


def test_files_are_private(demo: Demo) -> None:
    assert stat.S_IMODE(demo.dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((demo.dir / "credentials").stat().st_mode) == 0o700
    names = sorted(p.name for p in (demo.dir / "credentials").iterdir())
    assert names == ["influx-admin-password", "influx-reader-password", "influx-writer-password"]
    for p in (demo.dir / "credentials").iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600 and p.stat().st_uid == 0, p
    assert demo.printed["CLARKE_INFLUX_USER"] == "clarke"
    assert demo.printed["CLARKE_INFLUX_PASSWORD_FILE"] == str(
        demo.dir / "credentials" / "influx-writer-password"
    )


def test_clarke_writes_with_the_password_file(demo: Demo, tmp_path: Path) -> None:
    url = f"{demo.url}/clarke"
    env = {**demo.env, "CLARKE_INFLUX_USER": "clarke",
           "CLARKE_INFLUX_PASSWORD_FILE": demo.printed["CLARKE_INFLUX_PASSWORD_FILE"]}  # fmt: skip
    push = subprocess.run(
        [sys.executable, "-m", "clarke", "results", "push", str(RECORDED), "--influx", url],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert push.returncode == 0, push.stderr
    reader = (demo.dir / "credentials" / "influx-reader-password").read_text().strip()
    r = httpx.get(
        f"{demo.url}/query", params={"db": "clarke", "q": "SELECT count(plt_ms) FROM page_load"},
        auth=("grafana", reader), trust_env=False,
    )  # fmt: skip
    assert r.status_code == 200 and r.json()["results"][0]["series"], r.text
    # The reader reads, and writes nothing.
    w = httpx.post(f"{demo.url}/write", params={"db": "clarke"}, content=b"m v=1\n",
                   auth=("grafana", reader), trust_env=False)  # fmt: skip
    assert w.status_code == 403, w.text
    # Without the password file, nothing is written.
    bare = {k: v for k, v in env.items() if not k.startswith("CLARKE_INFLUX_")}
    push = subprocess.run(
        [sys.executable, "-m", "clarke", "results", "push", str(RECORDED), "--influx", url],
        capture_output=True, text=True, env=bare, timeout=120,
    )  # fmt: skip
    assert push.returncode != 0 and "401" in push.stderr, push.stderr
    # A password file other users may read is refused (exit 3), naming it.
    leaked = tmp_path / "password"
    leaked.write_text(Path(demo.printed["CLARKE_INFLUX_PASSWORD_FILE"]).read_text())
    leaked.chmod(0o644)
    push = subprocess.run(
        [sys.executable, "-m", "clarke", "results", "push", str(RECORDED), "--influx", url],
        capture_output=True, text=True, timeout=120,
        env={**env, "CLARKE_INFLUX_PASSWORD_FILE": str(leaked)},
    )  # fmt: skip
    assert push.returncode == 3 and str(leaked) in push.stderr and "chmod 600" in push.stderr


def test_the_demo_and_the_compose_stack_use_different_ports() -> None:
    """The compose stack publishes InfluxDB on ${INFLUX_PORT:-8086}; the demo's default
    is another port, so `docker compose up` after `make demo` finds its port free."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    (published,) = compose["services"]["influxdb"]["ports"]
    m = re.fullmatch(r"127\.0\.0\.1:\$\{INFLUX_PORT:-(\d+)\}:8086", published)
    assert m, published
    compose_port = int(m.group(1))
    text = SCRIPT.read_text()
    demo_default = int(text.split("DEFAULT_PORT = ")[1].split()[0])
    assert demo_default != compose_port and demo_default + 2 != compose_port
    assert "CLARKE_INFLUX_PORT:-8086" not in (ROOT / "ci" / "demo.sh").read_text()


def test_an_earlier_unauthenticated_demo_influxdb_is_replaced(tmp_path: Path) -> None:
    need(os.geteuid() == 0 and shutil.which("influxd") is not None, "root and influxd")
    d = tmp_path / "influxdb"
    d.mkdir(mode=0o755)
    port = free_port()
    # What ci/demo.sh used to start: no authentication.
    conf = d / "influxdb.conf"
    conf.write_text(
        f'reporting-disabled = true\nbind-address = "127.0.0.1:{port + 2}"\n'
        f'[meta]\n  dir = "{d}/meta"\n[data]\n  dir = "{d}/data"\n  wal-dir = "{d}/wal"\n'
        f'[http]\n  bind-address = "127.0.0.1:{port}"\n'
    )
    old = subprocess.Popen(["influxd", "-config", str(conf)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    (d / "influxd.pid").write_text(f"{old.pid}\n")
    env = {**os.environ, "CLARKE_DEMO_INFLUX_DIR": str(d), "CLARKE_INFLUX_PORT": str(port)}
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(150):
            try:
                if httpx.get(f"{url}/ping", trust_env=False, timeout=1).status_code == 204:
                    break
            except httpx.TransportError:
                pass
            subprocess.run(["sleep", "0.2"])
        assert _anonymous(url)["show"] == 200  # the hole, as it was
        started = _script("start", env)
        assert started.returncode == 0, started.stderr
        assert old.wait(timeout=30) is not None  # the earlier one stopped
        answers = _anonymous(url)
        assert all(code in (401, 403) for code in answers.values()), answers
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    finally:
        _script("stop", env)
        if old.poll() is None:
            old.kill()
            old.wait()
