"""The per-cell points InfluxDB receives say what the summary and the report say: an
interval over too few loads is marked, and a cell of sequential repetitions says how it
stopped, with its interval for the median."""

from __future__ import annotations

from clarke.results.influx import cell_summary_points
from clarke.results.summary import Sequential
from clarke.sequential import StoppingRule
from helpers import record


def _fields(line: str) -> dict[str, str]:
    fields = line.split(" ")[1]
    return dict(kv.split("=", 1) for kv in fields.split(","))


def _plt(lines: list[str]) -> dict[str, str]:
    (line,) = [x for x in lines if ",metric=plt_ms," in x]
    return _fields(line)


def test_few_loads_are_marked() -> None:
    two = [record(i) for i in range(2)]
    five = [record(i) for i in range(5)]
    few = _plt([p.to_line_protocol() for p in cell_summary_points(two, 0)])
    enough = _plt([p.to_line_protocol() for p in cell_summary_points(five, 0)])
    assert few["few"] == "true" and enough["few"] == "false"
    assert float(few["ci_low"]) >= 0.0  # cut at zero, as in the summary
    assert "stop" not in enough  # fixed repetitions: no stopping fields


def test_a_sequential_cell_says_how_it_stopped() -> None:
    records = [record(i) for i in range(10)]  # plt 100..109 ms
    cell = records[0].cell
    precise = Sequential(StoppingRule("plt_ms", 0.10, 3, 30), {cell: 30})
    fields = _plt(
        [p.to_line_protocol() for p in cell_summary_points(records, 0, sequential=precise)]
    )
    assert fields["stop"] == '"precise"' and fields["stop_metric"] == '"plt_ms"'
    assert (fields["stop_loads"], fields["stop_runs"]) == ("10i", "10i")
    low, median, high = (float(fields[k]) for k in ("stop_low", "stop_median", "stop_high"))
    assert low < median < high and float(fields["stop_half_width"]) <= 0.10

    narrow = Sequential(StoppingRule("plt_ms", 0.001, 3, 30), {cell: 30})
    fields = _plt(
        [p.to_line_protocol() for p in cell_summary_points(records, 0, sequential=narrow)]
    )
    assert fields["stop"] == '"open"'  # 20 runs to come, and too wide for 0.1 %

    exhausted = Sequential(StoppingRule("plt_ms", 0.001, 3, 30), {cell: 10})
    fields = _plt(
        [p.to_line_protocol() for p in cell_summary_points(records, 0, sequential=exhausted)]
    )
    assert fields["stop"] == '"max"'
