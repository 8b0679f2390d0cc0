"""The GEO study's pages: exact sizes, real baseline JPEGs, published order, LCP layout,
determinism; custom models."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from clarke.errors import InputError
from clarke.pages import jpeg, layout
from clarke.pages.build import build
from clarke.pages.models import Registry, Units

# The study's Table 3, in K, typed in again here so that the data file is checked
# against the paper rather than against itself.
PUBLISHED = {
    "single": {"100k": [100], "500k": [500], "1m": [1000], "2m": [2000]},
    "uniform": {"100k": [12.5] * 8, "500k": [62.5] * 8, "1m": [125] * 8, "2m": [250] * 8},
    "triangular": {
        "100k": [3, 8, 14, 20, 22, 16, 11, 6],
        "500k": [20, 40, 70, 100, 110, 80, 50, 30],
        "1m": [5, 50, 135, 230, 270, 200, 100, 10],
        "2m": [10, 100, 270, 450, 540, 400, 200, 20],
    },
}

SOF0, SOF2 = b"\xff\xc0", b"\xff\xc2"


def _segments(data: bytes) -> list[bytes]:
    """Marker bytes of every segment up to start-of-scan."""
    markers, i = [], 2
    while i < len(data):
        assert data[i] == 0xFF, f"bad marker at {i}"
        marker = data[i : i + 2]
        markers.append(marker)
        if marker == b"\xff\xda":
            break
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return markers


@pytest.fixture(scope="module")
def study_pages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("pages")
    reg = Registry.default()
    pages = [reg.get(m).page(s, Units.si) for m in PUBLISHED for s in PUBLISHED[m]]
    manifest = json.loads(build(pages, out, Units.si).read_text())
    return out, manifest


def test_all_twelve_pages_with_published_sizes_in_order(study_pages: tuple[Path, dict]) -> None:
    out, manifest = study_pages
    by_name = {p["name"]: p for p in manifest["pages"]}
    assert len(by_name) == 12
    for model, sizes in PUBLISHED.items():
        for size, kilobytes in sizes.items():
            page = by_name[f"{model}-{size}"]
            expected = [round(k * 1000) for k in kilobytes]
            objects = sorted(page["objects"], key=lambda o: o["position"])
            assert [o["bytes"] for o in objects] == expected
            for o in objects:
                assert (out / o["path"]).stat().st_size == o["bytes"]


def test_objects_are_decodable_baseline_jpegs(study_pages: tuple[Path, dict]) -> None:
    out, manifest = study_pages
    for page in manifest["pages"]:
        for o in page["objects"]:
            data = (out / o["path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == o["sha256"]
            markers = _segments(data)
            assert SOF0 in markers and SOF2 not in markers, o["path"]
            img = Image.open(io.BytesIO(data))
            img.load()  # decodes every scan
            assert img.format == "JPEG" and not img.info.get("progressive")
            assert list(img.size) == o["pixels"]
            # never upscaled by the browser: LCP then counts the displayed area
            assert img.size[0] >= o["display"][0] and img.size[1] >= o["display"][1]


def test_html_lists_objects_in_order_and_nothing_else(study_pages: tuple[Path, dict]) -> None:
    out, manifest = study_pages
    for page in manifest["pages"]:
        html = (out / page["path"]).read_text()
        assert len(html.encode()) == page["html_bytes"] < 2500
        srcs = re.findall(r'(?:src|href)="([^"]*)"', html)
        n = len(page["objects"])
        assert srcs == ["data:,"] + [f"o{i}.jpg" for i in range(1, n + 1)]
        assert "<script" not in html and "url(" not in html


def test_largest_object_has_largest_display_area_and_fits(study_pages: tuple[Path, dict]) -> None:
    _, manifest = study_pages
    for page in manifest["pages"]:
        objs = page["objects"]
        areas = {o["path"]: o["display"][0] * o["display"][1] for o in objs}
        by_size = sorted(objs, key=lambda o: o["bytes"])
        for a, b in itertools.pairwise(by_size):
            if a["bytes"] < b["bytes"]:
                assert areas[a["path"]] < areas[b["path"]], page["name"]
        largest = max(areas.values())
        assert sorted(p for p, a in areas.items() if a == largest) == sorted(page["lcp_candidates"])
        boxes = [layout.Box(*o["display"]) for o in objs]
        assert layout._height_of_flow(boxes) <= layout.CONTAINER_HEIGHT


def test_triangular_order_rises_then_falls(study_pages: tuple[Path, dict]) -> None:
    _, manifest = study_pages
    for page in manifest["pages"]:
        if page["model"] != "triangular":
            continue
        sizes = [o["bytes"] for o in sorted(page["objects"], key=lambda o: o["position"])]
        peak = sizes.index(max(sizes))
        assert sizes[: peak + 1] == sorted(sizes[: peak + 1])
        assert sizes[peak:] == sorted(sizes[peak:], reverse=True)


def test_build_is_byte_for_byte_deterministic(tmp_path: Path) -> None:
    reg = Registry.default()
    pages = [reg.get("triangular").page("1m", Units.si), reg.get("uniform").page("100k", Units.si)]
    first = build(pages, tmp_path / "a", Units.si).read_bytes()
    second = build(pages, tmp_path / "b", Units.si).read_bytes()
    assert first == second
    for f in (tmp_path / "a").rglob("*"):
        if f.is_file():
            assert f.read_bytes() == (tmp_path / "b" / f.relative_to(tmp_path / "a")).read_bytes()


def test_binary_units(tmp_path: Path) -> None:
    page = Registry.default().get("triangular").page("100k", Units.binary)
    assert page.object_bytes == tuple(k * 1024 for k in PUBLISHED["triangular"]["100k"])
    manifest = json.loads(build([page], tmp_path, Units.binary).read_text())
    assert manifest["bytes_per_k"] == 1024
    assert [o["bytes"] for o in manifest["pages"][0]["objects"]] == list(page.object_bytes)


def test_custom_models_explicit_list_and_equal_split(tmp_path: Path) -> None:
    spec = tmp_path / "models.yaml"
    spec.write_text(
        "models:\n"
        "  split10:\n    sizes:\n      1m: {count: 10, total: 1000.007}\n"
        "  mine:\n    sizes:\n      custom: [40, 10, 250, 5]\n"
    )
    reg = Registry.default([spec])
    split = reg.page_by_name("split10-1m")
    assert split.total_bytes == 1_000_007 and len(split.object_bytes) == 10
    assert max(split.object_bytes) - min(split.object_bytes) == 1
    assert reg.page_by_name("mine-custom").object_bytes == (40_000, 10_000, 250_000, 5_000)
    manifest = json.loads(
        build([split, reg.page_by_name("mine-custom")], tmp_path / "o", Units.si).read_text()
    )
    assert manifest["pages"][1]["lcp_candidates"] == ["mine-custom/o3.jpg"]


def test_shipped_example_models_build(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run_cli(
        "pages",
        "build",
        "--out",
        str(tmp_path),
        "--models",
        "split5,handmade",
        "--models-file",
        "pages/examples/parallel-connections.yaml",
    )
    assert code == 0, err
    assert "2 pages written" in out


def test_cli_builds_selected_pages(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    code, _out, err = run_cli(
        "pages", "build", "--out", str(tmp_path), "--models", "uniform", "--sizes", "100k,500k"
    )
    assert code == 0, err
    names = [p["name"] for p in json.loads((tmp_path / "manifest.json").read_text())["pages"]]
    assert names == ["uniform-100k", "uniform-500k"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--models", "nope"], "unknown page model 'nope'; allowed: single, uniform, triangular"),
        (["--sizes", "3m"], "unknown page size '3m'"),
        (["--units", "octal"], "'octal' is not one of 'si', 'binary'"),
    ],
)
def test_cli_rejects_bad_selection(tmp_path: Path, run_cli, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli("pages", "build", "--out", str(tmp_path), *args)
    assert code == 2
    assert message in err


def test_too_small_object_is_refused(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    spec = tmp_path / "tiny.yaml"
    spec.write_text("models:\n  tiny:\n    sizes:\n      1k: [0.5]\n")
    code, _, err = run_cli(
        "pages",
        "build",
        "--out",
        str(tmp_path / "o"),
        "--models-file",
        str(spec),
        "--models",
        "tiny",
    )
    assert code == 2
    assert "models.tiny.sizes.1k" in err and "smaller than 1000 bytes" in err


def test_objects_too_small_for_their_boxes_are_refused_naming_page_and_box(
    tmp_path: Path, run_cli: Any
) -> None:
    """Ten objects of 1000 bytes each get a 280x210 box, more pixels than any JPEG of
    1000 bytes holds: the build stops with the page, the object and the box, not a
    traceback."""
    spec = tmp_path / "small.yaml"
    spec.write_text("models:\n  small:\n    sizes:\n      10k: {count: 10, total: 10}\n")
    code, _, err = run_cli("pages", "build", "--out", str(tmp_path / "o"), "--models-file",
                           str(spec), "--models", "small")  # fmt: skip
    assert code == 2, err
    assert "page small-10k, object 1 of 10: no 280x210 JPEG fits in 1000 bytes" in err
    assert "Traceback" not in err


def test_padding_is_exact_and_refuses_gaps_no_segment_can_fill() -> None:
    data, _ = jpeg.make(5000, 1, 7, layout.Box(60, 45))
    assert len(data) == 5000
    stub = b"\xff\xd8" + b"\x00" * 10
    assert len(jpeg.pad(stub, 12 + 70_000, b"x")) == 12 + 70_000  # two COM segments
    with pytest.raises(jpeg.SizeUnreachable):
        jpeg.pad(stub, 13, b"x")  # 1 byte: smaller than an empty COM segment


def test_objects_above_the_cap_are_refused_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "models.yaml"
    spec.write_text("models:\n  huge:\n    sizes:\n      10g: [10000000, 100]\n")
    reg = Registry.default([spec])
    with pytest.raises(InputError, match=r"objects \[1\] are larger than 64 MB"):
        reg.page_by_name("huge-10g")
    monkeypatch.setenv("CLARKE_MAX_OBJECT_MB", "20000")
    assert reg.page_by_name("huge-10g").object_bytes == (10_000_000_000, 100_000)
    monkeypatch.setenv("CLARKE_MAX_OBJECT_MB", "lots")
    with pytest.raises(InputError, match="CLARKE_MAX_OBJECT_MB='lots'"):
        reg.page_by_name("huge-10g")


def test_server_delays_go_into_the_object_urls_and_the_manifest(tmp_path: Path) -> None:
    """The shipped example: each object's URL asks the server for its hold; the files,
    their paths and sizes (what the verdicts check) are those of any page."""
    reg = Registry.default([Path("pages/examples/server-delays.yaml")])
    page = reg.page_by_name("staggered-170k")
    assert page.delays_ms == (0, 600, 1200) and page.server_delays
    assert not reg.page_by_name("uniform-1m").server_delays
    manifest = json.loads(build([page], tmp_path, Units.si).read_text())
    (entry,) = manifest["pages"]
    html = (tmp_path / entry["path"]).read_text()
    srcs = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert srcs == ["data:,", "o1.jpg", "o2.jpg?delay_ms=600", "o3.jpg?delay_ms=1200"]
    objects = entry["objects"]
    assert [o["delay_ms"] for o in objects] == [0, 600, 1200]
    assert [o["path"] for o in objects] == [f"staggered-170k/o{i}.jpg" for i in (1, 2, 3)]
    for o, size in zip(objects, (30_000, 110_000, 30_000), strict=True):
        assert o["bytes"] == size == (tmp_path / o["path"]).stat().st_size
    # The largest object is neither held the least nor the most.
    assert entry["lcp_candidates"] == ["staggered-170k/o2.jpg"]


@pytest.mark.parametrize(
    ("delays", "message"),
    [
        (
            "[0, 600]",
            ": Value error, server_delays_ms gives 2 delays, one per object, but size 3k has "
            "3 objects",
        ),
        ("[0, 600, 30001]", ".server_delays_ms[2]: Input should be less than or equal to 30000"),
        ("[0, -1, 5]", ".server_delays_ms[1]: Input should be greater than or equal to 0"),
        ("[0, 1.5, 5]", ".server_delays_ms[1]: Input should be a valid integer"),
        ("[0, true, 5]", ".server_delays_ms[1]: Input should be a valid integer"),
        ("[]", ".server_delays_ms: List should have at least 1 item"),
    ],
)
def test_bad_server_delays_are_refused_naming_the_field(
    tmp_path: Path, run_cli, delays: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    spec = tmp_path / "held.yaml"
    spec.write_text(
        f"models:\n  held:\n    sizes:\n      3k: [1, 1, 1]\n    server_delays_ms: {delays}\n"
    )
    code, _, err = run_cli(
        "pages", "build", "--out", str(tmp_path / "o"), "--models-file", str(spec)
    )
    assert code == 2
    assert f"models.held{message}" in " ".join(err.split()), err
