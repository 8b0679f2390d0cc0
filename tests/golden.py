"""What Clarke derives from a campaign and from a recorded journal, written as text so
that a change of how the matrix is declared can be shown to change none of it:
run ids and plans of every shipped campaign; per recorded journal the summary per cell,
the export, InfluxDB's line protocol, the console's summary table and the report with
its figures' texts (the SVGs' drawing is left out: matplotlib's ids differ per run).

    uv run python tests/golden.py --write   # once, from the code before such a change
    tests/unit/test_golden.py               # compares the code now with what was written
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
from pathlib import Path

from rich.console import Console

from clarke import paths
from clarke.campaign.plan import plan_file
from clarke.report import html
from clarke.results import export, store
from clarke.results.influx import campaign_points, to_line
from clarke.results.summary import summarise
from clarke.run.loop.console import print_summary

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden"
JOURNALS = ("recorded-lan", "recorded-connections", "recorded-repeats", "recorded-schedule",
            "recorded-dimensions", "recorded-connection-usage", "recorded-setup-wait")  # fmt: skip


def campaign_files() -> list[Path]:
    shipped = sorted(paths.data_dir("campaigns").glob("*.yaml"))
    return shipped + sorted(DATA.glob("recorded-*.yaml"))


def plans() -> dict[str, str]:
    """Every run of every campaign file (a shuffled plan with the seed given here), one
    file per campaign: together they passed 5 MiB in one."""
    out = {}
    for f in campaign_files():
        lines = [f"{f.name} {json.dumps(r.to_dict(), sort_keys=True)}"
                 for r in plan_file(f, seed=7).runs]  # fmt: skip
        out[f"plans/{f.stem}.jsonl"] = "\n".join(lines) + "\n"
    return out


def _svg_texts(text: str) -> str:
    """A report with each figure's drawing replaced by the texts matplotlib wrote into it
    (its comments: titles, axis labels, legend entries, tick labels)."""

    def texts(m: re.Match[str]) -> str:
        found = re.findall(r"<!-- (.*?) -->", m.group(0))
        return "<svg-texts>" + " | ".join(found) + "</svg-texts>"

    return re.sub(r"<svg.*?</svg>", texts, text, flags=re.S)


def _cell_texts(cell: object) -> list[str]:
    """A summary cell's values as text, in the dimensions' order (a tuple of text
    before the dimensions were declared once, a Cell since)."""
    texts = getattr(cell, "texts", None)
    return list(texts().values()) if texts else list(cell)  # type: ignore[call-overload]


def journal_outputs(d: Path) -> dict[str, str]:
    meta, journal = store.open_existing(d)
    records = list(journal.records())
    cells = summarise(records)
    summary = [
        {
            "cell": _cell_texts(c.cell),
            "ok": c.ok,
            "failed": c.failed,
            "metrics": {
                m: [s.n, s.mean, s.median, s.ci_low, s.ci_high] for m, s in c.metrics.items()
            },
        }
        for c in cells
    ]
    csv_buf = io.StringIO()
    columns, rows = export.rows(records)
    csv_buf.write(json.dumps(columns) + "\n")
    for row in rows:
        csv_buf.write(json.dumps(row, sort_keys=True, default=str) + "\n")
    lines = [to_line(r) for r in records]
    lines += sorted(p.to_line_protocol() for p in campaign_points(meta, records))
    console = Console(file=io.StringIO(), width=100, color_system=None)  # a terminal's width
    print_summary(cells, "summary", console)
    return {
        "summary.json": json.dumps(summary, indent=1, default=str) + "\n",
        "export.jsonl": csv_buf.getvalue(),
        "influx.txt": "\n".join(lines) + "\n",
        "console.txt": console.file.getvalue(),  # type: ignore[attr-defined]
        "report.html": _svg_texts(html.build(d)),
        "report-objects.html": _svg_texts(html.build(d, "objects")),
    }


def outputs() -> dict[str, str]:
    out = plans()
    for name in JOURNALS:
        d = DATA / name
        if d.is_dir():
            for f, text in journal_outputs(d).items():
                out[f"{name}/{f}"] = text
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    produced = outputs()
    if args.write:
        for rel, text in produced.items():
            path = GOLDEN / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        print(f"wrote {len(produced)} files under {GOLDEN}")
        return 0
    differ = [rel for rel, text in produced.items() if (GOLDEN / rel).read_text() != text]
    print("differ: " + ", ".join(differ) if differ else "all equal")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
