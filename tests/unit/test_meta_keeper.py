"""meta.json across invocations: a resume appends its link checks and applies to the
earlier ones and never erases them."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from clarke.results import store
from clarke.run.campaign.run import MetaKeeper
from clarke.run.campaign.schedule import LinkCheck


def _dir(tmp_path: Path, earlier: list[dict[str, Any]]) -> Path:
    campaign = Path("campaigns/smoke.yaml")
    return store.create(tmp_path, "c", campaign, {"runs": []}, {"link": earlier, "applies": []})


def test_a_resume_appends_its_link_checks_to_the_earlier_ones(tmp_path: Path) -> None:
    earlier = [{"phase": "before", "profile": "lan", "passed": True, "time_ns": 1}]
    d = _dir(tmp_path, earlier)
    session = SimpleNamespace(applied=[])
    keeper = MetaKeeper(d, session)  # type: ignore[arg-type]
    keeper.save()  # a resume that has not checked anything yet keeps them
    assert json.loads((d / "meta.json").read_text())["link"] == earlier
    later = {"phase": "after", "profile": "lan", "passed": True, "time_ns": 2}
    keeper.checked(LinkCheck("lan", "after"), later)
    meta = json.loads((d / "meta.json").read_text())
    assert meta["link"] == [*earlier, later]
