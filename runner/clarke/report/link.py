"""The report's "The link as measured": one row per link check (meta.json's `link`: before
and after each profile's runs, per shard and per invocation), the figures a reader
compares with the profile (RTT median, mean, standard deviation and 99th percentile
against the expected RTT; the rate each way against the profile's), the verdict with its
reasons, and the check's raw values one click away (an HTML details element: no
script)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence

from clarke.results.meta import CheckedFigure, LinkCheckRecord

# A check's figures: the meta.json field, the check that judges it (run/linkcheck/check.py).
RTT = ("rtt p50", "rtt mean", "rtt stdev", "rtt p99")
RATES = ("forward rate", "return rate")


def _rtts(entry: LinkCheckRecord) -> tuple[float | None, ...]:
    """The figures of RTT, in its order."""
    return entry.rtt_p50_ms, entry.rtt_mean_ms, entry.rtt_stdev_ms, entry.rtt_p99_ms


def _e(v: object) -> str:
    return html.escape(str(v))


def _number(v: object, digits: int) -> str:
    """`digits` decimals, or three significant digits for a small figure (a LAN's RTT
    and its spread are fractions of a millisecond)."""
    if not isinstance(v, int | float) or isinstance(v, bool) or math.isnan(v):
        return "-"
    if 0 < abs(v) < 10 ** (2 - digits):
        return f"{v:.3g}"
    return f"{v:,.{digits}f}"


def _judged(value: str, check: CheckedFigure | None) -> str:
    """A figure as a cell, marked when its check failed (with the reason on hover)."""
    if check is None or check.verdict != "fail":
        return f'<td class="n">{value}</td>'
    reason = check.reason if check.has("reason") else ""
    return f'<td class="n failed" title="{_e(reason)}">{value} ✗</td>'


def _expected(check: CheckedFigure | None, digits: int, value: float | None = None) -> str:
    """The expected figure (`value`, else the check's) and the check's tolerance."""
    expected = value if value is not None else (check.expected if check else None)
    if expected is None:
        return "-"
    tol = check.tolerance if check else None
    around = f" ± {_number(tol, digits)}" if isinstance(tol, int | float) and tol else ""
    return _number(expected, digits) + around


def _rtt_judged(checks: dict[str, CheckedFigure]) -> CheckedFigure | None:
    """The RTT check with a tolerance: the median's (the mean's in older results)."""
    judged = [checks[n] for n in ("rtt p50", "rtt mean") if n in checks]
    return next((c for c in judged if c.tolerance is not None), None)


def verdict(entry: LinkCheckRecord) -> str:
    """passed, or failed with every failed check's reason, or the error that stopped it."""
    if entry.error:
        return f"not measured: {entry.error}"
    failed = [c for c in entry.figures().values() if c.verdict == "fail"]
    if not failed and (entry.passed if entry.has("passed") else True):
        return "passed"
    reasons = (f"{c.name} {c.reason or ''}".strip() for c in failed)
    return "failed: " + "; ".join(reasons)


def _row(entry: LinkCheckRecord, with_shard: bool) -> str:
    checks = entry.figures()
    cells = [f"<td>{_e(entry.shard or '-')}</td>"] if with_shard else []
    cells += [f"<td>{_e(v or '-')}</td>" for v in (entry.profile, entry.phase)]
    cells.append(f"<td>{_e(entry.implementation or '-')}</td>")
    rtt = _expected(_rtt_judged(checks), 1, entry.rtt_expected_ms)
    cells.append(f'<td class="n">{rtt}</td>')
    rtts = zip(_rtts(entry), RTT, strict=True)
    cells += [_judged(_number(v, 1), checks.get(name)) for v, name in rtts]
    for value, name in zip((entry.forward_mbps, entry.return_mbps), RATES, strict=True):
        cells.append(_judged(_number(value, 2), checks.get(name)))
        cells.append(f'<td class="n">{_expected(checks.get(name), 2)}</td>')
    v = verdict(entry)
    css = "" if v == "passed" else ' class="failed"'
    cells.append(f"<td{css}>{_e(v)}</td>")
    raw = json.dumps(entry.written(), indent=2, default=str)
    cells.append(f"<td><details><summary>raw</summary><pre>{_e(raw)}</pre></details></td>")
    return "<tr>" + "".join(cells) + "</tr>"


def link_table(checks: Sequence[LinkCheckRecord]) -> str:
    """The section's body for meta.json's `link` list."""
    entries = list(checks)
    if not entries:
        return "<p>The link was not measured (no link check in meta.json).</p>"
    with_shard = any(c.shard for c in entries)
    head = ["shard"] if with_shard else []
    head += ["profile", "phase", "link", "RTT expected ms", "RTT p50 ms", "mean", "sd", "p99"]
    head += ["forward Mb/s", "expected", "return Mb/s", "expected", "verdict", "raw values"]
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(_row(c, with_shard) for c in entries)
    return (
        "<p>Each check measured the link alone, before the first and after the last run "
        "of its profile: RTT from pings (the median is judged against the profile's RTT "
        "within the profile's tolerance; mean, standard deviation and 99th percentile are "
        "shown), the rate each way from iperf3 (judged against the profile's rate). A "
        "figure outside its tolerance is marked ✗ (its reason on hover); each check's raw "
        "values are under <i>raw</i>.</p>"
        f'<table class="link"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'
    )
