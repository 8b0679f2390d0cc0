"""Chromium's switches, its NetLog reading and what a Chromium load request may ask."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from clarke.browser import chromium
from clarke.browser.load import LoadRequest, LoadResult, with_netlog
from clarke.results.record import Status
from clarke.tls import issue_testbed_pki

URL = "https://www.clarke.test/uniform-100k/index.html"


def _switches(version: str) -> list[str]:
    return chromium.switches(
        version,
        443,
        user_data_dir=Path("/tmp/x"),
        window=(1366, 768),
        host="www.clarke.test",
        address="198.18.2.2",
        ca_spki="AAAA",
        netlog=Path("/tmp/x/netlog.json"),
    )


def test_every_switch_has_a_reason_and_each_version_is_forced() -> None:
    for s in chromium.BASE + chromium.http_version("3", "h", 443):
        assert s.why and not s.name.startswith("-"), s
    h1, h2, h3 = _switches("1.1"), _switches("2"), _switches("3")
    assert "--disable-http2" in h1 and "--disable-quic" in h1
    assert "--disable-http2" not in h2 and "--disable-quic" in h2
    assert "--origin-to-force-quic-on=www.clarke.test:443" in h3 and "--enable-quic" in h3
    assert "--disable-quic" not in h3
    for args in (h1, h2, h3):
        assert "--host-resolver-rules=MAP www.clarke.test 198.18.2.2, MAP * ~NOTFOUND" in args
        assert "--ignore-certificate-errors-spki-list=AAAA" in args
        assert "--disable-background-networking" in args


def test_the_spki_pin_is_the_one_openssl_computes(tmp_path: Path) -> None:
    pki = issue_testbed_pki(tmp_path)
    der = subprocess.run(
        ["openssl", "x509", "-in", str(pki.ca_cert), "-pubkey", "-noout"],
        check=True,
        capture_output=True,
    ).stdout
    spki = subprocess.run(
        ["openssl", "pkey", "-pubin", "-outform", "der"], input=der, check=True, capture_output=True
    ).stdout
    digest = subprocess.run(
        ["openssl", "dgst", "-sha256", "-binary"], input=spki, check=True, capture_output=True
    ).stdout
    b64 = subprocess.run(
        ["openssl", "base64", "-A"], input=digest, check=True, capture_output=True
    ).stdout
    assert chromium.spki_sha256(pki.ca_cert) == b64.decode().strip()


def _netlog(tmp_path: Path, events: list[dict]) -> Path:
    types = {
        "QUIC_CONGESTION_CONTROL_CONFIGURED": 1,
        "UDP_CONNECT": 2,
        "UDP_BYTES_SENT": 3,
        "TCP_CONNECT_ATTEMPT": 4,
    }
    doc = {
        "constants": {"logEventTypes": types},
        "events": [{**e, "type": types[e["type"]]} for e in events],
    }
    path = tmp_path / "netlog.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_netlog_names_the_quic_cc_and_only_addresses_that_got_traffic(tmp_path: Path) -> None:
    path = _netlog(
        tmp_path,
        [
            {
                "type": "QUIC_CONGESTION_CONTROL_CONFIGURED",
                "params": {"congestion_control_type": "CUBIC_BYTES"},
            },
            # Chromium's local-address probe: a UDP connect that sends nothing.
            {
                "type": "UDP_CONNECT",
                "source": {"id": 1},
                "params": {"address": "[2001:4860:4860::8888]:443"},
            },
            {"type": "UDP_CONNECT", "source": {"id": 2}, "params": {"address": "198.18.2.2:443"}},
            {"type": "UDP_BYTES_SENT", "source": {"id": 2}, "params": {"byte_count": 1250}},
        ],
    )
    summary = chromium.netlog_summary(path)
    assert summary == {"quic_cc": ["CUBIC_BYTES"], "reached": ["198.18.2.2:443"]}
    ok = LoadResult(status=Status.ok, engine="selenium", browser="chromium")
    assert with_netlog(ok, summary, URL).status is Status.ok
    # A connection anywhere else fails the load, naming it.
    path = _netlog(
        tmp_path,
        [
            {"type": "UDP_CONNECT", "source": {"id": 2}, "params": {"address": "198.18.2.2:443"}},
            {"type": "UDP_BYTES_SENT", "source": {"id": 2}, "params": {"byte_count": 1250}},
            {
                "type": "TCP_CONNECT_ATTEMPT",
                "source": {"id": 3},
                "params": {"address": "198.18.2.2:80"},
            },
        ],
    )
    failed = with_netlog(ok, chromium.netlog_summary(path), URL)
    assert failed.status is Status.failed and "198.18.2.2:80" in failed.reason


def test_a_chromium_request_asks_only_what_chromium_can_do() -> None:
    LoadRequest(url=URL, http="1.1", browser="chromium")  # 6 connections, the default
    with pytest.raises(ValidationError, match="Chromium opens 6 connections per server"):
        LoadRequest(url=URL, http="1.1", browser="chromium", connections=1)
    with pytest.raises(ValidationError, match="Firefox preferences"):
        LoadRequest(url=URL, http="2", browser="chromium", prefs={"network.http.x": 1})
    with pytest.raises(ValidationError, match="'firefox' or 'chromium'"):
        LoadRequest.model_validate({"url": URL, "http": "2", "browser": "safari"})


def test_the_docs_list_every_switch_and_disabled_feature() -> None:
    text = Path("docs/browsers.md").read_text()
    for s in chromium.BASE:
        if s.name != "disable-features":
            assert f"`--{s.name}" in text, s.name
    for name, _ in chromium.DISABLED_FEATURES:
        assert name in text, name
    for version in ("1.1", "2", "3"):
        for s in chromium.http_version(version, "www.clarke.test", 443):
            assert f"`{s.arg}`" in text, s.arg


def test_the_console_summary_has_a_browser_column_only_with_several_browsers() -> None:
    from rich.console import Console

    from clarke.results.summary import summarise
    from clarke.run.loop.console import table
    from helpers import moved, record

    firefox = [record(i) for i in range(2)]
    both = firefox + [
        moved(r, browser="chromium").model_copy(update={"run_id": r.run_id + "-chromium"})
        for r in firefox
    ]

    def text(records: list) -> str:  # type: ignore[type-arg]
        console = Console(width=300, record=True)
        console.print(table(summarise(records), "t"))
        return console.export_text()

    assert "browser" not in text(firefox) and "chromium" not in text(firefox)
    lines = text(both).splitlines()
    # One block per metric; each names the browser as its cells' column, a row each.
    heads = [line for line in lines if line.strip().startswith("cell")]
    assert len(heads) == 3 and all("cell (browser)" in h for h in heads)
    assert sum("chromium" in line for line in lines) == len(heads)
    assert sum("firefox" in line for line in lines) == len(heads)


def test_a_running_chromiums_netlog_is_read_per_load_from_its_start(tmp_path: Path) -> None:
    """Context isolation: Chromium keeps writing one NetLog; each load reads the events
    since it began, a line still being written waits, and a socket connected in an
    earlier load that sends in this one is still named."""
    types = {"UDP_CONNECT": 2, "UDP_BYTES_SENT": 3, "TCP_CONNECT_ATTEMPT": 4}
    path = tmp_path / "netlog.json"
    head = json.dumps({"constants": {"logEventTypes": types, "timeTickOffset": "1000"}})
    path.write_text(head[:-1] + ',\n"events": [\n')

    def write(*events: dict, tail: str = "") -> None:
        with path.open("a") as f:
            for e in events:
                f.write(json.dumps({**e, "type": types[e["type"]]}) + ",\n")
            f.write(tail)

    tail = chromium.NetlogTail(path)
    write(
        {"type": "UDP_CONNECT", "time": "100", "source": {"id": 7}, "params": {"address": "a:443"}},
        {"type": "UDP_BYTES_SENT", "time": "110", "source": {"id": 7}},
        tail='{"type": 4, "time": "12',  # a line not written whole yet
    )
    assert tail.since(1100) == {"quic_cc": [], "reached": ["a:443"]}
    write(
        tail='0", "source": {"id": 8}, "params": {"address": "b:80"}},\n',
    )
    write({"type": "UDP_BYTES_SENT", "time": "300", "source": {"id": 7}})
    # The second load began at Unix ms 1250: the TCP attempt at 1120 was the first's.
    assert tail.since(1250) == {"quic_cc": [], "reached": ["a:443"]}
    assert tail.since(1400) == {"quic_cc": [], "reached": []}
