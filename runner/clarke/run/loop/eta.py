"""How long a campaign has left: its runs still to do at the time a run has taken so far,
plus its link checks still to do at the time a check has taken.

A full link check measures the link for about a minute, before and after each link
point's runs, so a study that sweeps many points spends a large share of its time in
them ([C]'s shards: nine points, 110 to 145 s between two). A rate of finished runs alone, as a
progress bar keeps it, leaves that out and promises a shard in a fraction of its time."""

from __future__ import annotations

import time
from collections.abc import Callable


class TimeLeft:
    """Fed as the loop goes (a run finished, a check begun and ended); `seconds` is the
    estimate, None until a run has finished."""

    def __init__(self, runs: int, checks: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.runs_left, self.checks_left = runs, checks
        self._clock = clock
        self._mark = clock()  # the end of the last step timed
        self._check_began: float | None = None
        self._run_s = self._check_s = 0.0
        self._runs = self._checks = 0

    def passed_over(self) -> None:
        """A run not to be made here (done before, or its cell no longer needs it)."""
        self.runs_left -= 1

    def check_began(self) -> None:
        self._check_began = self._clock()

    def check_ended(self) -> None:
        now = self._clock()
        if self._check_began is not None:
            self._check_s += now - self._check_began
            self._checks += 1
            self.checks_left = max(self.checks_left - 1, 0)
        self._check_began, self._mark = None, now

    def run_ended(self) -> None:
        """A run's last attempt was recorded: its time is since the last step ended."""
        now = self._clock()
        self._run_s += now - self._mark
        self._runs += 1
        self.runs_left = max(self.runs_left - 1, 0)
        self._mark = now

    def seconds(self) -> float | None:
        if not self._runs:
            return None
        per_check = self._check_s / self._checks if self._checks else 0.0
        return self.runs_left * self._run_s / self._runs + self.checks_left * per_check
