"""How big a link schedule may be: one setting, read by every reader of schedules and
by the role agents, so that what validates is what a testbed takes.

- At most `max_steps()` steps (default DEFAULT_MAX_STEPS; CLARKE_MAX_SCHEDULE_STEPS
  raises it, up to CEILING_STEPS). A schedule file or profile, a CSV series, a rain-fade
  series, a mahimahi trace's intervals: each is counted before it is built.
- A file holding a schedule (a profile, a schedule file) is at most
  `max_file_bytes()`: MAX_STEP_TEXT_BYTES per step (a step written out in block style,
  every field named in both directions, is under half of it) plus the rest of a
  profile; checked before it is parsed.
- A mahimahi trace has at most TRACE_LINES_PER_STEP x `max_steps()` lines (10 million
  by default: ten minutes of a 200 Mb/s trace).
- The link agents take a `POST /config` body of `config_body_limit()` bytes: the rest of
  a profile (PROFILE_REST_BYTES, for its description, sources and directions at their
  longest) plus MAX_STEP_JSON_BYTES per step, the widest step's JSON with room to spare
  (tests/security/test_schedule_bounds.py sends the widest profile that validates).

The role agents read the setting from their own environment: `clarke testbed up`
starts them with the runner's; on the compose stack, give the role services the same
variable (docs/schedules.md)."""

from __future__ import annotations

import os

from clarke.errors import InputError, ValidationFailed

ENV = "CLARKE_MAX_SCHEDULE_STEPS"
DEFAULT_MAX_STEPS = 10_000
CEILING_STEPS = 1_000_000
MAX_STEP_TEXT_BYTES = 2048
MAX_STEP_JSON_BYTES = 1024
PROFILE_REST_BYTES = 1 << 20
TRACE_LINES_PER_STEP = 1000
HOW_TO_RAISE = f"{ENV} raises it (up to {CEILING_STEPS:,}; the runner and the agents alike)"


def max_steps() -> int:
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_STEPS
    if not raw.isdigit() or not 1 <= int(raw) <= CEILING_STEPS:
        raise InputError(f"{ENV}={raw[:40]!r}: a whole number of steps from 1 to {CEILING_STEPS:,}")
    return int(raw)


def too_many(count: int, what: str = "steps") -> str:
    """The message for `count` steps (or intervals, rows) over the limit."""
    return f"{count:,} {what}: a schedule has at most {max_steps():,} steps ({HOW_TO_RAISE})"


def check_count(count: int, where: str, what: str = "steps") -> None:
    """InputError naming `where` when `count` is over the limit."""
    if count > max_steps():
        raise InputError(f"{where}: {too_many(count, what)}")


def count_steps(text: str, source: str) -> None:
    """Before a profile or schedule file is parsed (a parse takes seconds per MB): every
    step names `at_s` once, so more `at_s` than the limit, outside comment lines, is a
    schedule too long, refused without parsing it."""
    count = sum(
        line.count("at_s") for line in text.splitlines() if not line.lstrip().startswith("#")
    )
    if count > max_steps():
        raise ValidationFailed(source, [f"steps: {too_many(count)}"])


def max_file_bytes() -> int:
    return PROFILE_REST_BYTES + max_steps() * MAX_STEP_TEXT_BYTES


def max_trace_lines() -> int:
    return TRACE_LINES_PER_STEP * max_steps()


def config_body_limit() -> int:
    """The largest `POST /config` body a link agent reads: the largest profile that
    validates, as JSON."""
    return PROFILE_REST_BYTES + max_steps() * MAX_STEP_JSON_BYTES
