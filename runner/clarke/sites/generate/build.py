"""A planned page written as a clarke-site archive, and its composition beside the
figures it follows.

Every body is real: the document and iframes are HTML, stylesheets CSS with the
@font-face and background-image rules that ask for the fonts and CSS images, scripts
JavaScript that inserts scripts, stylesheets and images and fetches JSON (so a replay
that serves every request proves the browser ran them), images JPEG, fonts TrueType.
Each origin gets a placeholder address of its own in 198.18.0.0/15 (a replay places it
anew: clarke.sites.placement) and offers HTTP/1.1, /2 and /3 under a certificate for its
host. Nothing depends on the clock, so one seed always gives the same bytes."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from clarke.errors import InputError
from clarke.sites import archive, composition
from clarke.sites.archive import BODIES, Exchange, Origin, SiteArchive, Source, sha256_of
from clarke.sites.generate import content
from clarke.sites.generate.plan import Plan, Resource, plan
from clarke.sites.generate.statistics import TYPES, Statistics
from clarke.sites.store import new_archive_dir

PLACEHOLDER_NET = ipaddress.IPv4Network("198.18.0.0/15")
CONTENT_TYPES = {
    "html": "text/html; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "image": "image/jpeg",
    "font": "font/ttf",
    "other": "application/json",
}
TEXT = {"html", "css", "js", "other"}
# Helpers every script starts with: insert a script, a stylesheet, an image (once the
# body exists), fetch JSON; each counts what it did on window.__clarke.
JS_PRELUDE = (
    "(function(){var d=document,w=window;w.__clarke=w.__clarke||{ran:0,json:0};"
    "w.__clarke.ran++;"
    "function body(f){if(d.body)f();else d.addEventListener('DOMContentLoaded',f);}"
    "function s(u){var e=d.createElement('script');e.src=u;e.async=true;d.head.appendChild(e);}"
    "function c(u){var e=d.createElement('link');e.rel='stylesheet';e.href=u;"
    "d.head.appendChild(e);}"
    "function i(u){body(function(){var e=d.createElement('img');e.src=u;e.width=160;"
    "e.height=120;e.alt='';d.body.appendChild(e);});}"
    "function j(u){fetch(u,{mode:'cors',credentials:'omit'}).then(function(r){return r.json();})"
    ".then(function(){w.__clarke.json++;});}"
)
CALLS = {"js": "s", "css": "c", "image": "i", "other": "j"}


@dataclass
class Generated:
    path: Path
    archive: SiteArchive
    plan: Plan
    statistics: Statistics


def _children(p: Plan, r: Resource) -> list[Resource]:
    return [p.resources[i] for i in r.children]


def _document(p: Plan, r: Resource) -> content.Text:
    kids = _children(p, r)
    head = [
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>",
        '<meta name=viewport content="width=device-width,initial-scale=1">',
        f'<title>Generated site {p.seed}</title><link rel=icon href="data:,">',
    ]
    head += [f'<link rel=stylesheet href="{k.url}">' for k in kids if k.role == "head"]
    head += [f'<script src="{k.url}"></script>' for k in kids if k.role == "sync"]
    body = [f"</head><body><h1>Generated site {p.seed}</h1>"]
    # Text in each font (its stylesheet's class), a box for each CSS image.
    for font in p.of("font"):
        body.append(f'<p class="font-{font.index}">Text in font {font.index}.</p>')
    for image in p.of("image"):
        if image.role == "css":
            body.append(f'<div class="bg-{image.index}"></div>')
    for k in kids:
        if k.kind == "image":
            body.append(f'<img src="{k.url}" width=160 height=120 alt="image {k.index}">')
        elif k.kind == "html":
            body.append(f'<iframe src="{k.url}" width=300 height=150 title="embed"></iframe>')
        elif k.role in ("async", "defer"):
            body.append(f'<script {k.role} src="{k.url}"></script>')
    return content.Text(
        "\n".join(head + body) + "\n", "</body></html>\n", content.html_filler,
        lambda chars: f"<!--{chars}-->\n",
    )  # fmt: skip


def _iframe(r: Resource) -> content.Text:
    head = (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>Embed {r.index}</title></head><body><p>Embedded document {r.index}.</p>\n"
    )
    return content.Text(
        head, "</body></html>\n", content.html_filler, lambda chars: f"<!--{chars}-->\n"
    )


def _stylesheet(p: Plan, r: Resource) -> content.Text:
    rules = [f"/* stylesheet {r.index} */\nbody{{margin:0;line-height:1.4}}\n"]
    for k in _children(p, r):
        if k.kind == "font":
            rules.append(
                f'@font-face{{font-family:"Gen {k.index}";src:url("{k.url}") format("truetype");'
                f'font-display:swap}}\n.font-{k.index}{{font-family:"Gen {k.index}",sans-serif}}\n'
            )
        elif k.kind == "image":
            rules.append(
                f'.bg-{k.index}{{background-image:url("{k.url}");background-size:cover;'
                "width:160px;height:120px}\n"
            )
    return content.Text("".join(rules), "", content.css_filler, lambda c: f"/*{c}*/\n")


def _script(p: Plan, r: Resource) -> content.Text:
    calls = "".join(f'{CALLS[k.kind]}("{k.url}");' for k in _children(p, r))
    head = f"/* script {r.index} */\n{JS_PRELUDE}{calls}}})();\n"
    return content.Text(head, "", content.js_filler, lambda c: f"/*{c}*/\n")


def _json(r: Resource) -> content.Text:
    return content.Text(
        f'{{"resource":{r.index},"items":[',
        '{"end":true}]}\n',
        content.json_filler,
        lambda chars: f'{{"pad":"{chars}"}},',
    )


def body_of(p: Plan, r: Resource, coding: str | None) -> bytes:
    seed = p.seed * 1_000_003 + r.index
    if r.kind == "image":
        return content.jpeg_image(r.size, r.index, seed)
    if r.kind == "font":
        return content.font(r.size, f"Gen {r.index}", seed)
    if r.role == "document":
        text = _document(p, r)
    elif r.kind == "html":
        text = _iframe(r)
    elif r.kind == "css":
        text = _stylesheet(p, r)
    elif r.kind == "js":
        text = _script(p, r)
    else:
        text = _json(r)
    return content.text_body(text, r.size, coding, seed)


def _origins(p: Plan) -> list[Origin]:
    hosts = p.first_party_hosts + p.third_party_hosts
    return [
        Origin(
            host=h,
            address=str(PLACEHOLDER_NET[i + 1]),
            protocols=list(archive.PROTOCOLS),
            certificate_names=[h],
        )
        for i, h in enumerate(hosts)
    ]


def generate(stats: Statistics, seed: int, out: Path, statistics_file: str = "") -> Generated:
    """A site following `stats` for `seed`, written as a new archive in `out` (built in
    a scratch directory beside it and moved in place)."""
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: exists and is not empty (generate writes a new archive)")
    p = plan(stats, seed)
    with new_archive_dir(out) as scratch:
        (scratch / BODIES).mkdir()
        exchanges = []
        for r in sorted(p.resources, key=lambda x: (x.depth, x.index)):
            coding = stats.text_coding if r.kind in TEXT else None
            data = body_of(p, r, coding)
            digest = sha256_of(data)
            (scratch / BODIES / digest).write_bytes(data)
            headers = [("content-type", CONTENT_TYPES[r.kind])]
            # CORS for the fonts and the fetches (origin's replay adds Timing-Allow-Origin).
            headers += [("access-control-allow-origin", "*"), ("cache-control", "max-age=3600")]
            exchanges.append(
                Exchange(
                    method="GET", url=r.url, status=200, headers=headers,
                    content_encoding=coding, body=digest, size=len(data),
                )
            )  # fmt: skip
        site = SiteArchive(
            name=f"generated-{seed}",
            start_url=p.document.url,
            source=Source(
                kind="generator",
                tool=f"clarke site generate --seed {seed} ({stats.name})",
                file=statistics_file,
            ),
            origins=_origins(p),
            exchanges=exchanges,
        )
        archive.write(scratch, site)
    return Generated(out, site, p, stats)


@dataclass(frozen=True)
class Row:
    figure: str
    target: float
    produced: float
    kind: str  # published, derived, assumption


def side_by_side(g: Generated) -> list[Row]:
    """The figures the site follows beside what it has (bytes as sent, KB of the
    statistics' kilobyte)."""
    s, p = g.statistics, g.plan
    c = composition.of(archive.read(g.path))
    kb = s.kilobyte_bytes
    rows = []
    for t in TYPES:
        f = s.types.of(t)
        rows.append(Row(f"{t} requests", f.requests.value, c.rows[t].requests, f.requests.kind))
        rows.append(
            Row(f"{t} KB", f.kilobytes.value, c.rows[t].transfer_bytes / kb, f.kilobytes.kind)
        )
    total = c.total
    rows.append(Row("total requests", s.total.requests.value, total.requests, "published"))
    rows.append(Row("total KB", s.total.kilobytes.value, total.transfer_bytes / kb, "published"))
    rows.append(
        Row(
            "third-party requests",
            s.third_party_requests.value,
            c.third_party_requests,
            s.third_party_requests.kind,
        )
    )
    origins = s.first_party_origins.value + s.third_party_origins.value
    rows.append(Row("origins", origins, c.origins, "assumption"))
    rows.append(Row("dependency depth", s.dependency_depth.value, p.depth(), "published"))
    blocking_css = sum(1 for r in p.of("css") if r.role == "head")
    blocking_js = sum(1 for r in p.of("js") if r.role == "sync")
    rows.append(Row("render-blocking CSS", s.render_blocking_css.value, blocking_css, "assumption"))
    rows.append(
        Row("render-blocking scripts", s.render_blocking_scripts.value, blocking_js, "assumption")
    )
    return rows


def table(rows: list[Row]) -> str:
    lines = [f"{'figure':<26}{'target':>10}{'produced':>10}  kind"]
    for r in rows:
        lines.append(f"{r.figure:<26}{r.target:>10.0f}{r.produced:>10.0f}  {r.kind}")
    return "\n".join(lines)
