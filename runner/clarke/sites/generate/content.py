"""Real bodies of a given size as sent: HTML, CSS, JavaScript and JSON that browsers
parse and run, JPEG images (clarke.pages.jpeg) and TrueType fonts.

A text body is what the page needs (its tags, rules, calls) plus seeded filler of the
same language (paragraphs, unused rules, functions that are defined but not called,
data), then a comment (or a JSON string) of seeded characters that brings the body's
size *as sent* (gzip-coded as the replay sends it, clarke.sites.composition.encoded)
to within a few bytes of the target: the filler is found by bisection on its length,
then the comment's. A JPEG is exact (COM segments). A font is a real TrueType font of
seeded glyph outlines (fontTools' FontBuilder) whose size is brought close by the
number of glyphs and the points of the last one: browsers' font sanitizers accept it."""

from __future__ import annotations

import base64
import io
import random
from collections.abc import Callable
from dataclasses import dataclass

from fontTools.fontBuilder import FontBuilder
from fontTools.pens.ttGlyphPen import TTGlyphPen

from clarke.pages import jpeg
from clarke.pages.layout import Box
from clarke.sites.composition import encoded

WORDS = [
    "satellite",
    "link",
    "page",
    "request",
    "origin",
    "latency",
    "window",
    "stream",
    "packet",
    "frame",
    "browser",
    "render",
    "script",
    "style",
    "image",
    "font",
    "cache",
    "server",
    "client",
    "gateway",
    "terminal",
    "orbit",
    "beam",
    "signal",
    "queue",
    "route",
    "handshake",
    "session",
    "record",
    "content",
    "layout",
    "paint",
]
IMAGE_BOX = Box(160, 120)


@dataclass(frozen=True)
class Text:
    """A text body: `head` + filler + pad + `tail`; `filler(rng, n)` writes about n
    bytes of filler, `pad(chars)` wraps the sizing characters in a comment or string."""

    head: str
    tail: str
    filler: Callable[[random.Random, int], str]
    pad: Callable[[str], str]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _filled(rng: random.Random, n: int, line: Callable[[random.Random], str]) -> str:
    """Lines drawn from `rng` until they hold at least n characters."""
    out: list[str] = []
    size = 0
    while size < n:
        drawn = line(rng)
        out.append(drawn)
        size += len(drawn)
    return "".join(out)


def _html_line(rng: random.Random) -> str:
    return f'<p class="t{rng.randrange(40)}">{_words(rng, rng.randrange(8, 30))}.</p>\n'


def _css_line(rng: random.Random) -> str:
    k = rng.getrandbits(24)
    return (
        f".u{k:06x}{{margin:{rng.randrange(40)}px {rng.randrange(40)}px;"
        f"color:#{rng.getrandbits(24):06x};padding:{rng.randrange(24)}px;"
        f"border-radius:{rng.randrange(12)}px}}\n"
    )


def _js_line(rng: random.Random) -> str:
    k = rng.getrandbits(24)
    if rng.random() < 0.5:
        return (
            f"function f{k:06x}(a,b){{var t=a*{rng.randrange(1, 999)}+b;"
            f"return t^{rng.randrange(1, 65535)};}}\n"
        )
    data = ",".join(str(rng.randrange(10000)) for _ in range(rng.randrange(4, 16)))
    return f"var d{k:06x}=[{data}];\n"


def _json_line(rng: random.Random) -> str:
    return (
        f'{{"id":{rng.getrandbits(20)},"name":"{_words(rng, 3)}",'
        f'"value":{rng.randrange(100000) / 100}}},\n'
    )


def html_filler(rng: random.Random, n: int) -> str:
    return _filled(rng, n, _html_line)


def css_filler(rng: random.Random, n: int) -> str:
    return _filled(rng, n, _css_line)


def js_filler(rng: random.Random, n: int) -> str:
    return _filled(rng, n, _js_line)


def json_filler(rng: random.Random, n: int) -> str:
    return _filled(rng, n, _json_line)


