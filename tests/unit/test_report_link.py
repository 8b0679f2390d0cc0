"""The report as a researcher reads it: "The link as measured" is a table, one row per
link check (phase, RTT p50/mean/sd/p99 against the expected RTT, the rate each way
against the profile's, the verdict), with each check's raw values one click away; the
terminal summary fits a 100-column terminal while the report keeps the full table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from clarke.report import html
from clarke.report.link import link_table, verdict
from clarke.results import store
from clarke.results.meta import LinkCheckRecord
from clarke.results.summary import summarise
from clarke.run.loop.console import SUMMARY_WIDTH, table

DATA = Path(__file__).resolve().parents[1] / "data"


def _rows(section: str) -> list[str]:
    body = section[section.index("<tbody>") : section.index("</tbody>")]
    return re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)


def _section(page: str) -> str:
    start = page.index("<h2>The link as measured</h2>")
    return page[start : page.index("<h2>", start + 5)]


def test_the_recorded_checks_are_a_table_with_their_raw_values_folded() -> None:
    page = html.build(DATA / "recorded-lan")
    section = _section(page)
    checks = json.loads((DATA / "recorded-lan" / store.META).read_text())["link"]
    rows = _rows(section)
    assert len(rows) == len(checks)
    # No JSON dump outside a <details>: every <pre> is folded.
    assert section.count("<pre>") == section.count("<details>") == len(checks)
    before, after = rows[0], rows[1]
    assert "<td>before</td>" in before and "<td>after</td>" in after
    # p50, mean, sd, p99 as measured (ms), against the expected RTT and its tolerance.
    assert re.search(r'1 ± 0.5</td><td class="n">1.15</td><td class="n">1.16</td>', before)
    assert "passed" in before
    # The after check's mean was off: marked, with its reason on hover and in the verdict.
    assert 'class="n failed" title="off by +1.59 ms">2.59 ✗' in after
    assert "failed: rtt mean off by +1.59 ms" in after


def test_rates_shards_and_a_check_that_could_not_run() -> None:
    judged = {
        "phase": "before", "profile": "geo", "backend": "satlink", "shard": "1/2",
        "passed": False, "rtt_p50_ms": 601.2, "rtt_mean_ms": 603.0, "rtt_stdev_ms": 4.1,
        "rtt_p99_ms": 640.5, "rtt_expected_ms": 600.0, "forward_mbps": 31.2,
        "return_mbps": 2.41,
        "checks": [
            {"name": "rtt p50", "expected": 600.0, "tolerance": 30.0, "verdict": "ok"},
            {"name": "forward rate", "expected": 50.0, "tolerance": 5.0, "verdict": "fail",
             "reason": "31.2 Mb/s, expected 50 ± 5"},
            {"name": "return rate", "expected": 2.5, "tolerance": 0.25, "verdict": "ok"},
        ],
    }  # fmt: skip
    broken = {"phase": "after", "profile": "geo", "shard": "2/2", "error": "iperf3: timeout"}
    checks = [LinkCheckRecord.model_validate(c) for c in (judged, broken)]
    section = link_table(checks)
    assert "<th>shard</th>" in section
    first, second = _rows(section)
    assert '600.0 ± 30.0</td><td class="n">601.2</td>' in first
    assert '31.20 ✗</td><td class="n">50.00 ± 5.00</td>' in first
    assert '2.41</td><td class="n">2.50 ± 0.25</td>' in first
    assert verdict(checks[0]) == "failed: forward rate 31.2 Mb/s, expected 50 ± 5"
    assert "not measured: iperf3: timeout" in second
    assert "<script>" not in link_table([LinkCheckRecord(profile="<script>")])
    assert "not measured" in link_table([])


@pytest.mark.parametrize(
    "recorded", ["recorded-lan", "recorded-dimensions", "recorded-connections"]
)
def test_the_terminal_summary_fits_a_100_column_terminal(recorded: str) -> None:
    """Drawn on a wide console so that nothing is wrapped to fit: its own width counts."""
    records = list(store.open_existing(DATA / recorded)[1].records())
    console = Console(width=400, record=True)
    console.print(table(summarise(records), "title"))
    lines = console.export_text().splitlines()
    # The note under the blocks and the line of what every cell shares are prose
    # (wrapped by the terminal); the tables must fit.
    prose = ("* fewer", "every cell:")
    widest = max(len(line.rstrip()) for line in lines if not line.startswith(prose))
    assert widest <= SUMMARY_WIDTH == 100
    # The report keeps the full table: one column per dimension that varies or is required.
    page = html.build(DATA / recorded)
    summary = page[page.index("<h2>Summary per cell</h2>") :]
    head = summary[: summary.index("</tr>")]
    assert "<th>profile</th>" in head and head.count("95 % CI</th>") == 3
