"""Where each object sits on the page, so that the largest object is the Largest
Contentful Paint element.

Each object is shown as a 4:3 box whose area is proportional to its byte size. The boxes
flow left to right in page order in a container CONTAINER_WIDTH px wide (CSS flex-wrap,
GAP px apart). The common scale is the largest at which the whole page fits in
CONTAINER_WIDTH x CONTAINER_HEIGHT, so every object is entirely inside the viewport of a
1280x720 or larger window: LCP counts only the visible part of an element, so nothing may
be clipped. This module predicts the flex layout to choose that scale."""

from __future__ import annotations

import math
from dataclasses import dataclass

CONTAINER_WIDTH = 1200
CONTAINER_HEIGHT = 640
GAP = 4
ASPECT = 4 / 3  # width / height


@dataclass(frozen=True)
class Box:
    width: int
    height: int

    @property
    def area(self) -> int:
        return self.width * self.height


def _box(area: float) -> Box:
    height = max(1, math.floor(math.sqrt(area / ASPECT)))
    return Box(max(1, math.floor(height * ASPECT)), height)


def _height_of_flow(boxes: list[Box]) -> int:
    """Height of a flex-wrap row flow of the boxes (align-items: flex-start)."""
    total, row_width, row_height = 0, 0, 0
    for b in boxes:
        needed = b.width if row_width == 0 else row_width + GAP + b.width
        if row_width and needed > CONTAINER_WIDTH:
            total += row_height + GAP
            row_width, row_height = b.width, b.height
        else:
            row_width, row_height = needed, max(row_height, b.height)
    return total + row_height


def boxes_for(object_bytes: tuple[int, ...] | list[int]) -> list[Box]:
    """Display boxes, in page order, with area proportional to bytes."""
    largest = max(object_bytes)
    lo, hi = 0.0, float(CONTAINER_WIDTH * CONTAINER_HEIGHT) / largest
    for _ in range(60):  # bisection on the px²-per-byte scale
        mid = (lo + hi) / 2
        boxes = [_box(b * mid) for b in object_bytes]
        fits = all(b.width <= CONTAINER_WIDTH for b in boxes) and (
            _height_of_flow(boxes) <= CONTAINER_HEIGHT
        )
        lo, hi = (mid, hi) if fits else (lo, mid)
    return [_box(b * lo) for b in object_bytes]
