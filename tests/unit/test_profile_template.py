"""Firefox's profile template: what a load's profile takes from it, and what happens
when none can be made (browser/profile_template.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clarke.browser import firefox, profile_template
from clarke.timing import Phases


def _template_with_state(root: Path) -> Path:
    """A template directory holding the kept files and, beside them, state a load must
    never inherit (as if someone had put it there)."""
    t = root / "template"
    (t / "startupCache").mkdir(parents=True)
    (t / "startupCache" / "scriptCache.bin").write_bytes(b"compiled")
    for name in ("compatibility.ini", "extensions.json", "addonStartup.json.lz4", "times.json"):
        (t / name).write_text(name)
    for name in ("cookies.sqlite", "prefs.js", "SiteSecurityServiceState.bin", "cert9.db"):
        (t / name).write_text("state")
    (t / "cache2").mkdir()
    (t / "cache2" / "entry").write_text("a cached response")
    return t


def test_a_seeded_profile_has_the_kept_files_only(tmp_path: Path) -> None:
    template = _template_with_state(tmp_path)
    profile = firefox.make_profile(None, {"network.http.http2.enabled": True}, tmp_path, template)
    assert sorted(p.name for p in profile.iterdir()) == sorted(
        [*profile_template.TEMPLATE_FILES, "user.js"]
    )
    assert (profile / "startupCache" / "scriptCache.bin").read_bytes() == b"compiled"
    assert "network.http.http2.enabled" in (profile / "user.js").read_text()


def test_without_a_template_the_profile_is_empty_but_for_user_js(tmp_path: Path) -> None:
    profile = firefox.make_profile(None, {}, tmp_path)
    assert [p.name for p in profile.iterdir()] == ["user.js"]


def test_a_template_that_cannot_be_made_is_tried_once_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries = []

    def fails(binary: str, geckodriver: str, parent: Path | None) -> Path:
        tries.append(binary)
        raise RuntimeError("Firefox exited at start")

    monkeypatch.setattr(profile_template, "_make", fails)
    monkeypatch.setattr(firefox, "find_geckodriver", lambda: "geckodriver")
    templates = profile_template.Templates()
    monkeypatch.setattr(profile_template, "TEMPLATES", templates)
    made = [firefox.profile_for_load("ff", None, {}, tmp_path, Phases()) for _ in range(2)]
    assert tries == ["ff"]
    assert [label for _, label in made] == ["empty: RuntimeError: Firefox exited at start"] * 2
    assert all([p.name for p in profile.iterdir()] == ["user.js"] for profile, _ in made)
