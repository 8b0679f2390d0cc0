"""The cross-implementation table (`clarke report --by implementation TOP`): one campaign
run on several combinations of link and server (clarke.run.implementations.several), cell by
cell. For each combination: the median PLT, FCP and LCP of its successful loads, and the
ratio of that median to the baseline's (satlink + origin) with a 95 % bootstrap CI.
Beside it, what explains a difference: the link as each combination's link checks
measured it, and per cell the medians of the loads' own evidence (time to first byte,
connection set-up, TLS, bytes on the wire, retransmissions)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from statistics import median

import numpy as np

from clarke.campaign.dimensions import Cell
from clarke.errors import InputError
from clarke.results import store
from clarke.results.meta import LinkCheckRecord
from clarke.results.record import RunRecord, Status
from clarke.results.station_records import LinkRoleStats
from clarke.results.summary import METRICS, final_attempts
from clarke.run.compare.cells import MIN_SAMPLES, cell_samples, median_ratio_ci
from clarke.run.implementations.several import BASELINE, Combination, read_index

# The loads' own evidence, per cell: medians of these record metrics.
EVIDENCE = (
    "ttfb_ms",
    "after_ttfb_ms",  # PLT - TTFB: the page's transfer once the first byte came
    "connect_ms",
    "tls_ms",
    "connections_used",
    "wire_bytes",
    "overhead",
    "retrans_bytes",
    "quic_retries",  # Retry packets, from the server's records where it reports them
    "link_forward_drops",  # packets the link lost towards the client (its own counters)
)
METRIC_LABEL = {"plt_ms": "PLT", "fcp_ms": "FCP", "lcp_ms": "LCP"}


@dataclass(frozen=True)
class Entry:
    """One combination's figure for one cell and metric."""

    n: int
    median_ms: float
    ratio: float | None = None  # to the baseline; None without a baseline
    ratio_ci: tuple[float, float] | None = None


@dataclass(frozen=True)
class Table:
    campaign: str
    top: Path
    combinations: list[Combination]
    baseline: str | None  # its label, None when the baseline did not run
    cells: list[Cell]
    entries: dict[tuple[Cell, str, str], Entry]  # (cell, metric, label)
    evidence: dict[tuple[Cell, str], dict[str, float]]  # (cell, label)
    links: dict[str, list[LinkCheckRecord]]  # label -> its link checks

    @property
    def ran(self) -> list[Combination]:
        return [c for c in self.combinations if c.results]


def build(top: Path) -> Table:
    index = read_index(top)
    records: dict[str, list[RunRecord]] = {}
    links: dict[str, list[LinkCheckRecord]] = {}
    for combo in index.combinations:
        if combo.results:
            d = top / combo.results
            if not d.is_dir():
                raise InputError(f"{top}: {combo.label}: its results {d} are missing")
            meta, journal = store.open_existing(d)
            records[combo.label] = list(journal.records())
            links[combo.label] = meta.measured_links()
    if not records:
        raise InputError(
            f"{top}: no combination has results ("
            + "; ".join(f"{c.label}: {c.state.value}" for c in index.combinations)
            + ")"
        )
    samples = {label: cell_samples(recs) for label, recs in records.items()}
    baseline = f"{BASELINE[0]} + {BASELINE[1]}"
    base = samples.get(baseline)
    cells = sorted({cell for per in samples.values() for cell in per})
    entries: dict[tuple[Cell, str, str], Entry] = {}
    for cell in cells:
        for metric in METRICS:
            a = np.asarray(base[cell][metric]) if base and cell in base else np.asarray([])
            for label, per in samples.items():
                values = np.asarray(per.get(cell, {}).get(metric, []))
                if len(values) == 0:
                    continue
                ratio, ci = None, None
                if len(a) >= MIN_SAMPLES and len(values) >= MIN_SAMPLES:
                    ratio = float(np.median(values) / np.median(a))
                    ci = median_ratio_ci(a, values) if label != baseline else (1.0, 1.0)
                entries[(cell, metric, label)] = Entry(
                    len(values), float(np.median(values)), ratio, ci
                )
    return Table(
        index.campaign,
        top,
        index.combinations,
        baseline if base is not None else None,
        cells,
        entries,
        _evidence(records),
        links,
    )


def _evidence(
    records: dict[str, list[RunRecord]],
) -> dict[tuple[Cell, str], dict[str, float]]:
    out: dict[tuple[Cell, str], dict[str, list[float]]] = {}
    for label, recs in records.items():
        for r in final_attempts(recs).values():
            if r.status is not Status.ok:
                continue
            per = out.setdefault((r.cell, label), {})
            for key in EVIDENCE:
                if key in r.metrics and not math.isnan(r.metrics[key]):
                    per.setdefault(key, []).append(r.metrics[key])
            for key, value in (
                ("quic_retries", _quic_retries(r)),
                ("after_ttfb_ms", _after_ttfb(r)),
                ("link_forward_drops", forward_drops(r.details.link_stats)),
            ):
                if value is not None:
                    per.setdefault(key, []).append(value)
    return {k: {m: median(v) for m, v in per.items()} for k, per in out.items()}


