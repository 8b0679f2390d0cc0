"""Writes Clarke's Grafana dashboards (json/*.json) from the panel list below, so that
every panel follows the same conventions: one datasource uid, raw InfluxQL, unique ids.
Run `uv run python dashboards/generate.py` after changing a panel; a test checks that
the committed JSON is what this script writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clarke.campaign import dimensions
from clarke.results.influx import BROWSER_SETTINGS, CONNECTION_FIELDS

DATASOURCE = {"type": "influxdb", "uid": "clarke-influxdb"}
SCHEMA_VERSION = 39
HERE = Path(__file__).resolve().parent
# A cell's tags: every declared dimension's (campaign/dimensions.py), the page standing
# for a generated page's model and size. Panels group by all of them, so that cells that
# differ in any dimension (the PEP, the scheduler, the cross traffic ...) stay apart.
CELL_TAGS = [
    "page" if d is dimensions.MODEL else d.name
    for d in dimensions.seal()
    if d is not dimensions.SIZE
]
CELL = ", ".join(f'"{tag}"' for tag in CELL_TAGS)
# The browser's settings, the same for every load of a campaign: shown beside each load.
SETTINGS = ", ".join(f'"{tag}"' for tag in BROWSER_SETTINGS)
ONE_CAMPAIGN = '"campaign_id" =~ /^$campaign$/'
# A recorded site's loads (docs/sites.md): a site tag other than none (the generated
# pages); records from before sites have no such tag and are left out.
SITES = '"site" =~ /./ AND "site" !~ /^none$/'
# Loads of one browser, or of all (records without a browser tag match "All" too).
CAMPAIGN = ONE_CAMPAIGN + ' AND "browser" =~ /^$browser$/'


def query_var(name: str, label: str, query: str, *, include_all: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": query,
        "definition": query,
        "refresh": 2,
        "sort": 2,
        "multi": False,
        "includeAll": include_all,
        "allValue": ".*" if include_all else None,
        "current": {},
        "options": [],
        "hide": 0,
    }


def custom_var(name: str, label: str, values: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "custom",
        "query": ",".join(values),
        "current": {"text": values[0], "value": values[0], "selected": True},
        "options": [{"text": v, "value": v, "selected": i == 0} for i, v in enumerate(values)],
        "multi": False,
        "includeAll": False,
        "hide": 0,
    }


CAMPAIGN_VAR = query_var(
    "campaign", "campaign", 'SHOW TAG VALUES FROM "page_load" WITH KEY = "campaign_id"'
)
METRIC_VAR = custom_var("metric", "metric", ["plt_ms", "fcp_ms", "lcp_ms"])
BROWSER_VAR = query_var(
    "browser",
    "browser",
    'SHOW TAG VALUES FROM "page_load" WITH KEY = "browser" WHERE "campaign_id" =~ /^$campaign$/',
    include_all=True,
)


def panel(  # noqa: PLR0913 (keyword-only: the Grafana panel fields a caller may set)
    kind: str,
    title: str,
    query: str,
    *,
    w: int = 24,
    h: int = 9,
    unit: str = "ms",
    fmt: str = "table",
    overrides: list[dict[str, Any]] | None = None,
    options: dict[str, Any] | None = None,
    description: str = "",
) -> dict[str, Any]:
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"w": w, "h": h},
        "targets": [
            {
                "refId": "A",
                "datasource": DATASOURCE,
                "rawQuery": True,
                "resultFormat": fmt,
                "query": query,
            }
        ],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": overrides or []},
        "options": options or {},
    }


def by_name(field: str, unit: str) -> dict[str, Any]:
    """One column's unit, where a table mixes units."""
    return {
        "matcher": {"id": "byName", "options": field},
        "properties": [{"id": "unit", "value": unit}],
    }


def band(low: str, high: str) -> list[dict[str, Any]]:
    """Shade between two series (a confidence interval), drawn as a band."""
    return [
        {
            "matcher": {"id": "byRegexp", "options": f".*{high}.*"},
            "properties": [
                {"id": "custom.fillBelowTo", "value": low},
                {"id": "custom.lineWidth", "value": 0},
            ],
        },
        {
            "matcher": {"id": "byRegexp", "options": f".*{low}.*"},
            "properties": [{"id": "custom.lineWidth", "value": 0}],
        },
    ]


