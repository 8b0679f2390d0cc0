"""Schedule files: profiles/schedules/NAME.yaml (the shape of a profile's `schedule:`),
read with errors naming the file, the step and the field; and written by the generators
with a header comment saying how they were made, one step per line."""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from clarke import __version__, schema
from clarke.errors import InputError, ValidationFailed
from clarke.json_value import JsonObject
from clarke.schedules import limits
from clarke.schedules.model import DIRECTIONS, Clock, Schedule

SCHEDULE_DIR = "schedules"  # beside the profiles: profiles/schedules/
FILE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*\.ya?ml$"


def schedule_path(profile_path: Path, file_name: str) -> Path:
    """Where a profile's `schedule_file: NAME.yaml` is: schedules/ beside the profile,
    and there it stays: a link in schedules/ that leads out of the profile's directory is
    refused before the file it names is read."""
    path = profile_path.parent / SCHEDULE_DIR / file_name
    home = profile_path.parent.resolve()
    if not path.resolve().is_relative_to(home):
        raise ValidationFailed(
            str(profile_path),
            [f"schedule_file: {file_name} leads outside the profile's directory ({home})"],
        )
    return path


def read(path: Path, referenced_by: str | None = None) -> Schedule:
    """A schedule file; ValidationFailed naming it (and the profile that refers to it)."""
    source = str(path) + (f" (schedule_file of {referenced_by})" if referenced_by else "")
    if not path.is_file():
        raise ValidationFailed(source, ["file not found"])
    data = schema.read_yaml(path, limits.max_file_bytes(), limits.HOW_TO_RAISE, limits.count_steps)
    return schema.parse(Schedule, data, source)


def read_csv(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, float]]]:
    """(line number, {column: value}) of a CSV's data rows; `required` columns must be in
    the header; every value a finite number."""
    text = schema.read_text(path)
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    lines = [(n, ln) for n, ln in lines if not ln.lstrip().startswith("#")]
    if len(lines) - 1 > limits.max_steps():  # each row may become a step
        raise ValidationFailed(str(path), [limits.too_many(len(lines) - 1, "rows")])
    if not lines:
        raise ValidationFailed(str(path), ["no header line (e.g. `t_s,attenuation_db`)"])
    header = [h.strip() for h in next(csv.reader([lines[0][1]]))]
    missing = [c for c in required if c not in header]
    if missing:
        raise ValidationFailed(
            str(path),
            [
                f"line {lines[0][0]}: the header lacks {', '.join(missing)} "
                f"(got {', '.join(header)})"
            ],
        )
    rows = []
    for n, ln in lines[1:]:
        cells = [c.strip() for c in next(csv.reader([ln]))]
        if len(cells) != len(header):
            raise ValidationFailed(
                str(path), [f"line {n}: {len(cells)} values, the header has {len(header)}"]
            )
        row: dict[str, float] = {}
        for name, cell in zip(header, cells, strict=True):
            try:
                value = float(cell)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise ValidationFailed(str(path), [f"line {n}: {name}: {cell!r} is not a number"])
            row[name] = value
        rows.append((n, row))
    if not rows:
        raise ValidationFailed(str(path), ["no data rows after the header"])
    return rows


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, for a header naming the input a schedule was made from."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None


def _number(value: float) -> float | int:
    """Round away float noise (6 decimals: ns of delay, b/s of rate); ints stay ints."""
    r = round(value, 6)
    return int(r) if r == int(r) else r


def _clean(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _clean(v) for k, v in data.items()}
    if isinstance(data, float):
        return _number(data)
    return data


def _flow(data: Any) -> str:
    return yaml.safe_dump(
        _clean(data), default_flow_style=True, sort_keys=False, width=10_000
    ).strip()


def render(schedule: Schedule, header: Iterable[str]) -> str:
    """A schedule as YAML text: `# ` + each header line, the top-level fields, one line
    per step (in flow style)."""
    lines = [f"# {h}".rstrip() for h in header]
    lines.append(f"# Written by clarke {__version__}; the format: docs/schedules.md.")
    lines.append(f"version: {schedule.version}")
    if schedule.id:
        lines.append(f"id: {schedule.id}")
    lines.append(f"end: {schedule.end.value}")
    for key in ("length_s", "slot_s"):
        value = getattr(schedule, key)
        if value is not None:
            lines.append(f"{key}: {_number(value)}")
    if schedule.clock is not Clock.apply:
        lines.append(f"clock: {schedule.clock.value}")
    if schedule.slot_offset_s:
        lines.append(f"slot_offset_s: {_number(schedule.slot_offset_s)}")
    lines.append("steps:")
    for step in schedule.steps:
        item: JsonObject = {"at_s": step.at_s}
        for d in DIRECTIONS:
            change = step.change(d)
            if change is not None:
                item[d] = change.model_dump(mode="json")
        lines.append(f"  - {_flow(item)}")
    return "\n".join(lines) + "\n"


def write(path: Path, schedule: Schedule, header: Iterable[str]) -> Schedule:
    """Write the schedule; returns it as read back from the text (numbers rounded to 6
    decimals), so what is written is what validates."""
    text = render(schedule, header)
    written = schema.parse(Schedule, yaml.safe_load(text), str(path))
    path.write_text(text, encoding="utf-8")
    return written