def _after_ttfb(r: RunRecord) -> float | None:
    plt, ttfb = r.metrics.get("plt_ms"), r.metrics.get("ttfb_ms")
    return None if plt is None or ttfb is None else plt - ttfb


def _quic_retries(r: RunRecord) -> float | None:
    """Retry packets the server sent for this load's QUIC connections, where its records
    count them (OpenLiteSpeed: lsquic's log); None where they do not."""
    counts = [
        c.transport.quic.retries
        for c in r.details.server_connections
        if c.transport and c.transport.quic and c.transport.quic.retries is not None
    ]
    return float(sum(counts)) if counts else None


def forward_drops(link_stats: Mapping[str, LinkRoleStats]) -> float | None:
    """Packets the link lost towards the client during one load, from the link roles'
    own counters (a load's `link_stats`): satlink counts its drops by cause in each role;
    OpenSAND's are what the gateway's TAP handed it minus what the terminal's TAP got
    (docs/opensand.md, "Counters": the channel is clear sky and the delay constant, so
    after a load nothing is in flight). None for a link that reports neither."""
    roles = list(link_stats.values())
    drops = [v.forward.drops for v in roles if v.forward is not None]
    if roles and len(drops) == len(roles) and all(d is not None for d in drops):
        return float(sum(sum(d.values()) for d in drops if d is not None))
    gw, st = link_stats.get("gateway"), link_stats.get("terminal")
    if gw is not None and st is not None and gw.tap is not None and st.tap is not None:
        return float(gw.tap["tx_packets"] - st.tap["rx_packets"])
    return None


def _ratio_text(e: Entry | None) -> str:
    if e is None:
        return "-"
    if e.ratio is None or e.ratio_ci is None:
        return f"{e.median_ms:,.0f} (n={e.n})"
    lo, hi = e.ratio_ci
    ci = "" if math.isnan(lo) else f" [{lo:.2f}, {hi:.2f}]"
    return f"{e.median_ms:,.0f} (n={e.n}) x{e.ratio:.2f}{ci}"


def rows(t: Table) -> tuple[list[str], list[list[str]]]:
    """The table as a header and rows of text: a row per cell and metric, a column per
    combination that ran."""
    head = ["cell", "metric"] + [c.label for c in t.ran]
    out = []
    for cell in t.cells:
        for metric in METRICS:
            out.append(
                [cell.path, METRIC_LABEL[metric]]
                + [_ratio_text(t.entries.get((cell, metric, c.label))) for c in t.ran]
            )
    return head, out


def _link_text(checks: list[LinkCheckRecord]) -> str:
    if not checks:
        return "no link check"

    def figure(k: LinkCheckRecord, key: str, digits: int) -> str:
        # None or absent: not measured (the quick check leaves an unlimited rate out).
        value = getattr(k, key) if k.has(key) else None
        return "-" if value is None else f"{value:.{digits}f}"

    parts = []
    for k in checks:
        parts.append(
            f"{k.profile} {k.phase}: RTT p50 {figure(k, 'rtt_p50_ms', 1)} ms, "
            f"forward {figure(k, 'forward_mbps', 2)} Mb/s, "
            f"return {figure(k, 'return_mbps', 2)} Mb/s"
            + ("" if (k.passed if k.has("passed") else True) else " (FAILED)")
        )
    return "; ".join(parts)


def markdown(t: Table) -> str:
    head, body = rows(t)
    lines = [
        f"### {t.campaign}: by implementation",
        "",
        "Each entry: median in ms over the successful loads (n), then its ratio to "
        + (
            f"{t.baseline} with a 95 % bootstrap CI."
            if t.baseline
            else "the baseline: none, satlink + origin did not run."
        ),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * 2 + "---:|" * (len(head) - 2),
        *("| " + " | ".join(r) + " |" for r in body),
        "",
        "Combinations:",
        "",
    ]
    for c in t.combinations:
        state = c.state.value
        if c.reason:
            state += f" ({c.reason})"
        lines.append(
            f"- {c.label}: {state}; {c.runs_ok}/{c.runs} runs with a successful load"
            + (f"; link {_link_text(t.links.get(c.label, []))}" if c.results else "")
        )
    lines += ["", "Evidence per cell (medians of the successful loads):", ""]
    lines.append("| cell | combination | " + " | ".join(EVIDENCE) + " |")
    lines.append("|---|---|" + "---:|" * len(EVIDENCE))
    for cell in t.cells:
        for c in t.ran:
            ev = t.evidence.get((cell, c.label))
            if ev is None:
                continue
            lines.append(
                f"| {cell.path} | {c.label} | "
                + " | ".join(_evidence_text(k, ev.get(k)) for k in EVIDENCE)
                + " |"
            )
    return "\n".join(lines) + "\n"


def _evidence_text(key: str, v: float | None) -> str:
    if v is None:
        return "-"
    if key == "overhead":
        return f"{100 * v:.1f} %"
    return f"{v:,.0f}"
