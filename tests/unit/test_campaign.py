"""Campaign files: validation errors (exit 2, file and field named, allowed values), plan
expansion, order, sharding."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clarke.campaign.dimensions import (
    BROWSER,
    CC,
    CONNECTIONS,
    CROSS_TRAFFIC,
    HTTP,
    MODEL,
    PROFILE,
    SIZE,
)
from clarke.campaign.plan import CampaignPlan, Run, plan_file

GOOD = {
    "name": "t",
    "matrix": {
        "profiles": ["lan"],
        "http": [1.1, 2, 3],
        "cc": ["bbr"],
        "models": ["uniform"],
        "sizes": ["100k"],
    },
    "repetitions": 2,
}


def _with(path: str, value: object) -> dict:
    """GOOD with the value at a dotted path replaced (value `...` deletes the key)."""
    doc = json.loads(json.dumps(GOOD))
    *parents, last = path.split(".")
    node = doc
    for p in parents:
        node = node[int(p)] if p.isdigit() else node[p]
    if value is ...:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return doc


def _plan_with_axis(f: Path, axis: str, values: list[object], http: object) -> CampaignPlan:
    """GOOD with one HTTP version and an axis of `values`, written to f and planned."""
    doc = _with(f"matrix.{axis}", values)
    doc["matrix"]["http"] = [http]
    f.write_text(yaml.safe_dump(doc))
    return plan_file(f)


MALFORMED: list[tuple[str, object, list[str]]] = [
    # (description, document or raw text, fragments the message must contain)
    ("http version", _with("matrix.http.1", 4), ["matrix.http[1]", "'1.1', '2' or '3'"]),
    ("cc name", _with("matrix.cc.0", "vegas"), ["matrix.cc[0]", "'cubic', 'bbr' or 'reno'"]),
    (
        "unknown profile",
        _with("matrix.profiles.0", "mars"),
        ["matrix.profiles[0]", "unknown link profile 'mars'", "geo", "lan"],
    ),
    (
        "unknown model",
        _with("matrix.models.0", "pyramid"),
        ["matrix.models[0]", "unknown page model 'pyramid'", "single, uniform, triangular"],
    ),
    (
        "unknown size",
        _with("matrix.sizes.0", "3m"),
        ["matrix.sizes[0]", "has no size '3m'", "100k, 500k, 1m, 2m"],
    ),
    ("zero repetitions", _with("repetitions", 0), ["repetitions", "greater than or equal to 1"]),
    ("repetitions not a number", _with("repetitions", "three"), ["repetitions", "valid integer"]),
    ("missing repetitions", _with("repetitions", ...), ["repetitions: required field is missing"]),
    ("missing name", _with("name", ...), ["name: required field is missing"]),
    ("bad name", _with("name", "Has Spaces"), ["name", "should match pattern"]),
    ("unknown top-level key", {**GOOD, "repetition": 3}, ["repetition: unknown field"]),
    ("unknown matrix key", _with("matrix.pages", ["x"]), ["matrix.pages: unknown field"]),
    ("empty axis", _with("matrix.cc", []), ["matrix.cc", "at least 1 item"]),
    ("duplicate in axis", _with("matrix.http", [2, 2]), ["matrix", "listed more than once: 2"]),
    ("bad order", {**GOOD, "order": "random"}, ["order", "'listed' or 'shuffled'"]),
    (
        "bad engine",
        {**GOOD, "browser": {"engine": "chrome"}},
        ["browser.engine", "'selenium' or 'browsertime'"],
    ),
    (
        "bad connections",
        {**GOOD, "browser": {"connections_per_server": 0}},
        ["browser.connections_per_server", "greater than or equal to 1"],
    ),
    (
        "bad connections version",
        {**GOOD, "browser": {"connections_per_server": {"4": 2}}},
        ["browser.connections_per_server", "'1.1', '2' or '3'"],
    ),
    (
        "context isolation with Browsertime",
        {**GOOD, "browser": {"engine": "browsertime", "isolation": "context"}},
        ["browser", "isolation context needs engine selenium", "cannot keep one between loads"],
    ),
    (
        "bad isolation",
        {**GOOD, "browser": {"isolation": "tab"}},
        ["browser.isolation", "'profile' or 'context'"],
    ),
    (
        "no loads per browser",
        {**GOOD, "browser": {"isolation": "context", "loads_per_browser": 0}},
        ["browser.loads_per_browser", "greater than or equal to 1"],
    ),
    (
        "both matrix and scenarios",
        {**GOOD, "scenarios": [{"name": "a", "matrix": GOOD["matrix"]}]},
        ["exactly one of `matrix` or `scenarios`"],
    ),
    (
        "scenario field",
        {k: v for k, v in GOOD.items() if k != "matrix"}
        | {"scenarios": [{"name": "a", "matrix": {**GOOD["matrix"], "cc": ["x"]}}]},
        ["scenarios[0].matrix.cc[0]"],
    ),
    (
        "scenario profile",
        {k: v for k, v in GOOD.items() if k != "matrix"}
        | {"scenarios": [{"name": "a", "matrix": {**GOOD["matrix"], "profiles": ["moon"]}}]},
        ["scenarios[0].matrix.profiles[0]", "unknown link profile 'moon'"],
    ),
    ("negative seed", {**GOOD, "seed": -1}, ["seed", "greater than or equal to 0"]),
    (
        "missing models file",
        {**GOOD, "pages": {"models_file": "nothere.yaml"}},
        ["pages.models_file: file not found"],
    ),
    ("not a mapping", "- just\n- a list\n", ["(top level): expected a mapping"]),
    ("empty file", "", ["(top level): expected a mapping of fields, got empty"]),
    ("broken YAML", "name: [unclosed\n", ["not valid YAML", "line 2"]),
]


@pytest.mark.parametrize(("what", "doc", "fragments"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_campaign_exit_2_naming_the_field(
    tmp_path: Path,
    run_cli,
    what: str,
    doc: object,
    fragments: list[str],  # type: ignore[no-untyped-def]
) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    for command in ("validate", "plan"):
        code, out, err = run_cli("campaign", command, str(f))
        assert code == 2, (what, out, err)
        assert str(f) in err
        for fragment in fragments:
            assert fragment in err, (what, fragment, err)
        assert "Traceback" not in err


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "clarke", "campaign", "validate", str(tmp_path / "none.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "none.yaml" in proc.stderr and "Traceback" not in proc.stderr


def test_all_problems_reported_at_once(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(_with("matrix.http", ["7", "2", 9])))
    code, _, err = run_cli("campaign", "validate", str(f))
    assert code == 2 and "matrix.http[0]" in err and "matrix.http[2]" in err and "2 problems" in err


def test_shipped_campaigns_are_valid(run_cli) -> None:  # type: ignore[no-untyped-def]
    for f in sorted(Path("campaigns").glob("*.yaml")):
        code, _out, err = run_cli("campaign", "validate", str(f))
        assert code == 0, err


def _study_cell(r: Run) -> tuple[object, ...]:
    """The study's coordinates of a run: profile, HTTP version, cc, page model and size."""
    return (r.cell[PROFILE], r.cell[HTTP], r.cell[CC], r.cell[MODEL], r.cell[SIZE])


