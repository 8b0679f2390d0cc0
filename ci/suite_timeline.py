"""Where a pytest phase's time went, from the timeline tests/conftest.py writes when
CLARKE_TEST_TIMELINE names a file (ci/test.sh sets it per phase):

    python ci/suite_timeline.py FILE [--last N]

prints, per worker, how long it ran tests and how long before the phase's end its last
test ended (a worker idle at the end is time a better order would have saved), then the
N tests that ended last, each with its worker, start and length."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Span:
    test: str
    worker: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def read(path: Path) -> list[Span]:
    spans = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            d = json.loads(line)
            spans.append(Span(str(d["test"]), str(d["worker"]), d["start"], d["end"]))
        except (ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"{path}:{number}: not a timeline line ({e})") from None
    return spans


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def summary(spans: list[Span], last: int) -> str:
    if not spans:
        return "no tests in the timeline"
    t0, t1 = min(s.start for s in spans), max(s.end for s in spans)
    lines = [f"{len(spans)} tests in {_clock(t1 - t0)}; per worker: busy, idle at the end"]
    for worker in sorted({s.worker for s in spans}):
        mine = [s for s in spans if s.worker == worker]
        busy = sum(s.seconds for s in mine)
        idle = t1 - max(s.end for s in mine)
        lines.append(
            f"  {worker:>6}: {len(mine):4d} tests, {_clock(busy)} busy, {_clock(idle)} idle"
        )
    lines.append(f"the {last} that ended last (start after the phase's, length):")
    for s in sorted(spans, key=lambda s: s.end)[-last:]:
        lines.append(f"  {s.worker:>6} +{_clock(s.start - t0)} {s.seconds:6.0f} s  {s.test}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline", type=Path)
    parser.add_argument("--last", type=int, default=8)
    args = parser.parse_args()
    if not args.timeline.is_file():
        sys.exit(f"{args.timeline}: no such timeline (was CLARKE_TEST_TIMELINE set?)")
    print(summary(read(args.timeline), args.last))


if __name__ == "__main__":
    main()
