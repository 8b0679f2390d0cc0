"""Captures without a testbed: a pcap cut at a packet boundary, the browser's files within
their budget, what a campaign keeps per mode, and the agent's capture endpoints."""

from __future__ import annotations

import base64
import contextlib
import struct
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from clarke.agent.server import make_handler
from clarke.browser.capture import KEYLOG, BrowserCapture, CapturedFiles
from clarke.contract import CaptureStopped
from clarke.errors import InputError
from clarke.place import Place
from clarke.place.capture import PacketCapture, whole_packets
from clarke.place.plan import plan
from clarke.run.session.captures import CaptureMode, CapturePolicy, write

TOKEN = "t" * 43


def _pcap(*sizes: int) -> bytes:
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    records = b"".join(
        struct.pack("<IIII", 0, 0, n, n) + bytes([i]) * n for i, n in enumerate(sizes)
    )
    return header + records


def test_a_pcap_is_cut_after_the_last_whole_packet_within_the_limit() -> None:
    data = _pcap(100, 200, 300)
    assert whole_packets(data, len(data)) == data
    assert whole_packets(data, 24 + 116 + 216) == data[: 24 + 116 + 216]
    assert whole_packets(data, 24 + 116 + 215) == data[: 24 + 116]
    assert whole_packets(data, 30) == data[:24]  # the header alone
    assert whole_packets(data[:-1], 10_000) == data[: 24 + 116 + 216]  # a torn last packet


def test_the_browser_files_fit_the_budget_or_are_left_out_whole(tmp_path: Path) -> None:
    capture = BrowserCapture(tmp_path)
    (capture.dir / KEYLOG).write_text("x" * 100)
    (capture.tmp / "qlog_123").mkdir()
    (capture.tmp / "qlog_123" / "a.sqlog").write_bytes(b"a" * 50)
    (capture.tmp / "qlog_123" / "b.sqlog").write_bytes(b"b" * 80)
    got = capture.collect(160)
    assert sorted(got.decoded()) == [KEYLOG, "qlog/a.sqlog"]
    assert got.left_out == ["qlog/b.sqlog (80 bytes)"]
    assert capture.env()["SSLKEYLOGFILE"] == str(capture.dir / KEYLOG)
    capture.remove()
    assert not capture.dir.exists()


def _link(pcap: bytes) -> CaptureStopped:
    return CaptureStopped(interface="lan", pcap_b64=base64.b64encode(pcap).decode(),
                          bytes=len(pcap), truncated=False, captured=3, dropped=0)  # fmt: skip


def _browser(**files: bytes) -> CapturedFiles:
    return CapturedFiles(files={k: base64.b64encode(v).decode() for k, v in files.items()})


def test_failed_keeps_only_a_failed_loads_files(tmp_path: Path) -> None:
    policy = CapturePolicy(CaptureMode.failed, tmp_path)
    pcap = _pcap(60)
    ok = write(policy, "r1-a1", True, _link(pcap), _browser(**{KEYLOG: b"k"}), [])
    assert ok.kept is False and not (tmp_path / "captures").exists()
    failed = write(policy, "r1-a2", False, _link(pcap), _browser(**{KEYLOG: b"k"}), [])
    assert failed.kept is True and failed.dir == "captures/r1-a2"
    assert (tmp_path / "captures/r1-a2/link.pcap").read_bytes() == pcap
    assert failed.files == {KEYLOG: 1, "link.pcap": len(pcap)}
    assert failed.pcap is not None and failed.pcap.packets_dropped == 0


def test_only_the_expected_file_names_are_written(tmp_path: Path) -> None:
    policy = CapturePolicy(CaptureMode.all, tmp_path / "one", flat=True)
    got = write(policy, "load", True, None, _browser(**{"../../evil": b"x", KEYLOG: b"k"}), [])
    assert got.files == {KEYLOG: 1} and got.dir == "."
    assert any("evil" in p for p in got.problems)
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == [KEYLOG]
    with pytest.raises(InputError):
        write(policy, "../x", False, None, None, [])


class _Terminal:
    """A role that answers and does nothing: the endpoints under test are the agent's."""

    role, implementation = "terminal", "test"

    def health(self) -> dict[str, Any]:
        return {"role": self.role, "ready": True}

    def state(self) -> dict[str, Any]:
        return {}

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"applied": False, "state": {}}

    def stats(self) -> dict[str, Any]:
        return {}

    def reset_stats(self) -> dict[str, Any]:
        return {}

    def problem(self) -> str | None:
        return None

    def stop(self) -> None:
        pass


@contextlib.contextmanager
def _serve(capture: PacketCapture | None, tmp_path: Path) -> Iterator[httpx.Client]:
    role = _Terminal()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(role, TOKEN, capture))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            yield c
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_capture_endpoints_exist_only_where_a_capture_is_offered(tmp_path: Path) -> None:
    with _serve(None, tmp_path) as c:
        assert c.post("/capture/start", json={"max_bytes": 1000}).status_code == 404
    place = Place("netns", "terminal", plan(41), tmp_path, tmp_path, tmp_path)
    with _serve(PacketCapture(place, "st-lan"), tmp_path) as c:
        for body in ({}, {"max_bytes": "1000"}, {"max_bytes": 10}, {"max_bytes": 1000, "x": 1}):
            r = c.post("/capture/start", json=body)
            assert r.status_code == 400, (body, r.text)
        r = c.post("/capture/stop", json={})
        assert r.status_code == 400 and "no capture is running" in r.text
