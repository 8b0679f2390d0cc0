"""The demo's InfluxDB (`make demo`, ci/demo.sh): Debian's influxd 1.x on the host's
loopback, with authentication, its data and credentials where only root reads them.

    python ci/demo_influxdb.py start   start it (or find it running), print for the shell:
                                       INFLUX_URL, CLARKE_INFLUX_USER and
                                       CLARKE_INFLUX_PASSWORD_FILE (what `clarke run
                                       --influx` and `clarke results push` read)
    python ci/demo_influxdb.py stop    stop it

Where and on which port: CLARKE_DEMO_INFLUX_DIR (default build/influxdb), and
CLARKE_INFLUX_PORT (default 8087: the compose stack publishes its own InfluxDB on 8086,
so a `docker compose up` after `make demo` finds its port free). The directory is 0700;
credentials/ holds one password per user, each 0600:

    influx-admin-password   admin   all privileges (what makes the others)
    influx-writer-password  clarke  all privileges on the database clarke (the runner)
    influx-reader-password  grafana read on clarke (a Grafana or a person reading)

The users are made (and their passwords set from the files) on every start while
influxd listens only inside a network namespace of its own: InfluxDB 1.x lets anyone
who reaches it create the first admin, and there nobody else can. Then it starts on
127.0.0.1:PORT, where every request needs a user's password."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

DEFAULT_PORT = 8087  # not 8086: the compose stack's InfluxDB publishes that one
DATABASE = "clarke"
USERS = {  # user -> (password file, privilege)
    "admin": ("influx-admin-password", "ADMIN"),
    "clarke": ("influx-writer-password", "ALL"),
    "grafana": ("influx-reader-password", "READ"),
}
WRITER = "clarke"
AUTH_MARK = "# clarke demo: authentication on"
START_TIMEOUT_S = 30.0


class Problem(Exception):
    """Said to the user; exit 3."""


def _dir() -> Path:
    return Path(os.environ.get("CLARKE_DEMO_INFLUX_DIR") or "build/influxdb").resolve()


def _port() -> int:
    raw = os.environ.get("CLARKE_INFLUX_PORT") or str(DEFAULT_PORT)
    if not raw.isdigit() or not 1024 <= int(raw) <= 65533:
        raise Problem(f"CLARKE_INFLUX_PORT={raw!r}: a port from 1024 to 65533")
    return int(raw)


def say(text: str) -> None:
    print(f"==> {text}", file=sys.stderr, flush=True)


# --- files ---------------------------------------------------------------------------------
def _private_dir(d: Path) -> None:
    """`d` made 0700 for root, or made so: its data files must not be read around the
    authentication."""
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = d.lstat()
    if st.st_uid != os.geteuid() or not d.is_dir() or d.is_symlink():
        raise Problem(
            f"{d}: not a directory of this user's; remove it or set CLARKE_DEMO_INFLUX_DIR"
        )
    d.chmod(0o700)


def _password(path: Path) -> str:
    """The password in `path`, made (0600, new) if missing; refused if others may read it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    st = os.lstat(path)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise Problem(f"{path}: must be this user's and 0600 (chmod 600 {path})")
    return path.read_text().strip()


def influxd_conf(d: Path, http_port: int, rpc_port: int, auth: bool) -> str:
    """influxd 1.x's configuration: its files under d, HTTP and RPC on loopback only;
    `auth`: every request needs a user's password. The tests' InfluxDB uses it too."""
    return f"""{AUTH_MARK if auth else ""}
reporting-disabled = true
bind-address = "127.0.0.1:{rpc_port}"
[meta]
  dir = "{d}/meta"
[data]
  dir = "{d}/data"
  wal-dir = "{d}/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[http]
  bind-address = "127.0.0.1:{http_port}"
  auth-enabled = {"true" if auth else "false"}
  log-enabled = false
"""


def _config(d: Path, port: int, private: bool) -> Path:
    """The demo's configuration, with authentication; `private`: the start inside a
    namespace of its own, for making the users."""
    path = d / ("influxdb-bootstrap.conf" if private else "influxdb.conf")
    path.write_text(influxd_conf(d, port, port + 2, auth=True))
    path.chmod(0o600)
    return path


# --- talking to it -------------------------------------------------------------------------
def _request(
    url: str, q: str | None = None, auth: tuple[str, str] | None = None, body: bytes | None = None
) -> tuple[int, str]:
    """(status, body) of a /query (POST q) or /write (body); (0, why) when nothing answers."""
    data = body if body is not None else urllib.parse.urlencode({"q": q or ""}).encode()
    req = urllib.request.Request(url, data=data, method="POST")
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return 0, str(e)


def _pings(base: str) -> bool:
    req = urllib.request.Request(f"{base}/ping")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=2) as resp:
            return resp.status == 204
    except OSError:
        return False