def dashboard(
    uid: str,
    title: str,
    description: str,
    variables: list[dict[str, Any]],
    panels: list[dict[str, Any]],
    time_from: str = "now-7d",
) -> dict[str, Any]:
    x = y = 0
    row_h = 0
    for i, p in enumerate(panels, start=1):
        p["id"] = i
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if x + w > 24:
            x, y, row_h = 0, y + row_h, 0
        p["gridPos"].update({"x": x, "y": y})
        x += w
        row_h = max(row_h, h)
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["clarke"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": False,
        "timezone": "utc",
        "time": {"from": time_from, "to": "now"},
        "refresh": "",
        "templating": {"list": variables},
        "annotations": {"list": []},
        "panels": panels,
    }


def overview() -> dict[str, Any]:
    summary = (
        f'SELECT last("mean") AS "mean", last("ci_low") AS "ci_low", last("ci_high") AS "ci_high", '
        f'last("median") AS "median", last("n") AS "n" FROM "cell_summary" '
        f'WHERE {CAMPAIGN} AND "metric" =~ /^$metric$/ GROUP BY {CELL}'
    )
    return dashboard(
        "clarke-campaign",
        "Clarke: campaign overview",
        "PLT, FCP and LCP per matrix cell (HTTP version x congestion control x page), mean with 95 % CI.",
        [CAMPAIGN_VAR, METRIC_VAR, BROWSER_VAR],
        [
            panel("table", "$metric per cell: mean, 95 % CI (Student t), median, n", summary, h=10),
            panel(
                "barchart",
                "$metric mean per cell",
                summary,
                w=16,
                h=10,
                options={"xField": "page", "orientation": "vertical", "showValue": "auto"},
            ),
            panel(
                "piechart",
                "Loads by status",
                f'SELECT count("attempt") FROM "page_load" WHERE {CAMPAIGN} GROUP BY "status"',
                w=8,
                h=10,
                unit="none",
            ),
            panel(
                "table",
                "Recorded sites: load times and DNS lookups per site",
                f'SELECT mean("plt_ms") AS "plt_ms", mean("fcp_ms") AS "fcp_ms", '
                f'mean("lcp_ms") AS "lcp_ms", mean("dns_ms_sum") AS "dns_ms_sum", '
                f'mean("dns_queries_crossed") AS "dns_queries_crossed", count("plt_ms") AS "n" '
                f'FROM "page_load" WHERE {CAMPAIGN} AND "status" = \'ok\' AND {SITES} '
                f"GROUP BY {CELL}",
                h=8,
                overrides=[by_name(f, "none") for f in ("dns_queries_crossed", "n")],
                description="A campaign's recorded sites (docs/sites.md): per site, DNS cache "
                "and cell, the mean PLT, FCP and LCP of the successful loads, the time their "
                "lookups took (each origin's first, summed) and the lookups that crossed the "
                "link. Empty for a campaign without sites.",
            ),
            panel(
                "timeseries",
                "$metric of every successful load, in campaign order",
                f'SELECT "$metric" FROM "page_load" WHERE {CAMPAIGN} AND "status" = \'ok\' '
                f"GROUP BY {CELL}",
                fmt="time_series",
                h=10,
                options={
                    "legend": {"showLegend": True, "displayMode": "list", "placement": "right"}
                },
            ),
        ],
    )


