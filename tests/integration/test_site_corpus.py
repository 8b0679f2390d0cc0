"""`clarke site record` end to end on the offline corpus (docs/sites.md): python3.11-doc's
pathlib page and debian-handbook's installation chapter served on loopback under seven
host names, loaded by headless Firefox (and Chromium) through mitmproxy, written as
archives that `clarke site check` reads; then what a user sees when the page's server is
down, and after a Ctrl-C.

Nothing leaves the machine: every recording here runs in a network namespace of its own
with only a loopback interface (`unshare --net`; for the corpus, ci/corpus.sh),
and every recording passes --only-resolved, so mitmproxy connects to no other host."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from clarke.browser import chromium
from clarke.errors import EnvironmentProblem
from clarke.sites import archive, corpus
from conftest import need
from processes import descendants

pytestmark = [pytest.mark.root, pytest.mark.browser, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
CLARKE = Path(sys.executable).with_name("clarke")


def _needs() -> None:
    need(os.geteuid() == 0, "records in a network namespace of its own: needs root")
    need(shutil.which("mitmdump") is not None, "mitmdump (ci/setup.sh installs it)")
    need(corpus.DOC_ROOT.is_dir(), "python3.11-doc (ci/setup.sh installs it)")
    need(corpus.HANDBOOK_ROOT.is_dir(), "debian-handbook (ci/setup.sh installs it)")


def _isolated(*argv: str) -> subprocess.CompletedProcess[str]:
    """`argv` in a new network namespace that has only loopback."""
    script = 'ip link set lo up && exec "$@"'
    return subprocess.run(
        ["unshare", "--net", "--", "sh", "-c", script, "sh", *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_corpus_is_recorded_as_an_archive_that_check_reads(tmp_path: Path) -> None:
    _needs()
    out = tmp_path / "corpus"
    made = subprocess.run(
        [str(ROOT / "ci/corpus.sh"), str(out)], capture_output=True, text=True, timeout=300
    )
    assert made.returncode == 0, made.stderr
    assert "left out" not in made.stderr, made.stderr  # nothing refused, nothing lost
    checked = subprocess.run(
        [str(CLARKE), "site", "check", str(out / "python-pathlib"), "--json"],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr
    stats = json.loads(checked.stdout)
    assert (stats["name"], stats["origins"], stats["third_parties"]) == ("python-pathlib", 4, 1)
    by_css = _check_recorded_page(out)
    print(f"fetched as the stylesheets name them: {sorted(by_css)}")
    # Beside it, the generated site that campaigns/sites/generated-geo.yaml replays.
    generated = archive.read(out / "generated-1").archive
    assert generated.source.kind == "generator" and len(generated.exchanges) == 66


def test_chromium_records_the_corpus_page_as_firefox_does(tmp_path: Path) -> None:
    """`clarke site corpus --browser chromium`: the same page, hosts and bytes, every
    request through mitmproxy (Chromium takes mitmproxy's certificates by their key)."""
    _needs()
    try:
        chromium.find_chromium()
    except EnvironmentProblem as e:
        need(False, str(e))
    out = tmp_path / "corpus"
    made = _isolated(str(CLARKE), "site", "corpus", "--out", str(out), "--browser", "chromium")
    assert made.returncode == 0, made.stderr[-3000:]
    assert "left out" not in made.stderr, made.stderr
    by_css = _check_recorded_page(out)
    print(f"fetched as the stylesheets name them: {sorted(by_css)}")


def _check_recorded_page(out: Path) -> set[str]:
    """What the recorded pages hold, checked against the tree; the URLs their
    stylesheets name that were fetched besides the pages' own and the @import chains."""
    site = archive.read(out / "python-pathlib")
    a = site.archive
    assert a.start_url == "https://docs.python.test/library/pathlib.html"
    assert a.source.tool.startswith("mitmproxy 11.")
    # Each host at the loopback address it was served from; HTTP/1.1, as Python's server
    # speaks (the recorded protocol, not the replay's).
    addresses = {o.host: o.address for o in a.origins}
    assert sorted(addresses) == sorted(corpus.PYTHON_HOSTS)
    assert len(set(addresses.values())) == 4
    assert all(o.protocols == ["h1"] for o in a.origins)
    # Every exchange is a file of the tree, byte for byte, and the content coding the
    # server used is kept aside.
    tree = corpus.Tree(out / "tree")
    for e in a.exchanges:
        host, _, path = archive.split_url(e.url)
        assert e.status == 200, e.url
        served = tree.host_dir(host) / path.split("?")[0].lstrip("/")
        assert site.body(e) == served.read_bytes(), e.url
        assert e.content_encoding == (
            "gzip" if served.suffix in (".html", ".css", ".js", ".svg") else None
        )
    # What the page asks for directly, and what its styles import (pydoctheme.css
    # imports default.css, which imports classic.css, which imports basic.css), was loaded.
    page = site.body(a.exchanges[0]).decode()
    direct = set(re.findall(r'src="(https://[^"]+)"', page))
    direct |= set(re.findall(r'<link rel="stylesheet"[^>]*href="(https://[^"]+)"', page))
    wanted = {u for u in direct if urlsplit(u).hostname in corpus.PYTHON_HOSTS}
    urls = {e.url for e in a.exchanges}
    assert wanted and wanted <= urls, wanted - urls
    chain = ("default.css", "classic.css", "basic.css")
    assert {f"https://{corpus.STATIC_HOST}/_static/{n}" for n in chain} <= urls
    # And nothing else, but what the recorded stylesheets name in url(): Chromium fetched
    # caret-down.svg (a background image of the theme's), Firefox did not.
    named = _css_named(site)
    imported = {f"https://{corpus.STATIC_HOST}/_static/{n}" for n in chain}
    assert urls <= wanted | imported | named | {a.start_url}, urls - wanted - imported
    return (urls - wanted - imported - {a.start_url}) | _check_handbook_page(out)


def _css_named(site: archive.Site) -> set[str]:
    """What the archive's stylesheets name in url() and @import, as absolute URLs."""
    return {
        urljoin(e.url, ref)
        for e in site.archive.exchanges
        if urlsplit(e.url).path.endswith(".css")
        for ref in re.findall(r"url\(['\"]?([^'\")]+)", site.body(e).decode())
    }


def _check_handbook_page(out: Path) -> set[str]:
    """debian-handbook's installation chapter: three hosts, every screenshot the page
    shows and the theme's @import chain recorded, each byte for byte as served."""
    site = archive.read(out / "handbook-installation")
    a = site.archive
    assert a.start_url == "https://www.handbook.test/sect.installation-steps.html"
    addresses = {o.host: o.address for o in a.origins}
    assert sorted(addresses) == sorted(corpus.HANDBOOK_HOSTS)
    assert len(set(addresses.values())) == 3
    tree = corpus.Tree(out / "tree")
    # Chromium asks for /favicon.ico, which the page does not name (Python's names its
    # icon): not in the package, a 404 recorded as the server sent it.
    favicon = f"https://{corpus.HANDBOOK_HOST}/favicon.ico"
    for e in a.exchanges:
        host, _, path = archive.split_url(e.url)
        if e.url == favicon:
            assert e.status == 404, e
            continue
        assert e.status == 200, e.url
        assert site.body(e) == (tree.host_dir(host) / path.lstrip("/")).read_bytes(), e.url
    page = site.body(a.exchanges[0]).decode()
    shown = set(re.findall(r'src="(https://[^"]+)"', page))
    styles = set(re.findall(r'<link rel="stylesheet"[^>]*href="(https://[^"]+)"', page))
    urls = {e.url for e in a.exchanges}
    screenshots = {u for u in shown if urlsplit(u).hostname == corpus.HANDBOOK_IMAGES_HOST}
    assert len(screenshots) == 19 and shown <= urls, shown - urls
    theme = f"https://{corpus.HANDBOOK_STATIC_HOST}/Common_Content/css"
    imports = {f"{theme}/{n}.css" for n in ("default", "common", "overrides", "lang")}
    assert imports <= urls, imports - urls
    named = _css_named(site)
    page_and_icon = {a.start_url, favicon}
    assert urls <= shown | styles | imports | named | page_and_icon, urls - shown - imports
    return urls - shown - styles - imports - page_and_icon


def test_a_page_whose_server_is_down_exits_2_naming_the_connection(tmp_path: Path) -> None:
    _needs()
    done = _isolated(
        str(CLARKE), "site", "record", "https://www.down.test/", "-o", str(tmp_path / "o"),
        "--resolve", "www.down.test=127.0.0.1:1", "--only-resolved", "--settle-ms", "0",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        "Invalid input: https://www.down.test/: not recorded: could not connect to "
        "www.down.test (127.0.0.1:1): "
    ), done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "o").exists()


