"""The two families of paint-like metrics a report can be drawn with (docs/metrics.md):

    w3c       the W3C paint metrics Firefox reports: fcp_ms, lcp_ms
    objects   the published studies' object-completion definitions, computed from the
              browser's resource timings: first_object_ms, largest_object_ms

The GEO study [A] ran a Firefox without the Largest Contentful Paint API and defined
LCP as "the time when the largest object is loaded in the browser"; on Clarke's pages
Firefox paints a partly received JPEG, so the W3C figures and the study's measure
different moments. PLT (the load event) is the same in both families."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

FAMILIES: Final[dict[str, tuple[str, ...]]] = {
    "w3c": ("plt_ms", "fcp_ms", "lcp_ms"),
    "objects": ("plt_ms", "first_object_ms", "largest_object_ms"),
}
DEFAULT_FAMILY: Final = "w3c"

LABEL: Final = {
    "plt_ms": "PLT",
    "fcp_ms": "FCP",
    "lcp_ms": "LCP",
    "first_object_ms": "first object",
    "largest_object_ms": "largest object",
    "last_object_ms": "last object",
}

DESCRIPTION: Final = {
    "w3c": "W3C paint metrics as Firefox reports them (first-contentful-paint, the last "
    "largest-contentful-paint candidate)",
    "objects": "object-completion metrics, the GEO study's definitions: the first object's "
    "and the largest object's responseEnd in the browser's resource timings",
}


def number(v: object) -> float | None:
    """`v` as a float if it is a JSON number (not a boolean), else None."""
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def timing_entries(raw: Mapping[str, object]) -> list[Mapping[str, object]]:
    """A load's navigation entry (where the browser gave one) and its resource timing
    entries, each an object, as the browser's page script reported them."""
    resources = raw.get("resources")
    found = [raw.get("navigation"), *(resources if isinstance(resources, list) else [])]
    return [e for e in found if isinstance(e, dict)]


def object_metrics(resources: Iterable[Mapping[str, object]]) -> dict[str, float]:
    """first_object_ms, largest_object_ms and last_object_ms of a page's resource
    timing entries (its objects; the document itself is the navigation entry):

    first_object_ms    the earliest responseEnd
    largest_object_ms  the responseEnd of the largest object (decoded body bytes);
                       where several share the largest size, the last of them to end
    last_object_ms     the latest responseEnd

    An entry without a positive responseEnd counts for none of them; one without a
    size does not count for the largest object. Empty when no entry counts."""
    ends: list[tuple[float, float]] = []  # (responseEnd, size; 0 when unknown)
    for r in resources:
        end = number(r.get("responseEnd"))
        if end is None or end <= 0:
            continue
        size = number(r.get("decodedBodySize")) or number(r.get("encodedBodySize")) or 0.0
        ends.append((end, size))
    if not ends:
        return {}
    out = {
        "first_object_ms": min(e for e, _ in ends),
        "last_object_ms": max(e for e, _ in ends),
    }
    largest = max(s for _, s in ends)
    if largest > 0:
        out["largest_object_ms"] = max(e for e, s in ends if s == largest)
    return out


def metrics_of_record(
    metrics: Mapping[str, float], resources: Iterable[Mapping[str, object]]
) -> dict[str, float]:
    """A record's metrics with the object metrics filled in from its stored resource
    timings (its details' `resources`) where the record predates them."""
    if all(k in metrics for k in ("first_object_ms", "largest_object_ms", "last_object_ms")):
        return dict(metrics)
    return {**object_metrics(resources), **metrics}
