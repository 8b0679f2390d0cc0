"""A toy dimension declared in one place, with the hook that applies it, then followed
through a whole campaign: plan and run ids, the loop (a fake testbed), the journal, the
InfluxDB line protocol, the summary table and the report. Prints what it found as JSON.

Run as a script (tests/unit/test_dimensions.py does): a dimension is declared before the
campaign model is built from the dimensions, as a plug-in would declare one.

    python tests/toy_dimension.py RESULTS_DIR
"""

from __future__ import annotations

import io
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

from clarke.campaign import dimensions
from clarke.campaign.dimension import Dimension, Shown


class Warmth(StrEnum):
    """The toy's vocabulary: whether something was warmed up before the load."""

    cold = "cold"
    warm = "warm"


# The one declaration.
TOY: Dimension[Warmth] = Dimension(
    name="warmth",
    key="warmth",
    item=Warmth,
    help="a toy dimension (tests/toy_dimension.py)",
    column="warmth",
    default=lambda _coordinates, _browser: Warmth.cold,
    record=lambda v: v.value,
    run_id=lambda v: f"w{v.value}",
    legend=lambda v: f", {v.value}",
    legend_shown=Shown.always,
)
dimensions.declare(TOY)

# Everything below is Clarke as it is, plus the hook that applies the toy.
from rich.console import Console  # noqa: E402

from clarke.campaign.plan import plan_file  # noqa: E402
from clarke.report import html  # noqa: E402
from clarke.results import store  # noqa: E402
from clarke.results.influx import to_line  # noqa: E402
from clarke.results.journal import Journal  # noqa: E402
from clarke.results.meta import Meta  # noqa: E402
from clarke.results.summary import summarise  # noqa: E402
from clarke.run.loop import apply  # noqa: E402
from clarke.run.loop.console import table  # noqa: E402
from clarke.run.loop.link_checks import with_link_checks  # noqa: E402
from clarke.run.loop.loop import LoopSettings, RecordContext, execute  # noqa: E402
from clarke.vocab import Engine  # noqa: E402
from helpers import FakeSession  # noqa: E402

applied: list[str] = []
apply.HOOKS[TOY.name] = lambda testbed, cell: applied.append(cell[TOY].value)

CAMPAIGN = {
    "name": "toy",
    "matrix": {
        "profiles": ["lan"],
        "http": [2],
        "cc": ["bbr"],
        "models": ["uniform"],
        "sizes": ["100k"],
        "warmth": ["cold", "warm"],
    },
    "repetitions": 2,
}


def main(out: Path) -> dict[str, Any]:
    campaign_file = out / "toy.yaml"
    campaign_file.write_text(json.dumps(CAMPAIGN))
    plan = plan_file(campaign_file)
    results = store.create(out, "toy-1", campaign_file, {"runs": []}, Meta(campaign="toy"))
    journal = Journal.in_dir(results)
    with journal:
        ctx = RecordContext("toy", "toy-1", Engine.selenium, "abc")
        execute(
            with_link_checks(plan.runs, ()), FakeSession(), journal, ctx, LoopSettings(retries=0)
        )
    records = list(Journal.in_dir(results).records())
    console = Console(file=io.StringIO(), width=300, record=True)
    console.print(table(summarise(records), "toy"))
    report = html.build(results)
    return {
        "run_ids": [r.run_id for r in plan.runs],
        "plan": [r.to_dict()["warmth"] for r in plan.runs],
        "applied": applied,
        "journal": [
            json.loads(line)["warmth"] for line in (results / "journal.jsonl").read_text().split()
        ],
        "records": [r.cell[TOY].value for r in records],
        "influx": [to_line(r) for r in records],
        "summary": console.export_text(),
        "report_labels": [label for label in ("HTTP/2, cold", "HTTP/2, warm") if label in report],
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