def drilldown() -> dict[str, Any]:
    run_var = query_var(
        "run",
        "run",
        'SHOW TAG VALUES FROM "page_load" WITH KEY = "run_id" WHERE "campaign_id" =~ /^$campaign$/',
        include_all=True,
    )
    fields = (
        '"attempt", "plt_ms", "fcp_ms", "lcp_ms", "ttfb_ms", "connect_ms", "transfer_bytes", '
        '"reason", "browser_version"'
    )
    connection_fields = ", ".join(f'"{f}"' for f in CONNECTION_FIELDS)
    return dashboard(
        "clarke-runs",
        "Clarke: run drill-down",
        "Every page-load attempt of a campaign, its status and the reason a load failed "
        "verification; per load, its connections and how many carried requests at once.",
        [CAMPAIGN_VAR, BROWSER_VAR, run_var],
        [
            panel(
                "table",
                "Every attempt",
                f'SELECT {fields} FROM "page_load" WHERE {CAMPAIGN} '
                f'AND "run_id" =~ /^$run$/ GROUP BY "run_id", "status", {SETTINGS}, {CELL}',
                h=14,
            ),
            panel(
                "table",
                "Failed attempts and why",
                f'SELECT "attempt", "reason" FROM "page_load" '
                f'WHERE {CAMPAIGN} AND "status" = \'failed\' GROUP BY "run_id", "http", "page"',
                h=8,
            ),
            panel(
                "table",
                "Connections and requests at once, per load",
                f'SELECT "max_concurrent_connections", "max_concurrent_requests", "connections_idle_ms" '
                f'FROM "page_load" WHERE {CAMPAIGN} '
                f'AND "run_id" =~ /^$run$/ GROUP BY "run_id", "status", "http", "page"',
                h=10,
                unit="none",
                overrides=[by_name("connections_idle_ms", "ms")],
                description="Per load: the most connections carrying the page at once, the "
                "most requests outstanding at once, and the sum of the connections' idle "
                "time (docs/metrics.md, Connections); the load's time joins it with Every "
                "attempt. No row for a load without the browser's resource timings "
                "(Browsertime) or recorded before per-connection rows.",
            ),
            panel(
                "table",
                "Every connection of the selected runs",
                f'SELECT {connection_fields} FROM "connection" WHERE {CAMPAIGN} '
                f'AND "run_id" =~ /^$run$/ '
                f'GROUP BY "run_id", "attempt", "conn_id", "protocol", "http", "page"',
                h=14,
                overrides=[by_name(f, "decbytes") for f in ("bytes_sent", "bytes_received")]
                + [by_name(f, "none") for f in ("requests", "requests_timed", "max_streams")],
                description="One row per connection that carried the page (the server's "
                "record joined with the browser's timings): bytes the server sent and "
                "received on it, its requests, handshake, first request and last response "
                "end (ms from navigation start), busy and idle time, most requests at once.",
            ),
        ],
    )


def link_health() -> dict[str, Any]:
    checks = (
        'SELECT last("rtt_mean_ms") AS "rtt mean", last("rtt_expected_ms") AS "rtt expected", '
        'last("rtt_stdev_ms") AS "rtt stdev", last("forward_mbps") AS "forward Mb/s", '
        'last("forward_expected_mbps") AS "forward expected", last("return_mbps") AS "return Mb/s", '
        'last("return_expected_mbps") AS "return expected", last("passed") AS "passed" '
        f'FROM "link_check" WHERE {ONE_CAMPAIGN} GROUP BY "profile", "phase", "backend"'
    )
    counters = (
        'SELECT sum("frames") AS "frames", sum("drops_queue") AS "queue drops", '
        'sum("drops_loss") AS "loss drops", mean("queue_delay_mean_ms") AS "queue delay mean ms" '
        f'FROM "link_stats" WHERE {ONE_CAMPAIGN} GROUP BY "profile", "direction"'
    )
    return dashboard(
        "clarke-link",
        "Clarke: link health",
        "The link as measured before the first and after the last run, against its profile, "
        "the emulator's counters, and a scheduled link's delay and rate over time.",
        [CAMPAIGN_VAR],
        [
            panel("table", "Link checks: measured against profile", checks, h=8, unit="none"),
            panel(
                "table",
                "Emulator counters per direction (sum over runs)",
                counters,
                h=8,
                unit="none",
            ),
            link_over_time("one_way_delay_ms", "delay", "ms", "one-way delay"),
            link_over_time("rate_mbps", "rate", "Mbits", "rate"),
        ],
    )


