"""The recording proxy of `clarke site record` (and `clarke site corpus`) against another
local user (issue 48, finding A): mitmdump listens on 127.0.0.1 while a page is recorded,
and whatever comes through it is written into the archive.

During a real recording (Firefox, then Chromium), a process running as `nobody` finds
mitmdump's port in /proc (any user may read a process's command line), and sends an
HTTPS request (CONNECT) and a plain HTTP one through it. Each must be refused with 407
(the proxy asks for credentials that only the recording has), appear neither in
mitmdump's HAR nor in the archive, and the secret must be neither on mitmdump's command
line nor readable by `nobody`. The browser itself answers the challenge: the page is
recorded as before.

Nothing leaves the machine: each recording runs in a network namespace of its own that
has only loopback (tests/record_intrusion.py), with --only-resolved."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clarke.browser import chromium, firefox
from clarke.errors import EnvironmentProblem
from conftest import need
from processes import descendants

pytestmark = [pytest.mark.root, pytest.mark.browser, pytest.mark.slow]
SCRIPT = Path(__file__).resolve().parents[1] / "record_intrusion.py"
PAGE = "https://www.rec.test/"


def _needs(browser: str) -> None:
    need(os.geteuid() == 0, "a network namespace of its own, and acting as nobody: root")
    for tool in ("mitmdump", "setpriv", "unshare"):
        need(shutil.which(tool) is not None, f"{tool} (ci/setup.sh installs it)")
    need(Path("/usr/bin/python3").is_file(), "the system's python3, run as nobody")
    try:
        if browser == "chromium":
            chromium.find_chromium(), chromium.find_chromedriver()
        else:
            firefox.find_firefox(), firefox.find_geckodriver()
    except EnvironmentProblem as e:
        need(False, str(e))


def _record_with_an_intruder(browser: str, work: Path) -> dict[str, Any]:
    """tests/record_intrusion.py in a new network namespace; its JSON. Whatever it
    started is ended by PID if it does not finish in time."""
    proc = subprocess.Popen(
        ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
         sys.executable, str(SCRIPT), browser, str(work)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        for pid in descendants(proc.pid) | {proc.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"the recording did not end within 300 s: {err[-3000:]}") from None
    assert proc.returncode == 0 and out.strip(), err[-3000:]
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("browser", ["firefox", "chromium"])
def test_another_user_gets_nothing_through_the_recording_proxy(
    tmp_path: Path, browser: str
) -> None:
    _needs(browser)
    result = _record_with_an_intruder(browser, tmp_path)
    intruder = result["intruder"]
    assert isinstance(intruder, dict) and "error" not in intruder, result
    assert intruder["port"], f"the intruder found no mitmdump: {result}"
    assert intruder["secret_on_command_line"] is False, intruder
    assert intruder["config"] == "PermissionError", intruder
    # Refused by the proxy, before it connects anywhere.
    assert (intruder["connect"], intruder["plain"]) == (407, 407), intruder
    assert intruder["planted"] is None, intruder
    # Neither in the HAR nor in the archive; the page was recorded all the same (the
    # browser answered the proxy's challenge with the recording's credentials).
    assert result["error"] is None, result
    har, archive = [url for url, _ in result["har"]], result["archive"]
    for url in (*har, *archive):
        assert "/planted" not in url and "/plain" not in url, result
    assert archive[:1] == [PAGE] and f"{PAGE}a.png" in archive, result
    assert all(status == 200 for _, status in result["har"]), result