# A server that accepts one connection and never answers: its PID in argv[1].pid at once,
# then argv[1] once a connection came; it gives up after 5 minutes whatever happens.
STALL = """
import os, socket, sys, time
open(sys.argv[1] + ".pid", "w").write(str(os.getpid()))
s = socket.create_server(("127.0.0.1", 8443))
s.settimeout(300)
c, _ = s.accept()
open(sys.argv[1], "w").write("accepted")
time.sleep(300)
"""


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _why_not_ended(proc: subprocess.Popen[str], started: set[int]) -> str:
    """What kept `clarke site record` from ending within 60 s of its SIGINT: clarke itself
    (then SIGABRT: Python's fault handler prints every thread's stack) or a process that
    holds its output pipes open after it exited."""
    alive = []
    for pid in sorted(started):
        with contextlib.suppress(OSError):
            alive.append(f"{pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()[:200]!r}")
    if proc.poll() is not None:
        return (
            f"clarke exited ({proc.returncode}) but its pipes stayed open; still running: {alive}"
        )
    proc.send_signal(signal.SIGABRT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        err = "(no stacks within 30 s of SIGABRT)"
    return f"clarke still ran 60 s after SIGINT; still running: {alive}; its stacks:\n{err}"


@pytest.mark.parametrize("browser", ["firefox", "chromium"])
def test_ctrl_c_ends_the_browser_and_mitmdump_and_writes_nothing(
    tmp_path: Path, browser: str
) -> None:
    """A server that never answers keeps the page loading; SIGINT to clarke (what Ctrl-C
    sends) ends it with 130, its browser (every process of it) and mitmdump gone, no
    archive. clarke and the server share a network namespace that has only loopback."""
    _needs()
    out, marker = tmp_path / "o", tmp_path / "stalled"
    script = (
        'ip link set lo up && { python3 -c "$1" "$2" >/dev/null 2>&1 & } && shift 2 && exec "$@"'
    )
    proc = subprocess.Popen(
        ["unshare", "--net", "--", "sh", "-c", script, "sh", STALL, str(marker),
         str(CLARKE), "site", "record", "https://www.stall.test/", "-o", str(out),
         "--resolve", "www.stall.test=127.0.0.1:8443", "--only-resolved", "--browser", browser],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A clarke that outlives its SIGINT is sent SIGABRT below: Python's fault handler
        # then prints every thread's stack, so the failure says where it was stuck.
        env=os.environ | {"PYTHONFAULTHANDLER": "1"},
        # Ctrl-C at a terminal: SIGINT as the default action. A test run started in the
        # background by a non-interactive shell inherits SIGINT ignored (POSIX), and
        # Python then installs no KeyboardInterrupt handler: clarke went on waiting for
        # its page, which is what failed here before.
        preexec_fn=_sigint_default,
    )  # fmt: skip
    pid_file = marker.with_suffix(".pid")
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while not marker.is_file():  # until mitmdump connects for the browser
            assert proc.poll() is None and time.monotonic() < deadline, "the load never started"
            time.sleep(0.2)
        time.sleep(1)
        started = descendants(proc.pid) - {int(pid_file.read_text())}
        assert len(started) >= 3, "no browser, its driver and mitmdump under clarke"
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(_why_not_ended(proc, started)) from None
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in started if proc.returncode != 130 else ():
            # clarke did not end them (mitmdump runs in a session of its own): by PID,
            # also so that none holds clarke's pipes open below.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.communicate()  # closes the pipes: left open, a later test's GC warned of them
        if pid_file.is_file() and pid_file.read_text():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert proc.returncode == 130 and err.strip().endswith("Aborted."), err
    assert "Traceback" not in err and not out.exists()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in started):
        time.sleep(0.2)
    left = [p for p in started if Path(f"/proc/{p}").exists()]
    assert not left, f"still running after clarke exited: {left}"