def _pad_chars(rng: random.Random, n: int) -> str:
    """n seeded characters of base32's alphabet (letters and digits: safe in a comment
    and a JSON string, and they do not compress much)."""
    return base64.b32encode(rng.randbytes(n * 5 // 8 + 5)).decode()[:n]


def text_body(text: Text, target: int, coding: str | None, seed: int) -> bytes:
    """`text` filled so that its bytes as sent in `coding` come as close to `target` as
    they can without going over (never below what the page needs)."""
    rng = random.Random(seed)
    sent_empty = len(encoded(f"{text.head}{text.tail}".encode(), coding))
    if sent_empty >= target:
        return f"{text.head}{text.tail}".encode()
    # Filler written once, long enough for any coding (text compresses < 12 times here),
    # and cut at a line's end; the pad's characters likewise.
    filler = text.filler(rng, 12 * target)
    ends = [i + 1 for i, ch in enumerate(filler) if ch == "\n"]
    chars = _pad_chars(rng, min(2 * target, 16384))

    def body(lines: int, pad_chars: int) -> bytes:
        cut = filler[: ends[lines - 1]] if lines else ""
        pad = text.pad(chars[:pad_chars]) if pad_chars else ""
        return f"{text.head}{cut}{pad}{text.tail}".encode()

    def sent(data: bytes) -> int:
        return len(encoded(data, coding))

    def largest(fits: Callable[[int], bool], hi: int) -> int:
        lo = 0
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    margin = 96  # room left for the pad to bring the size up
    lines = largest(lambda n: sent(body(n, 0)) <= target - margin, len(ends))
    pad = largest(lambda k: sent(body(lines, k)) <= target, len(chars))
    return body(lines, pad)


def jpeg_image(size: int, number: int, seed: int) -> bytes:
    data, _ = jpeg.make(size, number, seed, IMAGE_BOX)
    return data


def _glyph(rng: random.Random, points: int) -> object:
    pen = TTGlyphPen(None)
    pen.moveTo((rng.randrange(50, 950), rng.randrange(0, 700)))
    for _ in range(max(2, points) - 1):
        pen.lineTo((rng.randrange(50, 950), rng.randrange(0, 700)))
    pen.closePath()
    return pen.glyph()


def _font(family: str, seed: int, glyphs: int, last_points: int) -> bytes:
    rng = random.Random(seed)
    names = [".notdef", "space"] + [f"g{i}" for i in range(glyphs)]
    fb = FontBuilder(1000, isTTF=True)
    fb.setupGlyphOrder(names)
    # Printable ASCII and then Latin-1 and onwards: each code point one glyph.
    codes = [c for c in range(0x21, 0x21 + glyphs + 200) if not 0x7F <= c < 0xA1][:glyphs]
    cmap = {0x20: "space"} | {c: f"g{i}" for i, c in enumerate(codes)}
    fb.setupCharacterMap(cmap)
    outlines = {".notdef": _glyph(rng, 4), "space": TTGlyphPen(None).glyph()}
    for i in range(glyphs):
        outlines[f"g{i}"] = _glyph(rng, last_points if i == glyphs - 1 else rng.randrange(6, 24))
    fb.setupGlyf(outlines)
    fb.setupHorizontalMetrics({n: (1000, 0) for n in names})
    fb.setupHorizontalHeader(ascent=800, descent=-200)
    fb.setupNameTable({"familyName": family, "styleName": "Regular"})
    fb.setupOS2(sTypoAscender=800, usWinAscent=800, usWinDescent=200)
    fb.setupPost()
    fb.setupHead(unitsPerEm=1000, created=0, modified=0)
    fb.font.recalcTimestamp = False  # the same seed, the same bytes
    out = io.BytesIO()
    fb.save(out)
    return out.getvalue()


def font(size: int, family: str, seed: int) -> bytes:
    """A TrueType font named `family` of about `size` bytes (never over it, unless the
    smallest font is larger)."""
    built: dict[tuple[int, int], bytes] = {}

    def make(glyphs: int, last_points: int) -> bytes:
        if (glyphs, last_points) not in built:
            built[glyphs, last_points] = _font(family, seed, glyphs, last_points)
        return built[glyphs, last_points]

    small, large = len(make(32, 6)), len(make(96, 6))
    per_glyph = max(1.0, (large - small) / 64)
    glyphs = max(1, 32 + int((size - small) / per_glyph))
    while glyphs > 1 and len(make(glyphs, 6)) > size:
        glyphs = max(1, glyphs - max(1, int((len(make(glyphs, 6)) - size) / per_glyph)))
    while len(make(glyphs + 1, 6)) <= size:
        glyphs += 1
    lo, hi = 6, 6 + max(0, (size - len(make(glyphs, 6))) // 2)
    while lo < hi:  # then the last glyph's points fill what is left
        mid = (lo + hi + 1) // 2
        if len(make(glyphs, mid)) <= size:
            lo = mid
        else:
            hi = mid - 1
    return make(glyphs, lo)