def link_over_time(field: str, metric: str, unit: str, what: str) -> dict[str, Any]:
    """A scheduled link's `what` over the campaign's time (link_schedule points, a step
    line per direction) with each load drawn as a point: the mean it crossed."""
    schedule = (
        f'SELECT "{field}" FROM "link_schedule" WHERE {ONE_CAMPAIGN} AND $timeFilter '
        'GROUP BY "profile", "direction"'
    )
    loads = (
        f'SELECT "link_{metric}_forward_mean_{"ms" if unit == "ms" else "mbps"}" '
        f'AS "load: forward mean crossed" FROM "page_load" WHERE {ONE_CAMPAIGN} '
        "AND \"status\" = 'ok' "
        'AND $timeFilter GROUP BY "profile", "http"'
    )
    p = panel(
        "timeseries",
        f"Scheduled link: {what} over time, with the loads",
        schedule,
        fmt="time_series",
        unit=unit,
        h=10,
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*load: .*"},
                "properties": [
                    {"id": "custom.drawStyle", "value": "points"},
                    {"id": "custom.pointSize", "value": 7},
                ],
            }
        ],
        description=f"The {what} the link's schedule held in each direction (a step "
        "line, from the profile's schedule anchored at each load's navigation start: "
        "docs/schedules.md), and every verified load as a point at its start: the mean "
        f"forward {what} its packets crossed, from satlink's counters. Empty for profiles "
        "without a schedule.",
    )
    p["fieldConfig"]["defaults"]["custom"] = {"lineInterpolation": "stepAfter"}
    p["targets"].append({**p["targets"][0], "refId": "B", "query": loads})
    return p


def nightly() -> dict[str, Any]:
    def tag_var(key: str) -> dict[str, Any]:
        return query_var(
            key,
            key,
            f'SHOW TAG VALUES FROM "cell_summary" WITH KEY = "{key}" '
            "WHERE \"campaign\" = 'nightly'",
            include_all=True,
        )

    where = '"campaign" = \'nightly\' AND "metric" =~ /^$metric$/ AND ' + " AND ".join(
        f'"{tag}" =~ /^${tag}$/' for tag in CELL_TAGS
    )
    trend = (
        'SELECT mean("mean") AS "mean", mean("ci_low") AS "ci_low", mean("ci_high") AS "ci_high" '
        f'FROM "cell_summary" WHERE {where} AND $timeFilter GROUP BY time(1d), {CELL} fill(none)'
    )
    baseline = (
        'SELECT last("mean") AS "baseline", last("ci_low") AS "baseline_low", '
        'last("ci_high") AS "baseline_high" FROM "cell_summary" WHERE "kind" = \'baseline\' '
        f"AND {where.replace(chr(34) + 'campaign' + chr(34) + ' = ' + chr(39) + 'nightly' + chr(39) + ' AND ', '')} "
        f"GROUP BY {CELL}"
    )
    return dashboard(
        "clarke-nightly",
        "Clarke: nightly trends",
        "Each metric per cell, night after night, with its 95 % CI band and the baseline the nightly compares with.",
        [
            METRIC_VAR,
            *(tag_var(key) for key in CELL_TAGS),
        ],
        [
            panel(
                "timeseries",
                "$metric per night (mean, 95 % CI band)",
                trend,
                fmt="time_series",
                h=12,
                overrides=band("ci_low", "ci_high"),
            ),
            panel("table", "Baseline per cell (mean and 95 % CI)", baseline, h=8),
        ],
        time_from="now-60d",
    )


DASHBOARDS = {
    "campaign-overview": overview,
    "run-drilldown": drilldown,
    "link-health": link_health,
    "nightly-trends": nightly,
}


def render() -> dict[str, str]:
    return {name: json.dumps(fn(), indent=2) + "\n" for name, fn in DASHBOARDS.items()}


if __name__ == "__main__":
    for name, text in render().items():
        (HERE / "json" / f"{name}.json").write_text(text)
        print(f"wrote dashboards/json/{name}.json")
