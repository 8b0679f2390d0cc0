"""The Firefox build id found beside the real binary, through the links and launcher
scripts distributions put in front of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from clarke.browser import firefox


def _install(root: Path, build: str) -> Path:
    lib = root / "lib" / "firefox-nightly"
    lib.mkdir(parents=True)
    (lib / "application.ini").write_text(f"[App]\nVersion=148.0a1\nBuildID={build}\n")
    real = lib / "firefox-nightly"
    real.write_text("#!/bin/sh\necho Mozilla Firefox 148.0a1\n")
    real.chmod(0o755)
    return real


def test_through_a_link(tmp_path: Path) -> None:
    real = _install(tmp_path, "20261123093612")
    link = tmp_path / "firefox-nightly"
    link.symlink_to(real)
    assert firefox.build_id(str(link)) == "20261123093612"
    assert firefox.version(str(link)) == "148.0a1 build 20261123093612"


def test_through_a_launcher_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = _install(tmp_path, "20261124093000")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "firefox-nightly").symlink_to(real)
    launcher = bin_dir / "firefox"
    launcher.write_text(
        '#!/bin/sh\n[ -x "$0.real" ] && exec "$0.real" "$@"\nexec firefox-nightly "$@"\n'
    )
    launcher.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert firefox.build_id("firefox") == "20261124093000"


def test_no_build_id_is_said_as_none(tmp_path: Path) -> None:
    lone = tmp_path / "firefox"
    lone.write_text("#!/bin/sh\n")
    lone.chmod(0o755)
    assert firefox.build_id(str(lone)) == ""
    assert firefox.with_build("153.7.0", "") == "153.7.0"
