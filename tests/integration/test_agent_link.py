"""The link roles' agent contract (docs/running.md), for real against a satlink
satellite on loopback (the satellite needs no TUN device, so no root): POST /config
carries the whole link profile, whatever emulates the link; it is applied once (a
second identical one is a no-op); GET /state says what is in force, with the profile's
content hash; a bad profile is refused with the field named."""

from __future__ import annotations

import ipaddress
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from clarke import profiles
from clarke.agent import auth
from clarke.agent.client import AgentClient
from clarke.contract import LinkConfig
from clarke.link.satlink import SatlinkStation, satlink_binary
from clarke.place import Place
from clarke.place.plan import Addresses, Network
from clarke.roles import profile_digest
from conftest import need
from testbeds import agent_serving

TOKEN = "test-token-" + "0" * 32


class LoopbackPlan(Addresses):
    """A testbed's networks on 127.77.x (only the emulation network is used here)."""

    st_lan = Network("st-lan", ipaddress.ip_network("127.77.0.0/24"), {"terminal": 1, "client": 2})
    emu = Network(
        "emu", ipaddress.ip_network("127.77.1.0/24"), {"terminal": 1, "satellite": 2, "gateway": 3}
    )
    gw_lan = Network("gw-lan", ipaddress.ip_network("127.77.2.0/24"), {"gateway": 1, "server": 2})
    sat = Network("sat", ipaddress.ip_network("127.77.3.0/24"), {"terminal": 1, "gateway": 2})
    mgmt = Network("mgmt", ipaddress.ip_network("127.77.4.0/24"), {"satellite": 4})


@pytest.fixture
def satellite(tmp_path: Path) -> Iterator[str]:
    binary = satlink_binary()
    need(binary is not None and binary.is_file(), "satlink is not built (ci/build.sh)")
    assert binary is not None
    place = Place("netns", "satellite", LoopbackPlan(), tmp_path, tmp_path, tmp_path)
    station = SatlinkStation(place, binary)
    try:
        with agent_serving(station, TOKEN) as url:
            yield url
    finally:
        station.stop()


def test_config_carries_the_whole_profile_once(satellite: str) -> None:
    agent = AgentClient("satellite", satellite, TOKEN)
    assert agent.state().body() == {"profile": None, "profile_sha256": None, "running": False}
    geo = profiles.read("geo")
    reply = agent.configure(LinkConfig(name="geo", profile=geo))
    assert reply.applied is True
    assert reply.state == {
        "profile": "geo",
        "profile_sha256": profile_digest(geo),
        "running": True,
    }
    assert agent.configure(LinkConfig(name="geo", profile=geo)).applied is False  # in force
    in_effect = agent.health().said("satlink")["config"]
    assert in_effect["forward"]["uplink_delay_ms"] == geo.forward.uplink_delay_ms
    assert in_effect["return"]["rate_bps"] == round(geo.return_.rate_mbps * 1e6)
    meo = profiles.read("meo")
    assert agent.configure(LinkConfig(name="meo", profile=meo)).applied is True  # at run time
    assert agent.link_state().profile_sha256 == profile_digest(meo) != profile_digest(geo)
    assert (
        agent.health().said("satlink")["config"]["forward"]["uplink_delay_ms"]
        == meo.forward.uplink_delay_ms
    )
    stats = agent.stats()
    assert "forward" in stats and "bytes_onto_link" not in stats  # the satellite only relays


def test_bad_profile_is_refused_with_the_field_named(satellite: str) -> None:
    agent = AgentClient("satellite", satellite, TOKEN)
    bad = profiles.read("geo").model_dump(by_alias=True, mode="json")
    bad["forward"]["rate_mbps"] = -1
    for body, named in (
        ({"name": "geo", "profile": bad}, r"profile\.forward\.rate_mbps"),
        ({"link": {}}, "name: required field is missing"),
    ):
        r = httpx.post(
            f"{satellite}/config", json=body, headers=auth.bearer(TOKEN), trust_env=False
        )
        assert r.status_code == 400 and re.search(named, r.json()["error"]), r.text
    assert agent.link_state().running is False  # nothing was started


def test_a_satlink_dying_at_start_is_the_configures_answer_not_a_problem_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent stops when its role reports a problem (agent/serve.py polls it every
    0.5 s). A satlink that exits during start-up is the answer of the configure that
    started it: while that configure runs, the station reports no problem, or the agent
    would stop before answering (a loaded CI run saw `testbed up` get no answer at all
    instead of exit 3). The window is widened here: start-up is seen to end 1 s late."""
    from clarke.link import satlink as satlink_module

    fake = tmp_path / "satlink"
    fake.write_text("#!/bin/sh\necho 'satlink: cannot open the TUN device' >&2\nexit 1\n")
    fake.chmod(0o755)
    place = Place("netns", "satellite", LoopbackPlan(), tmp_path, tmp_path, tmp_path)
    station = SatlinkStation(place, fake)
    waited = threading.Event()
    original = satlink_module.procs.wait_until

    def late(*args: object, **kwargs: object) -> None:
        original(*args, **kwargs)  # type: ignore[arg-type]
        waited.set()
        threading.Event().wait(1.0)

    monkeypatch.setattr(satlink_module.procs, "wait_until", late)
    said: list[BaseException] = []

    def configure() -> None:
        try:
            station.configure(LinkConfig(name="geo", profile=profiles.read("geo")).body())
        except BaseException as e:  # the answer the test reads
            said.append(e)

    worker = threading.Thread(target=configure)
    worker.start()
    try:
        assert waited.wait(10), "satlink's start-up never ended"
        # satlink has exited; its configure has not answered yet.
        assert station.problem() is None
    finally:
        worker.join(10)
        station.stop()
    assert said and "exited during start-up" in str(said[0]), said
    assert station.problem() is None  # the configure took it back
