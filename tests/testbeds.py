"""The testbeds and agents tests bring up, and take down again whatever happens: a
session on the `lan` profile, a private state directory (a testbed id of its own), an
agent's HTTP API on loopback."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from clarke.agent.server import make_handler
from clarke.run.session.session import Session
from clarke.testbed.substrate import NetnsSubstrate


@contextlib.contextmanager
def lan_session(
    substrate: NetnsSubstrate, pages: list[str], cc: str | None = None
) -> Iterator[Session]:
    """A session of `pages` on `substrate`'s testbed, up on `lan` (with `cc` in force
    when given), closed after."""
    session = Session(substrate, pages)
    try:
        session.start("lan")
        if cc is not None:
            session.ensure_cc(cc)
        yield session
    finally:
        session.close()


@contextlib.contextmanager
def state_dir(state: Path) -> Iterator[Path]:
    """CLARKE_STATE_DIR is `state` meanwhile (so a testbed made there has an id of its
    own); after, the variable is as it was and `state` is removed."""
    previous = os.environ.get("CLARKE_STATE_DIR")
    os.environ["CLARKE_STATE_DIR"] = str(state)
    try:
        yield state
    finally:
        if previous is None:
            os.environ.pop("CLARKE_STATE_DIR", None)
        else:
            os.environ["CLARKE_STATE_DIR"] = previous
        shutil.rmtree(state, ignore_errors=True)


@contextlib.contextmanager
def agent_serving(role: Any, token: str, **slots: Any) -> Iterator[str]:
    """`role`'s agent API (with `slots`: pep, names) on a loopback port; its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(role, token, **slots))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def down_each_testbed_in(state: Path, env: dict[str, str]) -> None:
    """`clarke testbed down` of each testbed recorded in the state directory `state`
    (by its id, never --all: other testbeds on the host are not the test's), then
    `state` removed."""
    for state_file in state.glob("*.json"):
        subprocess.run(
            [sys.executable, "-m", "clarke", "testbed", "down", "--id", state_file.stem],
            env=env, capture_output=True, timeout=300,
        )  # fmt: skip
    shutil.rmtree(state, ignore_errors=True)