def test_study_campaign_covers_table_4() -> None:
    plan = plan_file(Path("campaigns/alshagri2023.yaml"))
    cells = {_study_cell(r) for r in plan.runs}  # connections per server: one per HTTP version
    sizes = ("100k", "500k", "1m", "2m")
    for profile in ("geo", "lan"):
        for h in ("1.1", "2", "3"):
            for m in ("single", "uniform"):
                assert all((profile, h, "bbr", m, s) in cells for s in sizes)
            assert all((profile, h, "cubic", "uniform", s) in cells for s in sizes)
        for h in ("2", "3"):
            assert all((profile, h, "bbr", "triangular", s) in cells for s in sizes)
    # nothing beyond Table 4: 24 + 12 new (cubic) + 8 new (triangular) per profile
    assert len(cells) == 2 * 44
    assert len(plan.runs) == 3 * len(cells)
    shared_cell = "geo/2/bbr/none/none/uniform/1m/6/none/none/firefox/own/default"
    shared = next(r for r in plan.runs if r.cell.path == shared_cell)
    assert shared.scenarios == ("parallel-streams", "congestion-control", "page-structure")
    h1 = next(r for r in plan.runs if r.cell[HTTP] == "1.1")
    assert h1.cell[CONNECTIONS] == 1


def test_listed_order_and_stable_ids(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(GOOD))
    runs = plan_file(f).runs
    assert [r.run_id for r in runs] == [
        "lan-h1-bbr-uniform-100k-r1",
        "lan-h2-bbr-uniform-100k-r1",
        "lan-h3-bbr-uniform-100k-r1",
        "lan-h1-bbr-uniform-100k-r2",
        "lan-h2-bbr-uniform-100k-r2",
        "lan-h3-bbr-uniform-100k-r2",
    ]


