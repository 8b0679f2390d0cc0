"""Where a load's time goes: named phases timed on the monotonic clock, in the order
they ran (`clarke bench load --breakdown`, each record's details.phases_ms)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Phases:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Times the block; a phase run twice adds up."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.monotonic() - start) * 1000
