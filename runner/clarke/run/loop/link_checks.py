"""When the link is measured: before a profile's first run and right after its last, so
that every profile has a before and an after check around its runs. Pure: it only reads
the plan's runs, which of them are done, and which checks earlier invocations made.

    with_link_checks(runs, done, checked) -> [LinkCheck(geo, before), run, run, ...,
                                      LinkCheck(geo, after), LinkCheck(leo, before), ...]

Each stretch of consecutive runs on one profile gets its own pair. A stretch whose runs
are all done gets none, unless an earlier invocation checked it before and never after
(it was stopped between its last run and that check): then the after check alone."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby

from clarke.campaign.plan import Run


@dataclass(frozen=True)
class LinkCheck:
    profile: str
    phase: str  # before | after


Step = Run | LinkCheck


def with_link_checks(
    runs: Sequence[Run], done: Iterable[str], checked: Iterable[tuple[str, str]] = ()
) -> list[Step]:
    done, checked = set(done), set(checked)
    steps: list[Step] = []
    for profile, stretch in groupby(runs, key=lambda r: r.cell.link):
        pending = [r for r in stretch if r.run_id not in done]
        if pending:
            steps += [LinkCheck(profile, "before"), *pending, LinkCheck(profile, "after")]
        elif (profile, "before") in checked and (profile, "after") not in checked:
            steps.append(LinkCheck(profile, "after"))
    return steps
