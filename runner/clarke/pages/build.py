"""Writes pages and their manifest: DIR/<model>-<size>/index.html, DIR/<model>-<size>/oN.jpg
and DIR/manifest.json. The only code that writes page files."""

from __future__ import annotations

import hashlib
import html
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from clarke.pages import jpeg, layout
from clarke.pages.models import PageSpec, Registry, Units

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1

_STYLE = (
    "body{margin:8px;background:#fff}"
    f"main{{display:flex;flex-wrap:wrap;gap:{layout.GAP}px;align-items:flex-start;"
    f"width:{layout.CONTAINER_WIDTH}px}}"
    "img{display:block}"
)


def _seed(page: str, position: int, size: int) -> int:
    digest = hashlib.sha256(f"clarke:{page}:{position}:{size}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def object_src(page: PageSpec, position: int) -> str:
    """The object's URL relative to its page: `oN.jpg`, with `?delay_ms=D` where the
    page asks the server to hold its response (origin/README.md, "Held responses")."""
    delay = page.delay_of(position)
    return f"o{position}.jpg" + (f"?delay_ms={delay}" if delay else "")


def render_html(page: PageSpec, boxes: list[layout.Box]) -> str:
    n = len(page.object_bytes)
    imgs = "\n".join(
        f'<img src="{object_src(page, i)}" width="{b.width}" height="{b.height}" '
        f'alt="object {i} of {n}, {size} bytes" id="o{i}">'
        for i, (size, b) in enumerate(zip(page.object_bytes, boxes, strict=True), start=1)
    )
    # The empty data: icon stops the browser from requesting /favicon.ico.
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(page.name)}</title>\n'
        '<link rel="icon" href="data:,">\n'
        f"<style>{_STYLE}</style></head>\n"
        f"<body><main>\n{imgs}\n</main></body></html>\n"
    )


def _write(path: Path, data: bytes) -> str:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


def build_page(page: PageSpec, out: Path) -> dict[str, object]:
    page_dir = out / page.name
    page_dir.mkdir(parents=True, exist_ok=True)
    boxes = layout.boxes_for(page.object_bytes)
    objects = []
    for pos, (size, box) in enumerate(zip(page.object_bytes, boxes, strict=True), start=1):
        try:
            data, pixels = jpeg.make(size, pos, _seed(page.name, pos, size), box)
        except jpeg.SizeUnreachable as e:
            raise jpeg.SizeUnreachable(
                f"page {page.name}, object {pos} of {len(boxes)}: {e} (the pixels of its "
                f"display box, {box.width}x{box.height}); a size with fewer or larger "
                "objects gives each one bytes enough for its box"
            ) from None
        assert len(data) == size
        name = f"o{pos}.jpg"
        objects.append(
            {
                "path": f"{page.name}/{name}",
                "position": pos,
                "bytes": size,
                "sha256": _write(page_dir / name, data),
                "pixels": [pixels.width, pixels.height],
                "display": [box.width, box.height],
                "delay_ms": page.delay_of(pos),
            }
        )
    html_bytes = render_html(page, boxes).encode()
    largest = max(page.object_bytes)
    return {
        "name": page.name,
        "model": page.model,
        "size": page.size,
        "path": f"{page.name}/index.html",
        "html_bytes": len(html_bytes),
        "html_sha256": _write(page_dir / "index.html", html_bytes),
        "object_bytes": page.total_bytes,
        "total_bytes": page.total_bytes + len(html_bytes),
        "lcp_candidates": [o["path"] for o in objects if o["bytes"] == largest],
        "objects": objects,
    }


def build(
    pages: Iterable[PageSpec],
    out: Path,
    units: Units,
    progress: Callable[[PageSpec], None] = lambda _p: None,
) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for page in pages:
        progress(page)
        entries.append(build_page(page, out))
    manifest = {
        "version": MANIFEST_VERSION,
        "units": units.value,
        "bytes_per_k": units.bytes_per_k,
        "viewport_min": [layout.CONTAINER_WIDTH + 16, layout.CONTAINER_HEIGHT + 16],
        "pages": entries,
    }
    path = out / MANIFEST
    _write(path, (json.dumps(manifest, indent=2) + "\n").encode())
    return path


def build_named(
    out: Path, page_names: list[str], registry: Registry, units: Units
) -> dict[str, dict[str, object]]:
    """Build the named pages (a session's) into `out`; the manifest entries by name."""
    specs = [registry.page_by_name(n, units) for n in dict.fromkeys(page_names)]
    manifest = json.loads(build(specs, out, units).read_text())
    return {p["name"]: p for p in manifest["pages"]}
