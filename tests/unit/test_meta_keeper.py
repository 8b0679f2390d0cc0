"""meta.json across invocations: one keeper per results directory reads it once and
writes it whole at each change; a resume appends its link checks and applies to the
earlier ones and never erases them; every recorded meta.json reads and writes back as it
was."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from clarke.results import store
from clarke.results.meta import LinkCheckRecord, Meta
from clarke.run.loop.link_checks import LinkCheck
from clarke.run.loop.meta import CampaignMeta

DATA = Path("tests/data")


def _dir(tmp_path: Path, earlier: list[LinkCheckRecord]) -> Path:
    campaign = Path("campaigns/smoke.yaml")
    return store.create(tmp_path, "c", campaign, {"runs": []}, Meta(link=earlier, applies=[]))


def test_a_resume_appends_its_link_checks_to_the_earlier_ones(tmp_path: Path) -> None:
    earlier = [LinkCheckRecord(phase="before", profile="lan", passed=True, time_ns=1)]
    d = _dir(tmp_path, earlier)
    session = SimpleNamespace(applied=[])
    keeper = CampaignMeta(store.MetaKeeper.open(d), session)  # type: ignore[arg-type]
    keeper.save()  # a resume that has not checked anything yet keeps them
    written = [c.written() for c in earlier]
    assert json.loads((d / "meta.json").read_text())["link"] == written
    later = LinkCheckRecord(phase="after", profile="lan", passed=True, time_ns=2)
    keeper.checked(LinkCheck("lan", "after"), later)
    meta = json.loads((d / "meta.json").read_text())
    assert meta["link"] == [*written, later.written()]
    assert list(meta) == ["campaign_id", "link", "applies", "apply_counts"]


def test_the_keeper_reads_once_and_writes_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = _dir(tmp_path, [])
    reads = []
    read = store.read_meta
    monkeypatch.setattr(store, "read_meta", lambda d: reads.append(d) or read(d))
    keeper = store.MetaKeeper.open(d)
    for label in ("netns-1", "netns-2"):
        keeper.meta.testbeds = [*keeper.meta.testbeds, label]
        keeper.save()
    keeper.meta.finished_at = "2026-12-01T00:00:00+00:00"
    keeper.save()
    assert len(reads) == 1
    assert json.loads((d / "meta.json").read_text())["testbeds"] == ["netns-1", "netns-2"]
    assert sorted(p.name for p in d.iterdir() if p.name.startswith("meta")) == ["meta.json"]


def test_every_recorded_meta_json_reads_and_writes_back_as_it_was(tmp_path: Path) -> None:
    files = sorted(DATA.glob("recorded-*/meta.json"))
    assert len(files) >= 6
    for f in files:
        keeper = store.MetaKeeper(tmp_path, store.read_meta(f.parent))
        keeper.save()
        assert (tmp_path / "meta.json").read_text() == f.read_text(), f