def test_shuffled_order_is_reproducible_from_its_seed(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    doc = {
        **GOOD,
        "order": "shuffled",
        "repetitions": 5,
        "matrix": {**GOOD["matrix"], "profiles": ["lan", "geo"]},
    }
    f.write_text(yaml.safe_dump(doc))
    a, b = plan_file(f), plan_file(f)
    assert a.seed is not None and b.seed is not None
    again = plan_file(f, seed=a.seed)
    assert [r.run_id for r in again.runs] == [r.run_id for r in a.runs]
    assert sorted(r.run_id for r in a.runs) == sorted(r.run_id for r in b.runs)
    # profiles stay in blocks, in the listed order
    profiles = [r.cell[PROFILE] for r in a.runs]
    assert profiles == ["lan"] * 15 + ["geo"] * 15
    assert [r.run_id for r in a.runs][:15] != sorted(r.run_id for r in a.runs[:15]) or a.seed == 0


def test_shards_are_disjoint_and_cover_the_plan() -> None:
    plan = plan_file(Path("campaigns/alshagri2023.yaml"))
    for n in (1, 2, 3, 7):
        shards = [plan.shard(i, n) for i in range(1, n + 1)]
        ids = [r.run_id for s in shards for r in s]
        assert sorted(ids) == sorted(r.run_id for r in plan.runs)
        assert len(ids) == len(set(ids))


def test_plan_json(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli("campaign", "plan", "campaigns/smoke.yaml", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["count"] == len(data["runs"]) == 3
    assert {r["http"] for r in data["runs"]} == {"1.1", "2", "3"}


def test_implementations_are_checked_against_the_registry(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    base = Path("campaigns/smoke.yaml").read_text()
    f = tmp_path / "c.yaml"
    f.write_text(base + "implementations: {link: tbf, server: nginx}\n")
    code, out, err = run_cli("campaign", "validate", str(f))
    assert code == 2
    assert (
        "implementations.link: unknown link implementation 'tbf'; allowed: satlink, opensand, netem"
        in err
    )
    assert "implementations.server: unknown server implementation 'nginx'" in err
    # smoke runs on lan: OpenSAND cannot emulate it, named before anything runs.
    f.write_text(base + "implementations: {link: opensand}\n")
    code, out, err = run_cli("campaign", "validate", str(f))
    assert code == 2 and "(opensand link)" in err and "lan: forward.rate_mbps" in err
    f.write_text(base + "implementations: {link: netem, server: openlitespeed}\n")
    code, out, err = run_cli("campaign", "validate", str(f))
    assert code == 0 and "link netem, server openlitespeed" in out


def test_implementations_take_lists(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    base = Path("campaigns/smoke.yaml").read_text()
    f = tmp_path / "c.yaml"
    f.write_text(base + "implementations: {link: [satlink, netem], server: [origin, nginx]}\n")
    code, _, err = run_cli("campaign", "validate", str(f))
    assert code == 2 and "implementations.server: unknown server implementation 'nginx'" in err
    f.write_text(base + "implementations: {server: [origin, origin]}\n")
    code, _, err = run_cli("campaign", "validate", str(f))
    assert code == 2 and "listed more than once: origin" in err
    f.write_text(base + "implementations: {link: [satlink, opensand]}\n")
    code, _, err = run_cli("campaign", "validate", str(f))  # opensand cannot run lan
    assert code == 2 and "(opensand link)" in err
    f.write_text(
        base + "implementations: {link: [satlink, netem], server: [origin, openlitespeed]}\n"
    )
    code, out, _ = run_cli("campaign", "validate", str(f))
    assert code == 0 and out.count("link ") == 4, out
    c = plan_file(f).campaign
    assert c.implementations.combinations() == [
        ("satlink", "origin"), ("satlink", "openlitespeed"),
        ("netem", "origin"), ("netem", "openlitespeed"),
    ]  # fmt: skip
    # an option pins its side; a campaign without the key runs the defaults once
    assert c.implementations.combinations(server="origin") == [
        ("satlink", "origin"), ("netem", "origin"),
    ]  # fmt: skip
    assert plan_file(Path("campaigns/smoke.yaml")).campaign.implementations.combinations() == [
        (None, None)
    ]
    # one run takes one combination; the several go through `clarke run` alone
    code, _, err = run_cli("run", str(f), "--shard", "1/2")
    assert code == 2 and "--substrate compose and --capture take one" in err, err


def test_the_implementations_campaign_is_the_studys_scenarios() -> None:
    plan = plan_file(Path("campaigns/implementations.yaml"))
    c = plan.campaign
    assert c.repetitions == 5 and len(c.implementations.combinations()) == 4
    cells = {_study_cell(r) for r in plan.runs}
    for h in ("1.1", "2", "3"):
        for s in ("500k", "2m"):
            assert ("geo", h, "bbr", "single", s) in cells
            assert all(("geo", h, cc, "uniform", s) in cells for cc in ("cubic", "bbr"))
    assert len(cells) == 18 and len(plan.runs) == 90


def test_a_key_given_twice_is_refused(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    text = Path("campaigns/smoke.yaml").read_text()
    f = tmp_path / "twice.yaml"
    f.write_text(text + "repetitions: 3\n")  # smoke.yaml has its own repetitions
    code, _, err = run_cli("campaign", "validate", str(f))
    assert code == 2 and "key 'repetitions' given twice (first on line" in err
    assert "Traceback" not in err


def test_connections_per_server_as_a_dimension(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "c.yaml"
    plan = _plan_with_axis(f, "connections", [1, 4], http=1.1)
    assert [r.run_id for r in plan.runs] == [
        f"lan-h1-bbr-uniform-100k-c{c}-r{rep}" for rep in (1, 2) for c in (1, 4)
    ]
    assert [r.cell[CONNECTIONS] for r in plan.runs] == [1, 4, 1, 4]
    assert len({r.cell for r in plan.runs}) == 2
    # Without the axis, ids stay as they were and the browser's setting decides.
    f.write_text(yaml.safe_dump(GOOD))
    first = plan_file(f).runs[0]
    assert (first.run_id, first.cell[CONNECTIONS]) == ("lan-h1-bbr-uniform-100k-r1", 6)
    for bad, field in (([1, 1], "listed more than once"), ([0], "greater than or equal to 1")):
        f.write_text(yaml.safe_dump(_with("matrix.connections", bad)))
        code, _, err = run_cli("campaign", "validate", str(f))
        assert code == 2 and "matrix.connections" in err and field in err, err


def test_pages_with_server_delays_are_refused_on_a_server_that_cannot_hold(
    tmp_path: Path, run_cli
) -> None:  # type: ignore[no-untyped-def]
    """Only origin holds responses (its capability, roles.ServerImplementation): a
    campaign that would load such pages on OpenLiteSpeed is refused before anything
    runs, naming the pages and the server."""
    models = Path("pages/examples/server-delays.yaml").resolve()
    doc = _with("matrix.models", ["staggered"])
    doc["matrix"]["sizes"] = ["170k"]
    doc["pages"] = {"models_file": str(models)}
    both = {"server": ["origin", "openlitespeed"]}
    f = tmp_path / "held.yaml"
    f.write_text(yaml.safe_dump({**doc, "implementations": both}))
    code, _, err = run_cli("campaign", "validate", str(f))
    assert code == 2
    assert (
        "(satlink link, openlitespeed server): 1 problem" in err
        and "staggered-170k: server delays (server_delays_ms, docs/pages.md) need a server "
        "that holds each response as asked (origin); the openlitespeed server would send "
        "every object at once"
        in " ".join(err.split())
        and "origin server)" not in err
    ), err
    f.write_text(yaml.safe_dump({**doc, "implementations": {"server": "origin"}}))
    code, _, err = run_cli("campaign", "validate", str(f))
    assert code == 0, err


def test_slot_phase_needs_selenium_and_at_s_only_when_fixed(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "c.yaml"
    for extra, said in (
        ({"slot_phase": {"mode": "spread"}, "browser": {"engine": "browsertime"}}, "selenium"),
        ({"slot_phase": {"mode": "fixed"}}, "at_s"),
        ({"slot_phase": {"mode": "sometimes"}}, "slot_phase.mode"),
    ):
        f.write_text(yaml.safe_dump({**GOOD, **extra}))
        code, _, err = run_cli("campaign", "validate", str(f))
        assert code == 2 and said in err and "Traceback" not in err, err
    f.write_text(yaml.safe_dump({**GOOD, "slot_phase": {"mode": "fixed", "at_s": 3}}))
    assert run_cli("campaign", "validate", str(f))[0] == 0


def test_cross_traffic_as_a_dimension(tmp_path: Path) -> None:
    """A name alone takes its defaults; a mapping names its parameters; run ids carry the
    label only when the axis is used; the cell carries it always."""
    f = tmp_path / "x.yaml"
    doc = _with("matrix.http", [2])
    doc["repetitions"] = 1
    doc["matrix"]["cross_traffic"] = [
        "none",
        "bulk-cubic",
        {"name": "bulk-bbr", "flows": 2, "direction": "both"},
        {"name": "udp-cbr", "rate_mbps": 2.5},
        "rrul",
    ]
    f.write_text(yaml.safe_dump(doc))
    plan = plan_file(f)
    assert [r.run_id for r in plan.runs] == [
        "lan-h2-bbr-uniform-100k-xnone-r1",
        "lan-h2-bbr-uniform-100k-xbulk-cubic-r1",
        "lan-h2-bbr-uniform-100k-xbulk-bbr-f2-both-r1",
        "lan-h2-bbr-uniform-100k-xudp-cbr-2.5mbps-r1",
        "lan-h2-bbr-uniform-100k-xrrul-r1",
    ]
    described = [r.to_dict()["cross"] for r in plan.runs]
    assert described[1] == {
        "name": "bulk-cubic",
        "label": "bulk-cubic",
        "flows": 1,
        "direction": "forward",
        "rate_mbps": None,
    }
    assert described[3]["rate_mbps"] == 2.5 and described[3]["direction"] == "forward"
    assert (described[4]["flows"], described[4]["direction"]) == (4, "both")
    assert [r.cell[CROSS_TRAFFIC].label for r in plan.runs][:2] == ["none", "bulk-cubic"]
    # Without the axis: no load has cross traffic and the ids stay as they were.
    f.write_text(yaml.safe_dump(GOOD))
    first = plan_file(f).runs[0]
    assert (first.run_id, first.cell[CROSS_TRAFFIC].label, first.cell[CROSS_TRAFFIC].active) == (
        "lan-h1-bbr-uniform-100k-r1",
        "none",
        False,
    )


@pytest.mark.parametrize(
    ("entries", "fragments"),
    [
        (["bulk-reno"], ["matrix.cross_traffic[0].name", "'none', 'bulk-cubic'", "'rrul'"]),
        ([{"name": "bulk-cubic", "direction": "up"}], ["direction", "'forward', 'return'"]),
        ([{"name": "bulk-cubic", "flows": 0}], ["flows", "greater than or equal to 1"]),
        ([{"name": "bulk-cubic", "rate_mbps": 2}], ["bulk-cubic takes no rate_mbps"]),
        ([{"name": "rrul", "flows": 2}], ["rrul takes no flows", "no parameters"]),
        ([{"name": "udp-cbr", "rate_mbps": -1}], ["rate_mbps", "greater than 0"]),
        ([{"name": "udp-cbr", "speed": 1}], ["speed: unknown field"]),
        ([{"name": "web", "direction": "return"}], ["web takes no direction", "flows"]),
        (
            ["bulk-cubic", {"name": "bulk-cubic", "flows": 1}],
            ["listed more than once: bulk-cubic"],
        ),
    ],
)
def test_cross_traffic_errors_name_the_field(
    tmp_path: Path, run_cli, entries: list[object], fragments: list[str]
) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(_with("matrix.cross_traffic", entries)))
    code, _, err = run_cli("campaign", "validate", str(f))
    assert code == 2, err
    assert "matrix.cross_traffic" in err and str(f) in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_the_browser_as_a_dimension(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "c.yaml"
    plan = _plan_with_axis(f, "browser", ["firefox", "chromium"], http=2)
    assert [r.run_id for r in plan.runs] == [
        f"lan-h2-bbr-uniform-100k-{b}-r{rep}" for rep in (1, 2) for b in ("firefox", "chromium")
    ]
    assert [r.cell[BROWSER] for r in plan.runs] == ["firefox", "chromium"] * 2
    assert {r.cell.texts()["browser"] for r in plan.runs} == {"firefox", "chromium"}
    # Without the axis, ids stay as they were and every load is Firefox's.
    f.write_text(yaml.safe_dump(GOOD))
    first = plan_file(f).runs[0]
    assert (first.run_id, first.cell[BROWSER]) == ("lan-h1-bbr-uniform-100k-r1", "firefox")


@pytest.mark.parametrize(
    ("change", "fields"),
    [
        (  # the study's 1 connection for HTTP/1.1: Chromium has 6, fixed
            {"browser": {"connections_per_server": {1.1: 1, 2: 6, 3: 6}}},
            ["browser.connections_per_server: 1 for HTTP/1.1", "Chromium opens 6 connections"],
        ),
        (
            {"matrix.connections": [1, 6]},
            ["matrix.connections: [1] with browser chromium", "no setting for it"],
        ),
        ({"matrix.browser": ["chromium", "safari"]}, ["matrix.browser", "'firefox' or"]),
    ],
)
def test_what_chromium_cannot_honour_is_refused_before_anything_runs(
    tmp_path: Path,
    run_cli,  # type: ignore[no-untyped-def]
    change: dict[str, object],
    fields: list[str],
) -> None:
    doc = _with("matrix.browser", ["firefox", "chromium"])
    for path, value in change.items():
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node[p]
        node[last] = value
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(doc))
    code, _, err = run_cli("campaign", "validate", str(f))
    assert code == 2 and all(x in err for x in fields), err
    assert "Traceback" not in err


def test_validate_checks_what_each_listed_server_takes(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    """`campaign validate` refuses what `clarke run` would: a value a listed
    implementation does not take (its capability data), naming field, value and server."""
    f = tmp_path / "iw.yaml"
    doc = _with("matrix.initial_window", ["default", 3])
    f.write_text(
        yaml.safe_dump({**doc, "implementations": {"server": ["origin", "openlitespeed"]}})
    )
    code, _, err = run_cli("campaign", "validate", str(f))
    said = " ".join(err.split())
    assert code == 2 and "openlitespeed server)" in said and "initial_window: 3" in said, err
    assert "origin server)" not in said, err
    f.write_text(yaml.safe_dump({**doc, "implementations": {"server": "origin"}}))
    assert run_cli("campaign", "validate", str(f))[0] == 0
