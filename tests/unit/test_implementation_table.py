"""The cross-implementation table (clarke report --by implementation) on a recorded
campaign (tests/data/recorded-repeats: two cells, 20 loads each): the baseline's ratio
to itself is 1, a slowdown injected into one cell of another combination is measured in
that cell only, and a combination that did not run is listed with its reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clarke.campaign.dimensions import HTTP
from clarke.errors import InputError
from clarke.results.journal import Journal
from clarke.run.implementations.several import Combination, Index, State
from clarke.run.implementations.table import build, forward_drops, markdown
from helpers import link_stats

RECORDED = Path("tests/data/recorded-repeats")


def _top(tmp_path: Path, factor: float) -> Path:
    top = tmp_path / "impl-t"
    top.mkdir()
    shutil.copytree(RECORDED, top / "base")
    slow = top / "slow"
    slow.mkdir()
    for name in ("campaign.yaml", "meta.json", "plan.json"):
        shutil.copy(RECORDED / name, slow / name)
    lines = []
    for r in Journal.in_dir(RECORDED).records():
        if r.cell[HTTP] == "2" and "plt_ms" in r.metrics:
            r = r.model_copy(
                update={"metrics": {**r.metrics, "plt_ms": r.metrics["plt_ms"] * factor}}
            )
        lines.append(r.model_dump_json())
    (slow / "journal.jsonl").write_text("\n".join(lines) + "\n")
    done = {"state": State.complete, "runs": 40, "runs_ok": 40}
    combos = [
        Combination(link="satlink", server="origin", results="base", **done),
        Combination(link="satlink", server="openlitespeed", results="slow", **done),
        Combination(
            link="opensand", server="origin", state=State.not_installed,
            reason="OpenSAND is not installed (...)",
        ),
    ]  # fmt: skip
    index = Index(
        campaign="recorded-repeats", campaign_id="impl-t", started_at="-", combinations=combos
    )
    (top / "implementations.json").write_text(index.model_dump_json())
    return top


def test_ratios_to_the_baseline(tmp_path: Path) -> None:
    t = build(_top(tmp_path, 1.5))
    assert t.baseline == "satlink + origin"
    assert [c.label for c in t.ran] == ["satlink + origin", "satlink + openlitespeed"]
    for cell in t.cells:
        base = t.entries[(cell, "plt_ms", "satlink + origin")]
        other = t.entries[(cell, "plt_ms", "satlink + openlitespeed")]
        assert (base.ratio, base.ratio_ci) == (1.0, (1.0, 1.0))
        assert other.n == base.n == 20
        assert other.ratio is not None and other.ratio_ci is not None
        lo, hi = other.ratio_ci
        if cell[HTTP] == "2":  # slowed by 1.5: measured so, and 1 is outside the interval
            assert other.ratio == pytest.approx(1.5) and 1.0 < lo <= 1.5 <= hi
        else:
            assert other.ratio == 1.0 and lo <= 1.0 <= hi
        fcp = t.entries[(cell, "fcp_ms", "satlink + openlitespeed")]
        assert fcp.ratio == 1.0  # only PLT was changed
    md = markdown(t)
    assert "| cell | metric | satlink + origin | satlink + openlitespeed |" in md
    assert "- opensand + origin: not installed (OpenSAND is not installed (...))" in md
    assert md.count(" | PLT | ") == 2 and " x1.50 [" in md


def test_no_baseline_no_ratio_and_missing_results(tmp_path: Path) -> None:
    top = _top(tmp_path, 1.5)
    index = json.loads((top / "implementations.json").read_text())
    index["combinations"][0]["state"], index["combinations"][0]["results"] = "not installed", None
    (top / "implementations.json").write_text(json.dumps(index))
    t = build(top)
    assert t.baseline is None
    assert all(e.ratio is None for e in t.entries.values())
    assert "none, satlink + origin did not run" in markdown(t)
    shutil.rmtree(top / "slow")
    with pytest.raises(InputError, match=r"its results .* are missing"):
        build(top)


def test_forward_drops_from_each_links_counters() -> None:
    # satlink: drops by cause in each role (a recorded load: none)
    (r, *_) = list(Journal.in_dir(RECORDED).records())
    assert forward_drops(r.details.link_stats) == 0.0
    lossy = {role: s.written() for role, s in r.details.link_stats.items()}
    lossy["gateway"]["forward"]["drops"]["queue_full"] = 7
    assert forward_drops(link_stats(lossy)) == 7.0
    # OpenSAND: the gateway TAP's tx minus the terminal TAP's rx (a 2 MB load here, whose
    # server counted 237 retransmitted segments)
    opensand = {
        "gateway": {"tap": {"rx_packets": 1151, "tx_packets": 1651}},
        "terminal": {"tap": {"rx_packets": 1414, "tx_packets": 1151}},
        "satellite": {"emu": {"rx_packets": 1162}},
    }
    assert forward_drops(link_stats(opensand)) == 237.0
    assert forward_drops({}) is None


def test_every_cell_has_its_evidence_per_combination(tmp_path: Path) -> None:
    """The loads' own evidence is found under the cells the table lists (it was keyed by
    an integer connection count while the cells had text, and never found)."""
    t = build(_top(tmp_path, 1.5))
    for cell in t.cells:
        for c in t.ran:
            evidence = t.evidence.get((cell, c.label))
            assert evidence and evidence["ttfb_ms"] > 0, (cell, c.label)
