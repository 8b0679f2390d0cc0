"""A seeded plan of a generated page: every request's type, transferred size, origin,
and what asks for it. The same statistics and seed always give the same plan.

Each type's request count and bytes are drawn around the statistics' medians
(median x exp(N(0, variation))), and the bytes are split over the requests by
log-normal shares. What asks for what:

    document            the page (www.<site>.test/)
    html  (iframes)     the document (an <iframe>)
    css                 the document's <head> (render-blocking), or a script
    js                  the document's <head> (sync, render-blocking), <body> (async or
                        defer), or a script that inserts it (the inclusion chains)
    font                a stylesheet's @font-face
    image               the document (<img>), a stylesheet (background-image), or a
                        script (an <img> it adds)
    other (JSON)        a script's fetch()

The deepest chain is document -> async script -> inserted script -> ... -> an image or
JSON, `dependency_depth` requests below the document. Third-party requests go to the
third-party origins by the published shares of third-party content types."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from clarke.sites.generate.statistics import TYPES, Statistics

VENDORS = (
    "tagmanager", "analytics", "adnetwork", "fontcdn", "libcdn", "imagecdn", "social",
    "consent", "video", "chat", "maps", "reviews", "search", "payments", "abtesting",
)  # fmt: skip
# The least a body of each type can be (the HTML carries its tags, a JPEG its headers).
MIN_BYTES = {"html": 700, "css": 120, "js": 200, "image": 1500, "font": 3000, "other": 60}
EXTENSIONS = {"css": "css", "js": "js", "image": "jpg", "font": "ttf", "other": "json"}
FOLDERS = {
    "html": "embed",
    "css": "css",
    "js": "js",
    "image": "img",
    "font": "fonts",
    "other": "api",
}


@dataclass
class Resource:
    index: int  # 0: the document
    kind: str  # html, css, js, image, font, other
    role: str  # document, iframe, head, inserted, sync, async, defer, html, css, script, fetch
    size: int  # bytes as sent (the target)
    parent: int | None  # the resource that asks for it (None: the document itself)
    depth: int = 0  # requests below the document
    third_party: bool = False
    host: str = ""
    children: list[int] = field(default_factory=list)

    @property
    def path(self) -> str:
        if self.role == "document":
            return "/"
        ext = EXTENSIONS.get(self.kind, "html")
        return f"/{FOLDERS[self.kind]}/{self.kind}-{self.index}.{ext}"

    @property
    def url(self) -> str:
        return f"https://{self.host}{self.path}"


@dataclass
class Plan:
    seed: int
    site: str  # the site's registrable name, e.g. shop-1 (hosts are *.shop-1.test)
    resources: list[Resource]
    first_party_hosts: list[str]
    third_party_hosts: list[str]

    def of(self, kind: str) -> list[Resource]:
        return [r for r in self.resources if r.kind == kind]

    @property
    def document(self) -> Resource:
        return self.resources[0]

    def depth(self) -> int:
        return max(r.depth for r in self.resources)


def _drawn(rng: random.Random, median: float, variation: float) -> float:
    return median * math.exp(rng.gauss(0.0, variation)) if variation else median


def _split(rng: random.Random, total: float, n: int, spread: float, least: int) -> list[int]:
    """`total` bytes over `n` requests by log-normal shares, none below `least`."""
    if n == 0:
        return []
    weights = [rng.lognormvariate(0.0, spread) if spread else 1.0 for _ in range(n)]
    free = max(0.0, total - least * n)
    return [least + round(free * w / sum(weights)) for w in weights]


class _Builder:
    def __init__(self, stats: Statistics, seed: int) -> None:
        self.stats, self.rng = stats, random.Random(seed)
        self.resources: list[Resource] = []

    def add(self, kind: str, role: str, size: int, parent: Resource | None) -> Resource:
        r = Resource(len(self.resources), kind, role, size, parent.index if parent else None)
        r.depth = parent.depth + 1 if parent else 0
        if parent:
            parent.children.append(r.index)
        self.resources.append(r)
        return r

    def counts(self) -> dict[str, int]:
        s, rng = self.stats, self.rng
        least = {
            "html": 1,
            "css": s.render_blocking_css.count,
            "js": max(1, s.render_blocking_scripts.count + s.script_inserted_scripts.count),
            "image": s.css_images.count + s.script_images.count,
            "font": 0,
            "other": 0,
        }
        counts = {}
        for t in TYPES:
            median = s.types.of(t).requests.value
            counts[t] = max(least[t], round(_drawn(rng, median, s.variation.value)))
        if counts["font"] and not counts["css"]:
            counts["css"] = 1
        if counts["js"] <= s.render_blocking_scripts.count:  # a script to start the chains
            counts["js"] = s.render_blocking_scripts.count + 1
        return counts

    def sizes(self, counts: dict[str, int]) -> dict[str, list[int]]:
        s, rng, kb = self.stats, self.rng, self.stats.kilobyte_bytes
        out = {}
        for t in TYPES:
            total = _drawn(rng, s.types.of(t).kilobytes.value * kb, s.variation.value)
            out[t] = _split(rng, total, counts[t], s.size_spread.value, MIN_BYTES[t])
        return out


def plan(stats: Statistics, seed: int) -> Plan:
    """The seeded plan of a page following `stats`."""
    b = _Builder(stats, seed)
    counts = b.counts()
    sizes = b.sizes(counts)
    s = stats
    html, css, js, images, fonts, other = (sizes[t] for t in TYPES)
    # The document gets the largest HTML size: it carries every tag.
    html.sort(reverse=True)
    doc = b.add("html", "document", html[0], None)
    for size in html[1:]:
        b.add("html", "iframe", size, doc)
    # Scripts: sync in <head>, one loader that starts the chains, async/defer in <body>,
    # and the inserted ones, chained below the loader up to depth - 1.
    depth = s.dependency_depth.count
    n_sync, n_inserted = s.render_blocking_scripts.count, s.script_inserted_scripts.count
    n_inserted = min(n_inserted, len(js) - n_sync - 1)
    scripts = [b.add("js", "sync", js[i], doc) for i in range(n_sync)]
    loader = b.add("js", "async", js[n_sync], doc)
    body_scripts = [
        b.add("js", "defer" if i % 2 else "async", size, doc)
        for i, size in enumerate(js[n_sync + 1 + n_inserted :])
    ]
    inserted: list[Resource] = []
    parent = loader
    for size in js[n_sync + 1 : n_sync + 1 + n_inserted]:
        if parent.depth + 1 >= depth:  # the chain is as deep as it may go: branch
            parent = loader
        child = b.add("js", "inserted", size, parent)
        inserted.append(child)
        parent = child
    scripts += [loader, *body_scripts, *inserted]
    # Stylesheets: render-blocking in <head>; the others inserted by a depth-1 script.
    n_head = s.render_blocking_css.count
    sheets = [b.add("css", "head", size, doc) for size in css[:n_head]]
    shallow = [x for x in scripts if x.depth < depth - 1] or [loader]
    for i, size in enumerate(css[n_head:]):
        sheets.append(b.add("css", "inserted", size, shallow[i % len(shallow)]))
    for i, size in enumerate(fonts):
        b.add("font", "css", size, sheets[i % len(sheets)])
    # Images: the chain's deepest script adds one (the page reaches `depth`), the other
    # script images come from scripts that may still ask; CSS backgrounds; <img>.
    asking = [x for x in scripts if x.depth < depth]
    deepest = max(asking, key=lambda x: (x.depth, x.index))
    leaves = [deepest] + [x for x in asking if x is not deepest]
    n_css_img, n_script_img = s.css_images.count, s.script_images.count
    for i, size in enumerate(images[:n_script_img]):
        b.add("image", "script", size, leaves[i % len(leaves)])
    for i, size in enumerate(images[n_script_img : n_script_img + n_css_img]):
        b.add("image", "css", size, sheets[i % len(sheets)])
    for size in images[n_script_img + n_css_img :]:
        b.add("image", "html", size, doc)
    start = 0 if not n_script_img else 1  # the deepest script asks for JSON when no image
    for i, size in enumerate(other):
        b.add("other", "fetch", size, leaves[(start + i) % len(leaves)])
    site = f"site-{seed}"
    result = Plan(seed, site, b.resources, [], [])
    _third_parties(result, s, b.rng)
    _hosts(result, s, b.rng)
    return result


def _third_parties(p: Plan, s: Statistics, rng: random.Random) -> None:
    """Mark the third-party requests: their number drawn around the published figure,
    split by the published shares of scripts, images and HTML, the rest over CSS,
    fonts and JSON; within a type, what a third party would serve first (the inserted
    scripts, the scripts' images, the inserted stylesheets)."""
    candidates = {t: [r for r in p.of(t) if r.role != "document"] for t in TYPES}
    preference = {
        "js": ("inserted", "async", "defer", "sync"),
        "image": ("script", "html", "css"),
        "css": ("inserted", "head"),
        "html": ("iframe",),
        "font": ("css",),
        "other": ("fetch",),
    }
    for t, order in preference.items():

        def rank(r: Resource, order: tuple[str, ...] = order) -> tuple[int, int]:
            return order.index(r.role), r.index

        candidates[t].sort(key=rank)
    wanted = min(
        sum(len(c) for c in candidates.values()),
        round(_drawn(rng, s.third_party_requests.value, s.variation.value)),
    )
    shares = s.third_party_shares
    quota = {t: round(wanted * getattr(shares, t).value / 100) for t in ("js", "image", "html")}
    quota = {t: min(q, len(candidates[t])) for t, q in quota.items()}
    rest_types = ("css", "font", "other")
    rest = wanted - sum(quota.values())
    pool = sum(len(candidates[t]) for t in rest_types) or 1
    for t in rest_types:
        quota[t] = min(len(candidates[t]), round(rest * len(candidates[t]) / pool))
    short = wanted - sum(quota.values())
    for t in ("js", "image", "other", "css", "font", "html"):  # what is left, where room is
        room = len(candidates[t]) - quota[t]
        take = max(0, min(room, short))
        quota[t] += take
        short -= take
    for t in TYPES:
        for r in candidates[t][: quota[t]]:
            r.third_party = True
    # A script's children from a third party come from third parties too when quota
    # allows; the document and the head's blocking resources stay first-party otherwise.


def _hosts(p: Plan, s: Statistics, rng: random.Random) -> None:
    """First-party hosts www, static, img, cdn2.. of the site's domain; third-party hosts
    one per vendor domain. Every host serves at least one request."""
    names = ["www", "static", "img"] + [f"cdn{i}" for i in range(2, 60)]
    first = [f"{n}.{p.site}.test" for n in names[: s.first_party_origins.count]]
    vendors = list(VENDORS) + [f"vendor{i}" for i in range(len(VENDORS), 60)]
    third_all = [f"www.{v}.test" for v in vendors[: s.third_party_origins.count]]
    ours = [r for r in p.resources if not r.third_party]
    theirs = [r for r in p.resources if r.third_party]
    for r in ours:
        if r.role == "document" or r.kind == "other" or len(first) == 1:
            r.host = first[0]
        elif r.kind == "image" and len(first) > 2:
            r.host = first[2 + r.index % (len(first) - 2)]
        else:
            r.host = first[1]
    third = third_all[: len(theirs)]
    order = list(range(len(theirs)))
    rng.shuffle(order)
    for i, k in enumerate(order):
        theirs[k].host = third[i % len(third)] if third else first[0]
    used = {r.host for r in p.resources}
    p.first_party_hosts = [h for h in first if h in used]
    p.third_party_hosts = [h for h in third if h in used]
