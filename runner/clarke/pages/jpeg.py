"""Real, decodable baseline JPEGs of an exact file size.

An object is drawn (a hue of its own, its number in large type, a seeded noise texture
whose strength sets how much the encoder has to keep), encoded at the highest JPEG
quality that stays within the size, and then filled up to the exact size with comment
(COM) segments placed right after the start-of-image marker. Decoders skip COM segments,
so the image is unchanged; the bytes on the wire are exactly the published size.
Everything is seeded, so the same inputs give the same bytes."""

from __future__ import annotations

import colorsys
import io
import math
import random

from PIL import Image, ImageDraw, ImageFont

from clarke.errors import InputError
from clarke.pages.layout import ASPECT, Box

SOI = b"\xff\xd8"
COM = b"\xff\xfe"
MAX_COM_PAYLOAD = 65533  # a segment's 2-byte length counts itself
MIN_COM_SEGMENT = 4  # marker + length, empty payload
BYTES_PER_PIXEL_GOAL = 1.2  # noise-textured JPEG at high quality keeps about this much
MAX_SIDE = 4000


class SizeUnreachable(InputError):
    """No JPEG of the object's pixel size fits in its bytes: a page's model asks for
    objects too small for the boxes its layout gives them."""


def _draw(box: Box, number: int, seed: int, noise: float) -> Image.Image:
    rng = random.Random(seed)
    hue = (number * 0.618033988749895) % 1.0  # golden-angle hues: neighbours differ
    r, g, b = (int(c * 255) for c in colorsys.hsv_to_rgb(hue, 0.55, 0.85))
    base = Image.new("RGB", (box.width, box.height), (r, g, b))
    draw = ImageDraw.Draw(base)
    font = ImageFont.load_default(size=max(10, box.height // 2))
    draw.text(
        (box.width / 2, box.height / 2),
        str(number),
        fill=(255, 255, 255),
        font=font,
        anchor="mm",
        stroke_width=max(1, box.height // 60),
        stroke_fill=(0, 0, 0),
    )
    texture = Image.frombytes("RGB", base.size, rng.randbytes(box.width * box.height * 3))
    return Image.blend(base, texture, noise)


def _encode(img: Image.Image, quality: int) -> bytes:
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=quality, optimize=False, progressive=False, subsampling=0)
    return out.getvalue()


def pad(jpeg: bytes, size: int, filler: bytes) -> bytes:
    """Insert COM segments after SOI so that the result is exactly `size` bytes."""
    missing = size - len(jpeg)
    if missing == 0:
        return jpeg
    if missing < MIN_COM_SEGMENT:
        raise SizeUnreachable(f"{missing} bytes short; a comment segment needs at least 4")
    segments = []
    while missing:
        seg = min(missing, MAX_COM_PAYLOAD + MIN_COM_SEGMENT)
        if 0 < missing - seg < MIN_COM_SEGMENT:  # leave room for a last, valid segment
            seg -= MIN_COM_SEGMENT
        payload_len = seg - MIN_COM_SEGMENT
        payload = (filler * (payload_len // max(1, len(filler)) + 1))[:payload_len]
        segments.append(COM + (payload_len + 2).to_bytes(2, "big") + payload)
        missing -= seg
    assert jpeg.startswith(SOI)
    return SOI + b"".join(segments) + jpeg[2:]


def make(size: int, number: int, seed: int, display: Box) -> tuple[bytes, Box]:
    """A JPEG of exactly `size` bytes showing `number`; its pixel size is at least the
    display box (so the browser never upscales it) and grows with the byte size."""
    pixels = max(display.area, size / BYTES_PER_PIXEL_GOAL)
    height = max(display.height, min(MAX_SIDE, math.ceil(math.sqrt(pixels / ASPECT))))
    box = Box(max(display.width, math.ceil(height * ASPECT)), height)
    filler = f"clarke object {number}, {size} bytes; ".encode()
    for noise in (0.35, 0.2, 0.1, 0.05, 0.0):
        img = _draw(box, number, seed, noise)
        lo, hi, best = 1, 95, None
        while lo <= hi:  # highest quality whose encoding leaves room to pad exactly
            q = (lo + hi) // 2
            data = _encode(img, q)
            room = size - len(data)
            if room == 0 or room >= MIN_COM_SEGMENT:
                best, lo = data, q + 1
            else:
                hi = q - 1
        if best is not None:
            return pad(best, size, filler), box
    raise SizeUnreachable(f"no {box.width}x{box.height} JPEG fits in {size} bytes")
