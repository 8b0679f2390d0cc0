"""The link roles' agent contract (docs/running.md), for real against a satlink
satellite on loopback (the satellite needs no TUN device, so no root): POST /config
carries the whole link profile, whatever emulates the link, and a bad profile is
refused with the field named."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from clarke.agent.client import AgentClient
from clarke.agent.roles import SatlinkRole
from clarke.agent.server import make_handler
from clarke.errors import ClarkeError
from clarke.link import profiles
from clarke.testbed.backends import answers, satlink_binary
from conftest import free_port, need

TOKEN = "test-token-" + "0" * 32


@pytest.fixture
def satellite(tmp_path: Path) -> Iterator[str]:
    binary = satlink_binary()
    need(binary is not None and binary.is_file(), "satlink is not built (ci/build.sh)")
    assert binary is not None
    config = tmp_path / "link.json"
    config.write_text(json.dumps(profiles.load("lan").to_satlink_config()))
    sock = tmp_path / "sat.sock"
    ports = [free_port() for _ in range(3)]
    proc = subprocess.Popen(
        [str(binary), "sat", "--emu-bind", f"127.0.0.1:{ports[0]}",
         "--gw", f"127.0.0.1:{ports[1]}", "--st", f"127.0.0.1:{ports[2]}",
         "--config", str(config), "--control", str(sock), "--rt-priority", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    httpd: ThreadingHTTPServer | None = None
    try:
        deadline = time.monotonic() + 10
        while not answers("satellite", sock):
            assert proc.poll() is None and time.monotonic() < deadline, "satlink did not start"
            time.sleep(0.05)
        httpd = ThreadingHTTPServer(
            ("127.0.0.1", 0), make_handler(SatlinkRole("satellite", str(sock)), TOKEN)
        )
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        proc.terminate()
        proc.wait(timeout=10)


def test_config_carries_the_whole_profile(satellite: str) -> None:
    agent = AgentClient("satellite", satellite, TOKEN)
    geo = profiles.load("geo")
    reply = agent.configure({"name": "geo", "profile": geo.model_dump(by_alias=True, mode="json")})
    assert reply["applied"] == "geo"
    in_effect = agent.health()["satlink"]["config"]
    assert in_effect["forward"]["uplink_delay_ms"] == geo.forward.uplink_delay_ms
    assert in_effect["return"]["rate_bps"] == round(geo.return_.rate_mbps * 1e6)
    stats = agent.stats()
    assert "forward" in stats and "bytes_onto_link" not in stats  # the satellite only relays


def test_bad_profile_is_refused_with_the_field_named(satellite: str) -> None:
    agent = AgentClient("satellite", satellite, TOKEN)
    bad = profiles.load("geo").model_dump(by_alias=True, mode="json")
    bad["forward"]["rate_mbps"] = -1
    with pytest.raises(ClarkeError, match=r"forward\.rate_mbps"):
        agent.configure({"name": "geo", "profile": bad})
    with pytest.raises(ClarkeError, match="takes"):
        agent.configure({"link": {}})