def _wait(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _pings(base):
        if proc.poll() is not None:
            raise Problem(f"influxd exited {proc.returncode}: see {log}")
        if time.monotonic() > deadline:
            raise Problem(f"influxd did not answer {base}/ping within {START_TIMEOUT_S:g} s")
        time.sleep(0.2)


def _query(base: str, q: str, auth: tuple[str, str] | None) -> dict[str, object]:
    status, text = _request(f"{base}/query", q, auth)
    out = json.loads(text) if text.startswith("{") else {"error": text}
    error = out.get("error") or next(
        (r.get("error") for r in out.get("results", []) if isinstance(r, dict)), None
    )
    if status != 200 or error:
        raise Problem(f"InfluxDB: {q.split(' WITH PASSWORD')[0]}: HTTP {status}: {error or text}")
    return out


# --- bootstrap in a namespace of its own ---------------------------------------------------
def bootstrap(d: Path, port: int) -> None:
    """Inside `unshare --net`: loopback up, influxd on it, the users made or their
    passwords set from the files, influxd stopped."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    base = f"http://127.0.0.1:{port}"
    log = d / "influxd-bootstrap.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["influxd", "-config", str(_config(d, port, private=True))],
            stdout=out, stderr=subprocess.STDOUT, umask=0o077,
        )  # fmt: skip
    try:
        _wait(base, proc, log)
        passwords = {u: _password(d / "credentials" / f) for u, (f, _) in USERS.items()}
        admin = ("admin", passwords["admin"])
        status, text = _request(f"{base}/query", "SHOW USERS", admin)
        if status == 401 and "create admin user first" not in text:
            raise Problem(
                f"the demo's InfluxDB in {d} has an admin whose password is not "
                f"{d}/credentials/influx-admin-password; remove {d} to start anew"
            )
        if status != 200:  # no admin yet: the first may be made without credentials
            _query(base, f"CREATE USER admin WITH PASSWORD '{admin[1]}' WITH ALL PRIVILEGES", None)
        _query(base, f'CREATE DATABASE "{DATABASE}"', admin)
        shown = json.dumps(_query(base, "SHOW USERS", admin))
        for user, (_, privilege) in USERS.items():
            if user == "admin":
                _query(base, f"SET PASSWORD FOR \"admin\" = '{admin[1]}'", admin)
                continue
            verb = "SET PASSWORD FOR" if f'"{user}"' in shown else "CREATE USER"
            how = " = " if verb.startswith("SET") else " WITH PASSWORD "
            _query(base, f"{verb} \"{user}\"{how}'{passwords[user]}'", admin)
            _query(base, f'GRANT {privilege} ON "{DATABASE}" TO "{user}"', admin)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- start and stop ------------------------------------------------------------------------
def _ours(d: Path) -> int | None:
    """The pid of the demo's influxd of `d` if it runs, else None."""
    try:
        pid = int((d / "influxd.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    config = str(d / "influxdb.conf").encode()
    return pid if any(b"influxd" in a for a in cmdline[:1]) and config in cmdline else None


def _running(pid: int) -> bool:
    """Whether `pid` runs (a process that ended but was not reaped yet does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _stop(pid: int) -> None:
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _running(pid):
        os.kill(pid, signal.SIGKILL)


def _current(d: Path, port: int) -> bool:
    """Whether the running influxd has this port and authentication."""
    try:
        text = (d / "influxdb.conf").read_text()
    except OSError:
        return False
    return AUTH_MARK in text and f'bind-address = "127.0.0.1:{port}"' in text


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def start() -> None:
    if os.geteuid() != 0:
        raise Problem("the demo's InfluxDB starts as root (its bootstrap needs a namespace)")
    if shutil.which("influxd") is None:
        raise Problem("influxd is not installed (Debian: influxdb; ci/setup.sh installs it)")
    d, port = _dir(), _port()
    base = f"http://127.0.0.1:{port}"
    _private_dir(d)
    pid = _ours(d)
    if pid is not None and _current(d, port) and _pings(base):
        say(f"the demo's InfluxDB answers at {base} (pid {pid}, authentication on)")
    else:
        if pid is not None:
            say(f"stopping the demo's earlier InfluxDB (pid {pid}): it restarts with "
                f"authentication on {base}")  # fmt: skip
            _stop(pid)
        if _port_taken(port) or _port_taken(port + 2):
            raise Problem(
                f"127.0.0.1:{port} (or {port + 2}) is taken by a process make demo did not "
                "start; stop it, or set CLARKE_INFLUX_PORT to a free port"
            )
        _private_dir(d / "credentials")
        here = Path(__file__).resolve()
        boot = subprocess.run(
            ["unshare", "--net", "--", sys.executable, str(here), "_bootstrap"],
            env={**os.environ, "CLARKE_DEMO_INFLUX_DIR": str(d), "CLARKE_INFLUX_PORT": str(port)},
        )  # fmt: skip
        if boot.returncode != 0:
            raise Problem(f"setting up the demo's InfluxDB users failed (see above; {d})")
        log = d / "influxd.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                ["influxd", "-config", str(_config(d, port, private=False))],
                stdout=out, stderr=subprocess.STDOUT, umask=0o077, start_new_session=True,
            )  # fmt: skip
        (d / "influxd.pid").write_text(f"{proc.pid}\n")
        _wait(base, proc, log)
        say(f"InfluxDB started on {base} (data in {d}, authentication on)")
    # For the shell's eval (ci/demo.sh): each value quoted.
    print(f"INFLUX_URL={shlex.quote(base)}")
    print(f"CLARKE_INFLUX_USER={shlex.quote(WRITER)}")
    print(f"CLARKE_INFLUX_PASSWORD_FILE={shlex.quote(str(d / 'credentials' / USERS[WRITER][0]))}")


def stop() -> None:
    d = _dir()
    pid = _ours(d)
    if pid is None:
        say(f"the demo's InfluxDB ({d}) is not running")
        return
    _stop(pid)
    say(f"stopped the demo's InfluxDB (pid {pid})")


def main(argv: list[str]) -> int:
    try:
        if argv == ["start"]:
            start()
        elif argv == ["stop"]:
            stop()
        elif argv == ["_bootstrap"]:
            bootstrap(_dir(), _port())
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except Problem as e:
        say(str(e))
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
