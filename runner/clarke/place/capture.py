"""A packet capture in a role's place: tcpdump on one of its interfaces, for one page
load, within a size cap. The link agents offer it (POST /capture/start, /capture/stop);
the runner asks the terminal for the packets on its interface to the client's LAN,
which are all the packets that cross the satellite hop, in both directions.

The file is classic pcap (tcpdump -w). Past the cap tcpdump is stopped and the file is
cut after the last whole packet within it; `truncated` says so. tcpdump's own counts
(captured, dropped by the kernel) come back with the packets, so a reader knows
whether the capture is complete."""

from __future__ import annotations

import re
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from clarke.errors import ClarkeError, EnvironmentProblem, InputError
from clarke.place import Place

MAX_CAPTURE_BYTES = 512 * 1_000_000  # what a request may ask for at most
POLL_S = 0.05  # how often the size is checked against the cap
READY_TIMEOUT_S = 10.0
BUFFER_KIB = 64 * 1024
PCAP_HEADER = 24
RECORD_HEADER = 16


@dataclass(frozen=True)
class Captured:
    interface: str
    pcap: bytes
    truncated: bool  # the cap was reached: packets after it are missing
    captured: int | None  # tcpdump's counts, when it said them
    dropped: int | None


def whole_packets(data: bytes, limit: int) -> bytes:
    """The longest prefix of a pcap file that ends on a packet boundary and is at most
    `limit` bytes (the header alone when not even one packet fits)."""
    if len(data) < PCAP_HEADER:
        return data[:0]
    magic = data[:4]
    order = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    end = PCAP_HEADER
    while end + RECORD_HEADER <= len(data):
        (incl_len,) = struct.unpack_from(order + "I", data, end + 8)
        nxt = end + RECORD_HEADER + incl_len
        if nxt > len(data) or nxt > limit:
            break
        end = nxt
    return data[:end]


def _count(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else None


class PacketCapture:
    """One capture at a time on `network`'s interface of `place`; a start while one
    runs discards the running one (its runner never came back for it)."""

    def __init__(self, place: Place, network: str) -> None:
        self.place, self.network = place, network
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._max = 0
        self._over = threading.Event()
        self._interface = ""

    @property
    def running(self) -> bool:
        return self._proc is not None

    def start(self, max_bytes: int) -> dict[str, object]:
        if not 24 < max_bytes <= MAX_CAPTURE_BYTES:
            raise InputError(f"max_bytes must be between 25 and {MAX_CAPTURE_BYTES}")
        binary = shutil.which("tcpdump")
        if binary is None:
            raise EnvironmentProblem(
                f"tcpdump is not installed in the {self.place.role}'s place (Debian: tcpdump)"
            )
        if self._proc is not None:
            self.stop()  # left by a runner that did not come back for it: discarded
        with self._lock:
            self._interface = self.place.iface(self.network)
            self._dir = Path(tempfile.mkdtemp(prefix="clarke-capture-", dir=self._parent()))
            out = self._dir / "link.pcap"
            # --immediate-mode: every packet reaches tcpdump at once (buffered ones
            # would be lost when it is stopped); -B: a kernel buffer of BUFFER_KIB, room
            # for hundreds of whole super-packets, so that a busy host (the browser
            # starting) does not make the kernel drop any; -U: write each packet as it
            # comes (the size check sees it); -Z root: keep writing the file as the
            # user that created it. umask 077: the file is 0600 from its first byte, in
            # a directory of 0700 (mkdtemp) under the role's run directory.
            argv = self.place.argv(
                [binary, "-i", self._interface, "-w", str(out), "-U", "-n", "-s", "0",
                 "--immediate-mode", "-B", str(BUFFER_KIB), "-Z", "root"]
            )  # fmt: skip
            with open(self._dir / "tcpdump.err", "wb") as err:
                proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, umask=0o077)
            if not self._wait_listening(proc):
                self._end(proc)
                said = (self._dir / "tcpdump.err").read_text(errors="replace").strip()
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
                raise ClarkeError(f"tcpdump on {self._interface} did not start: {said[-300:]}")
            self._proc, self._max = proc, max_bytes
            self._over.clear()
            threading.Thread(target=self._watch, args=(proc, out), daemon=True).start()
            return {"interface": self._interface, "max_bytes": max_bytes}

    def stop(self) -> Captured:
        with self._lock:
            proc, folder = self._proc, self._dir
            if proc is None or folder is None:
                raise InputError("no capture is running")
            self._proc, self._dir = None, None
            self._end(proc)
            try:
                data = (folder / "link.pcap").read_bytes()
                said = (folder / "tcpdump.err").read_text(errors="replace")
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        cut = whole_packets(data, self._max)
        return Captured(
            interface=self._interface,
            pcap=cut,
            truncated=self._over.is_set() or len(cut) < len(data),
            captured=_count(r"(\d+) packets? captured", said),
            dropped=_count(r"(\d+) packets? dropped by kernel", said),
        )

    def close(self) -> None:
        """Stop a capture left running (the agent is stopping)."""
        if self._proc is not None:
            self.stop()

    # --- helpers -------------------------------------------------------------------------
    def _parent(self) -> Path:
        parent = self.place.run_dir / "captures"
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return parent

    def _wait_listening(self, proc: subprocess.Popen[bytes]) -> bool:
        assert self._dir is not None
        err = self._dir / "tcpdump.err"
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if b"listening on" in err.read_bytes():
                return True
            if proc.poll() is not None:
                return False
            time.sleep(0.02)
        return False

    def _watch(self, proc: subprocess.Popen[bytes], out: Path) -> None:
        """Stop tcpdump once the file passes the cap."""
        while proc.poll() is None:
            try:
                size = out.stat().st_size
            except FileNotFoundError:
                size = 0
            if size >= self._max:
                self._over.set()
                proc.send_signal(signal.SIGTERM)
                return
            time.sleep(POLL_S)

    @staticmethod
    def _end(proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM (tcpdump flushes and prints its counts), SIGKILL after 5 s."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
