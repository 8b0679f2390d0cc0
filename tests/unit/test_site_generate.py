"""`clarke site generate`: a seeded multi-origin site that follows the Web Almanac 2024
mobile figures (pages/composition/), written as a valid clarke-site archive whose bodies
are real content of their type; the same seed gives the same bytes; bad input exits 2
naming the field (issue 33)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import yaml
from fontTools.ttLib import TTFont
from PIL import Image

from clarke.sites import archive, composition
from clarke.sites.generate import build, plan, statistics
from clarke.sites.generate.statistics import TYPES

# A seed draws each type around its median by exp(N(0, 0.1)); 3 sigma is +-35 %, and a
# count of 2 or 3 may move by one.
TOLERANCE = 0.35


def _close(produced: float, target: float) -> bool:
    return abs(produced - target) <= max(1.0, TOLERANCE * target)


def test_a_generated_site(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    """Seed 1 (one generation and its repeat: each takes some seconds)."""
    generated = build.generate(statistics.read(), 1, tmp_path / "site")
    _valid_and_following_the_figures(generated, run_cli)
    _real_content(generated)
    _asked_for_by_what_comes_before(generated)
    _same_bytes_again(generated, tmp_path)


def test_every_shipped_figure_names_its_source() -> None:
    stats = statistics.read()
    data = yaml.safe_load(statistics.shipped().read_text())
    assert (stats.edition, stats.client, stats.kilobyte_bytes) == (2024, "mobile", 1024)
    published = re.findall(
        r"kind: published\n\s+source: \"([^\"]+)\"", statistics.shipped().read_text()
    )
    assert len(published) >= 15
    for source in published:
        assert source.startswith("https://almanac.httparchive.org/en/2024/"), source
    assert data["types"]["js"]["requests"]["value"] == 22
    assert data["types"]["image"]["kilobytes"]["value"] == 900


def _valid_and_following_the_figures(generated: build.Generated, run_cli) -> None:  # type: ignore[no-untyped-def]
    site = archive.read(generated.path)  # raises on anything broken
    a = site.archive
    assert a.source.kind == "generator" and a.start_url == "https://www.site-1.test/"
    for o in a.origins:
        assert o.host.endswith(".test") and o.certificate_names == [o.host]
        assert o.address is not None and o.address.startswith(("198.18.", "198.19."))
    assert len({o.address for o in a.origins}) == len(a.origins) == 13
    for row in build.side_by_side(generated):
        assert _close(row.produced, row.target), row
    code, out, err = run_cli("site", "check", str(generated.path), "--json")
    assert code == 0, err
    checked = json.loads(out)
    assert checked["total"]["requests"] == len(a.exchanges) == generated.plan.resources.__len__()


def _real_content(generated: build.Generated) -> None:
    site = archive.read(generated.path)
    for e in site.archive.exchanges:
        data = site.body(e)
        kind = composition.content_type(e)
        if kind == "image":
            Image.open(io.BytesIO(data)).load()
        elif kind == "font":
            font = TTFont(io.BytesIO(data))
            assert font["glyf"] and font["cmap"].getBestCmap()
        elif kind == "other":
            json.loads(data)
        elif kind == "html":
            assert data.startswith(b"<!DOCTYPE html>") and data.endswith(b"</html>\n")
        # Text is sent gzip-coded, and its size as sent is the plan's to a few bytes.
        if kind in ("html", "css", "js", "other"):
            assert e.content_encoding == "gzip"
            sent = len(composition.encoded(data, "gzip"))
            r = next(r for r in generated.plan.resources if r.url == e.url)
            assert r.size - 64 <= sent <= max(r.size, sent if r.role == "document" else r.size)


def _asked_for_by_what_comes_before(generated: build.Generated) -> None:
    """The document, a stylesheet or a script names every other URL, and a script
    names only what it inserts or fetches: the dependency chains are real."""
    site = archive.read(generated.path)
    p = generated.plan
    text = {e.url: site.body(e).decode("utf-8", "replace") for e in site.archive.exchanges}
    for r in p.resources[1:]:
        assert r.parent is not None
        parent = p.resources[r.parent]
        assert f'"{r.url}"' in text[parent.url], (r.url, parent.url)
        assert r.depth == parent.depth + 1
    assert p.depth() == 3
    deepest = [r for r in p.resources if r.depth == 3]
    assert deepest and all(p.resources[r.parent].kind == "js" for r in deepest if r.parent)
    head = text[p.document.url].split("</head>")[0]
    assert head.count('<link rel=stylesheet href="') == 5
    assert len(re.findall(r'<script src="', head)) == 2  # sync: no async, no defer
    for font in p.of("font"):
        sheet = text[p.resources[font.parent or 0].url]
        assert f'src:url("{font.url}")' in sheet


def _same_bytes_again(generated: build.Generated, tmp_path: Path) -> None:
    again = build.generate(statistics.read(), 1, tmp_path / "again")
    assert (again.path / "site.json").read_bytes() == (generated.path / "site.json").read_bytes()
    files = sorted(p.name for p in (generated.path / archive.BODIES).iterdir())
    assert files == sorted(p.name for p in (again.path / archive.BODIES).iterdir())
    other = plan.plan(statistics.read(), 2)
    assert [r.size for r in other.resources] != [r.size for r in generated.plan.resources]


@pytest.mark.parametrize("seed", [2, 3, 4, 5, 6])
def test_other_seeds_follow_the_figures_too(seed: int) -> None:
    stats = statistics.read()
    p = plan.plan(stats, seed)
    for t in TYPES:
        figures = stats.types.of(t)
        assert _close(len(p.of(t)), figures.requests.value), (t, len(p.of(t)))
        kb = sum(r.size for r in p.of(t)) / stats.kilobyte_bytes
        assert _close(kb, figures.kilobytes.value), (t, kb)
    assert _close(sum(r.third_party for r in p.resources), stats.third_party_requests.value)
    assert p.depth() == stats.dependency_depth.count


def test_no_variation_gives_the_medians() -> None:
    data = yaml.safe_load(statistics.shipped().read_text())
    data["variation"]["value"] = 0
    stats = statistics.Statistics.model_validate(data)
    p = plan.plan(stats, 9)
    for t in TYPES:
        figures = stats.types.of(t)
        assert len(p.of(t)) == figures.requests.count
        total = sum(r.size for r in p.of(t))
        assert abs(total - figures.kilobytes.value * 1024) <= len(p.of(t)), t
    assert sum(r.third_party for r in p.resources) == 22


def _write_statistics(tmp_path: Path, change) -> Path:  # type: ignore[no-untyped-def]
    data = yaml.safe_load(statistics.shipped().read_text())
    change(data)
    path = tmp_path / "stats.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d.update(bogus=1), "bogus: unknown field"),
        (lambda d: d["types"]["css"]["kilobytes"].update(value=-3), "types.css.kilobytes.value"),
        (lambda d: d["types"]["js"]["requests"].update(value=2.5), "types.js.requests.value"),
        (lambda d: d["types"]["font"]["requests"].update(surprise=1), "types.font.requests"),
        (lambda d: d["render_blocking_css"].update(value=40), "render_blocking_css.value"),
        (lambda d: d["dependency_depth"].update(kind="guess"), "dependency_depth.kind"),
    ],
)
def test_bad_statistics_exit_2_naming_the_field(  # type: ignore[no-untyped-def]
    tmp_path: Path, run_cli, change, named: str
) -> None:
    path = _write_statistics(tmp_path, change)
    code, out, err = run_cli(
        "site", "generate", "--statistics", str(path), "-o", str(tmp_path / "out")
    )
    assert code == 2, (out, err)
    assert named in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("seed", ["-1", "abc", str(2**32)])
def test_a_bad_seed_exits_2(tmp_path: Path, run_cli, seed: str) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli("site", "generate", "--seed", seed, "-o", str(tmp_path / "o"))
    assert code == 2 and "--seed" in err and "Traceback" not in err


def test_a_missing_statistics_file_or_a_full_directory_exits_2(  # type: ignore[no-untyped-def]
    tmp_path: Path, run_cli
) -> None:
    code, _, err = run_cli(
        "site", "generate", "--statistics", str(tmp_path / "no.yaml"), "-o", str(tmp_path / "o")
    )
    assert code == 2 and "no.yaml" in err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    code, _, err = run_cli("site", "generate", "-o", str(tmp_path / "full"))
    assert code == 2 and "not empty" in err and "Traceback" not in err
