"""The runner's shape: no module over 600 lines (STYLE.md: split by role)."""

from __future__ import annotations

from pathlib import Path

RUNNER = Path(__file__).resolve().parents[2] / "runner" / "clarke"
LIMIT = 600


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(RUNNER)): n
        for p in RUNNER.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > LIMIT
    }
    assert not long, f"split these modules (over {LIMIT} lines): {long}"
