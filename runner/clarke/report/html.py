"""The report page: one self-contained HTML file (inline SVG, inline CSS, no scripts)."""

from __future__ import annotations

import html
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from clarke.campaign.dimensions import (
    BROWSER,
    HTTP,
    SIZE,
    Cell,
    Dimension,
    table_columns,
)
from clarke.report.connections import (
    connections_over_the_load,
    idle_time_cdf,
    load_idle_time_cdf,
    plt_ccdf,
    setup_wait_cdf,
)
from clarke.report.figures import HTTP_LABEL, Figure, _size_key, study_figures
from clarke.report.link import link_table
from clarke.report.order import completion_order
from clarke.report.sites import site_figure
from clarke.report.timeline import timeline_figures
from clarke.results import store
from clarke.results.metric_families import DEFAULT_FAMILY, DESCRIPTION, FAMILIES, LABEL
from clarke.results.record import RunRecord, Status
from clarke.results.summary import (
    FEW_LOADS,
    CellSummary,
    MetricStats,
    Sequential,
    final_attempts,
    sequential_of,
    summarise,
)
from clarke.sequential import Decision, Stop

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .6em}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4}
figure{margin:1.5em 0}figure svg{max-width:100%;height:auto}figcaption{color:#555}
pre{background:#f7f7f7;padding:1em;overflow:auto}.failed{color:#a00}
details pre{margin:.3em 0;max-width:40em;font-size:12px}.few{color:#a60}
"""


def _e(v: Any) -> str:
    return html.escape(str(v))


def _num(v: float, digits: int = 0) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f}"


def _table(
    head: list[str], rows: list[list[str]], numeric_from: int = 99, text: tuple[int, ...] = ()
) -> str:
    """Columns from `numeric_from` on are numbers, but those listed in `text`."""
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{c}</td>' if i >= numeric_from and i not in text else f"<td>{c}</td>"
            for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _figure(f: Figure) -> str:
    return (
        f'<figure class="plot" id="fig-{_e(f.key)}" data-title="{_e(f.title)}">{f.svg}'
        f"<figcaption><b>{_e(f.title)}.</b> {_e(f.caption)}</figcaption></figure>"
    )


def _overhead(records: list[RunRecord]) -> str:
    groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in records:
        if r.status is Status.ok and "overhead" in r.metrics:
            groups[(r.cell.link, r.cell[HTTP].value, r.cell[SIZE])].append(r.metrics["overhead"])
    if not groups:
        return "<p>No load in these results carries a protocol-overhead measurement.</p>"
    rows = [
        [_e(p), _e(HTTP_LABEL.get(h, h)), _e(s), str(len(v)), _num(100 * sum(v) / len(v), 1)]
        for (p, h, s), v in sorted(
            groups.items(), key=lambda kv: (kv[0][0], kv[0][1], _size_key(kv[0][2]))
        )
    ]
    return (
        "<p>Overhead = (bytes on the wire - page bytes) / page bytes, as reported by the "
        "server for the connections that carried the page (docs/metrics.md).</p>"
        + _table(["profile", "HTTP", "page size", "loads", "overhead %"], rows, 3)
    )


CONNECTION_METRICS = (
    ("connections_used", "connections", 0),
    ("max_concurrent_connections", "most at once", 0),
    ("max_concurrent_requests", "requests at once", 0),
    ("connections_idle_ms", "idle ms", 0),
    ("load_idle_ms", "load idle ms", 0),
    ("net_transfer_ms", "net transfer ms", 0),
    ("effective_concurrency", "eff. concurrency", 2),
    ("setup_wait_ms", "set-up wait ms", 0),
)


def _columns(cells: list[CellSummary]) -> list[Dimension[Any]]:
    """The dimensions a table of these cells shows: the text ones first, then the
    numeric ones (the connections per server), where numbers start."""
    return table_columns([c.cell for c in cells])


def _coordinates(cell: Cell, columns: list[Dimension[Any]]) -> list[str]:
    texts = cell.texts()
    return [_e(texts[d.name]) for d in columns]


def _text_heads(columns: list[Dimension[Any]]) -> list[str]:
    return [d.column for d in columns if not d.numeric]


def _connections(records: list[RunRecord]) -> str:
    """Per cell, the medians of the loads' connection metrics (docs/metrics.md,
    Connections); the rows per connection are in the journal and in InfluxDB."""
    cells = [c for c in summarise(records, tuple(m for m, _, _ in CONNECTION_METRICS)) if c.metrics]
    if not cells:
        return "<p>No load in these results carries per-connection rows.</p>"
    columns = _columns(summarise(records, ()))
    rows = []
    for c in cells:
        row = [*_coordinates(c.cell, columns), str(c.ok)]
        for m, _, digits in CONNECTION_METRICS:
            s = c.metrics.get(m)
            row.append(_num(s.median, digits) if s else "-")
        rows.append(row)
    # "per server": beside the connections the loads used, a column of that name.
    head = [*_text_heads(columns), *("per server" for d in columns if d.numeric), "loads"]
    head += [f"{label} (median)" for _, label, _ in CONNECTION_METRICS]
    return (
        "<p>Per cell, the medians over successful loads of: the connections that carried "
        "requests, the most open and the most requests outstanding at once, the "
        "connections' summed idle time (open, nothing in flight), the connection-usage "
        "study's [K] figures of the load: its idle time (nothing in flight on any "
        "connection before PLT), net transfer time (PLT minus that) and effective "
        "concurrency (connections in flight, averaged over the net transfer time), and the "
        "parallel-connections study's [C] set-up wait (the idle time in which a connection "
        "was being set up; '-': recorded before it). One row "
        "per connection is in the journal (details.per_connection) and InfluxDB "
        "(`connection`); "
        "docs/metrics.md defines each.</p>" + _table(head, rows, len(_text_heads(columns)))
    )


def _ci(s: MetricStats) -> str:
    if math.isnan(s.ci_low):
        return "-"
    text = f"{_num(s.ci_low)} to {_num(s.ci_high)}"
    if s.few:
        why = f"{s.n} loads: Student's t over fewer than {FEW_LOADS} is wide and rests on normality"
        return f'<span class="few" title="{_e(why)}">{text} (n={s.n})</span>'
    return text


def _stop(d: Decision) -> list[str]:
    """A sequential cell's loads, why it stopped and its interval for the median."""
    i = d.interval
    why = {Stop.precise: "precise enough", Stop.exhausted: f"all {d.tried} runs"}
    interval = f"{_num(i.low)} to {_num(i.high)}" if i.bounded else "not yet"
    half = f"{100 * i.relative_half_width:.1f} %" if i.bounded else "-"
    return [str(i.n), _e(why.get(d.stop, "not finished")), _num(i.median), interval, half]


def _summary_table(
    cells: list[CellSummary], metrics: tuple[str, ...], sequential: Sequential | None
) -> str:
    """The full summary: one column per dimension; per metric mean, median and the 95 %
    CI of the mean (marked under FEW_LOADS loads); with sequential repetitions, each
    cell's loads, why it stopped and its interval for the median."""
    columns = _columns(cells)
    rows = []
    for c in cells:
        row = [*_coordinates(c.cell, columns), str(c.ok), str(c.failed)]
        if sequential:
            row += _stop(c.stop) if c.stop is not None else ["-"] * 5
        for m in metrics:
            s = c.metrics.get(m)
            row += [_num(s.mean), _num(s.median), _ci(s)] if s else ["-"] * 3
        rows.append(row)
    head = [*(d.column for d in columns), "ok", "failed"]
    numbers_from = len(_text_heads(columns))
    text: tuple[int, ...] = ()
    if sequential:
        rule = sequential.rule
        name = LABEL.get(rule.metric, rule.metric)
        head += ["loads", "stopped", f"{name} median", f"{rule.confidence:.0%} interval", "±"]
        text = (len(head) - 4,)
    for m in metrics:
        head += [f"{LABEL[m]} mean ms", "median", "95 % CI"]
    out = _table(head, rows, numbers_from, text)
    if sequential:
        out = (
            "<p>Sequential repetitions: each cell took loads until the interval for its "
            "median (which holds however the loads were stopped; docs/campaigns.md) was "
            "within the campaign's half-width of it, or until its last planned run. "
            "<i>loads</i> are its successful loads, <i>±</i> how far the interval reaches "
            "from the median.</p>" + out
        )
    return out


def build(results_dir: Path, family: str = DEFAULT_FAMILY) -> str:
    """The report of `results_dir`, its paint-like figures and columns drawn with the
    metric family `family` (clarke.results.metric_families)."""
    metrics = FAMILIES[family]
    meta, journal = store.open_existing(results_dir)
    records = list(journal.records())
    final = list(final_attempts(records).values())
    sequential = sequential_of(results_dir)
    cells = summarise(records, metrics, sequential)
    extra = [
        f
        for f in (
            site_figure(cells, final, family),
            completion_order(final),
            idle_time_cdf(final),
            load_idle_time_cdf(final),
            setup_wait_cdf(final),
            plt_ccdf(final),
            connections_over_the_load(final),
        )
        if f
    ]
    figures = study_figures(cells, family) + timeline_figures(final) + extra
    campaign_text = (
        (results_dir / store.CAMPAIGN_COPY).read_text()
        if (results_dir / store.CAMPAIGN_COPY).is_file()
        else ""
    )
    ok = sum(r.status is Status.ok for r in final)
    cid = _e(meta.campaign_id if meta.has("campaign_id") else results_dir.name)
    rev = _e(meta.git_rev if meta.has("git_rev") else "unknown")
    started = _e(meta.started_at if meta.has("started_at") else "?")
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>Clarke report: {cid}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Clarke report: {cid}</h1>",
        f"<p>{len(final)} runs ({ok} ok, {len(final) - ok} failed) in {len(records)} attempts; "
        f"Clarke revision {rev}; started {started}.</p>",
        f'<p id="metric-family">Metrics: <b>{_e(family)}</b>, {_e(DESCRIPTION[family])} '
        "(docs/metrics.md).</p>",
        "<h2>Figures</h2>",
        "".join(_figure(f) for f in figures)
        or "<p>No cell has the data for the study's figures.</p>",
        "<h2>Summary per cell</h2>",
    ]
    parts.append(_summary_table(cells, metrics, sequential))
    parts += ["<h2>Protocol overhead</h2>", _overhead(final)]
    parts += ["<h2>Connections</h2>", _connections(records)]
    parts += ["<h2>The link as measured</h2>", link_table(meta.link)]
    versions: dict[str, set[str]] = defaultdict(set)
    for r in records:
        for k, v in {
            **r.versions,
            **{f"implementation of {a}": b for a, b in r.implementations.items()},
            "browser": f"{r.cell[BROWSER]} {r.browser_version}",
            "engine": r.engine,
        }.items():
            versions[k].add(v)
    parts += [
        "<h2>Software</h2>",
        _table(
            ["part", "version"],
            [[_e(k), _e(", ".join(sorted(v)))] for k, v in sorted(versions.items())],
        ),
    ]
    failed = [r for r in records if r.status is Status.failed]
    parts.append(f"<h2>Failed attempts ({len(failed)})</h2>")
    parts.append(
        _table(
            ["run", "attempt", "reason"],
            [
                [_e(r.run_id), str(r.attempt), f'<span class="failed">{_e(r.reason)}</span>']
                for r in failed
            ],
        )
        if failed
        else "<p>None.</p>"
    )
    parts += ["<h2>Campaign parameters</h2>", f"<pre>{_e(campaign_text)}</pre>", "</body></html>"]
    return "\n".join(parts)
