"""Captures on request: for a load, the packets that crossed the satellite hop (a pcap
from the terminal's interface to the client's LAN) and the browser's TLS key log and
HTTP/3 qlog files, written under the results directory:

    captures/<label>/link.pcap      the satellite hop, both directions (tcpdump)
    captures/<label>/keys.log       NSS key log: Wireshark decrypts TLS and QUIC with it
    captures/<label>/qlog/*.sqlog   Firefox's qlog per HTTP/3 connection (JSON-SEQ)

`all` keeps every load's files, `failed` only a failed load's (every load is captured;
an ok load's files are dropped). Each load's pcap, and its browser files together, stay
within `max_bytes`; docs/captures.md says how to open them."""

from __future__ import annotations

import base64
import contextlib
import re
import shutil
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from clarke.browser.capture import CapturedFiles
from clarke.contract import CaptureStopped
from clarke.errors import EnvironmentProblem, InputError
from clarke.ids import check_id
from clarke.private_files import DIR_MODE, PrivateDir, Refused
from clarke.results.details import CaptureKept, PcapSummary

DEFAULT_MAX_MB = 100
AT_ROLE = "terminal"  # whose agent captures (agent/serve.py)
PCAP = "link.pcap"
# The names a client agent may send back (browser/capture.py): nothing else is written.
BROWSER_FILE = re.compile(r"^(keys\.log|qlog/[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\.s?qlog)$")


class CaptureMode(StrEnum):
    none = "none"
    failed = "failed"
    all = "all"


@dataclass(frozen=True)
class CapturePolicy:
    mode: CaptureMode
    root: Path  # captures/<label>/ is made under it (flat: the files go in root itself)
    max_bytes: int = DEFAULT_MAX_MB * 1_000_000
    flat: bool = False  # one load (clarke load --capture DIR)
    # The root directory as it was when the policy was made (device, inode): a root
    # swapped for another directory (or a link) before a load's files are written is
    # refused. Taken here when the root exists.
    root_id: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.root_id is None and self.active and self.root.is_dir():
            object.__setattr__(self, "root_id", PrivateDir.identity(self.root))

    @property
    def active(self) -> bool:
        return self.mode is not CaptureMode.none


def prepare_dir(path: Path) -> None:
    """`clarke load --capture DIR`: DIR made (0700) if missing, else it must be an
    empty directory; InputError otherwise."""
    try:
        path.mkdir(mode=DIR_MODE, parents=True)
    except FileExistsError:
        if not path.is_dir():
            raise InputError(f"--capture {path}: not a directory") from None
        if any(path.iterdir()):
            raise InputError(f"--capture {path}: the directory is not empty") from None


def check_substrate(mode: CaptureMode, substrate: str) -> None:
    """Before anything runs: captures need tcpdump in the terminal's place, which on
    netns is this host; the compose stack's images have none yet."""
    if mode is CaptureMode.none:
        return
    if substrate != "netns":
        raise InputError(
            f"--capture runs on the netns substrate only (the {substrate} stack's terminal "
            "image has no tcpdump)"
        )
    if shutil.which("tcpdump") is None:
        raise EnvironmentProblem("--capture needs tcpdump (Debian: tcpdump; ci/setup.sh)")


def write(
    policy: CapturePolicy,
    label: str,
    ok: bool,
    link: CaptureStopped | None,
    browser: CapturedFiles | None,
    problems: list[str],
) -> CaptureKept:
    """Write one load's files (unless the policy drops an ok load's); what the record
    carries about them: where, which files and sizes, whether the pcap is complete."""
    check_id(label, "capture label")
    files: dict[str, bytes] = {}
    summary = CaptureKept()
    if link is not None:
        files[PCAP] = base64.b64decode(link.pcap_b64 or "")
        summary.pcap = PcapSummary(
            interface=link.interface,
            bytes=link.bytes,
            truncated=bool(link.truncated),
            packets_captured=link.captured,
            packets_dropped=link.dropped,
        )
    if browser is not None:
        for name, data in browser.decoded().items():
            if BROWSER_FILE.fullmatch(name):
                files[name] = data
            else:
                problems = [*problems, f"the client sent a file named {name[:80]!r}: not kept"]
        if browser.left_out:
            summary.left_out = list(browser.left_out)
    if problems:
        summary.problems = problems
    if ok and policy.mode is CaptureMode.failed:
        summary.kept = False
        return summary
    folder = policy.root if policy.flat else policy.root / "captures" / label
    _write_files(policy, label, files)
    summary.kept = True
    summary.dir = str(folder.relative_to(policy.root)) if not policy.flat else "."
    summary.files = {name: len(data) for name, data in sorted(files.items())}
    return summary


def _write_files(policy: CapturePolicy, label: str, files: dict[str, bytes]) -> None:
    """Every file new (0600) in directories of 0700, written through descriptors of the
    directories, never through a link: DIR (or the results directory) may be writable
    by another user, who could plant links in it while the load runs. Whatever is in
    the way is named, nothing is written through it; the files that could be written
    are (Refused lists the others)."""
    if not policy.root.exists():
        policy.root.mkdir(mode=DIR_MODE, parents=True)
    refused: list[str] = []
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(PrivateDir.open(policy.root, policy.root_id))
        if not policy.flat:
            folder = stack.enter_context(folder.subdir("captures"))
            folder = stack.enter_context(folder.subdir(label))
        for name, data in files.items():
            where, _, base = name.rpartition("/")
            try:
                with contextlib.ExitStack() as sub:
                    target = sub.enter_context(folder.subdir(where)) if where else folder
                    target.write_new(base, data)
            except Refused as e:
                refused.append(str(e))
    if refused:
        raise Refused("capture: " + "; ".join(refused))
