"""A campaign's sequential repetitions as the file gives them: percent or share forms,
the plan holding max runs per cell, the sentence `clarke campaign plan` prints, and
errors that name the field (never pydantic's branch names) and refuse a max too small
for any interval that holds under optional stopping."""

from __future__ import annotations

from pathlib import Path

import pytest

from clarke.campaign.model import SequentialRepetitions
from clarke.campaign.plan import plan_file
from clarke.errors import ValidationFailed

HEAD = (
    "name: s\nmatrix: {profiles: [geo], http: [2, 3], cc: [bbr], models: [uniform], sizes: [1m]}\n"
)


def _plan(tmp_path: Path, repetitions: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(HEAD + f"repetitions: {repetitions}\n")
    return plan_file(f)


def test_the_forms_and_the_plan(tmp_path: Path) -> None:
    p = _plan(tmp_path, "{max: 30, until: {metric: lcp, half_width: 2%, confidence: 90 %}}")
    r = p.campaign.repetitions
    assert isinstance(r, SequentialRepetitions)
    assert (r.min, r.max, r.until.half_width, r.until.confidence) == (3, 30, 0.02, 0.9)
    rule = p.campaign.stopping
    assert rule is not None and rule.metric == "lcp_ms" and rule.maximum == 30
    assert len(p.runs) == 60 and p.campaign.planned_repetitions == 30
    assert max(run.repetition for run in p.runs) == 30
    assert "within ±2 % of it" in r.describe() and "90%" in r.describe()
    (tmp_path / "f").mkdir()
    fixed = _plan(tmp_path / "f", "5")
    assert fixed.campaign.stopping is None and len(fixed.runs) == 10
    share = SequentialRepetitions.model_validate({"max": 30, "until": {"half_width": 0.05}})
    assert share.until.half_width == 0.05 and share.until.metric.value == "plt"


@pytest.mark.parametrize(
    ("repetitions", "message"),
    [
        ("{max: 30}", "repetitions.until: required field is missing"),
        ("{max: 30, until: {metric: ttfb, half_width: 2%}}", "repetitions.until.metric:"),
        ("{max: 30, until: {half_width: 200%}}", "repetitions.until.half_width:"),
        ("{min: 40, max: 30, until: {half_width: 2%}}", "min 40 is more than max 30"),
        ("{max: 5, until: {half_width: 2%}}", "with 30 the first interval is at 7 loads"),
        ("0", "repetitions: Input should be greater than or equal to 1"),
    ],
)
def test_errors_name_the_field(tmp_path: Path, repetitions: str, message: str) -> None:
    with pytest.raises(ValidationFailed) as e:
        _plan(tmp_path, repetitions)
    assert message in str(e.value) and "form:" not in str(e.value)
