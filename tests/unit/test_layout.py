"""The runner's shape: no module over 600 lines (STYLE.md: split by role); the tests' names."""

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


def test_no_two_test_modules_share_a_name() -> None:
    """pytest imports tests/ without packages (rootdir-relative basenames): two modules of
    one name stop the whole collection, which `make check` (unit tests only) would not
    show."""
    tests = Path(__file__).resolve().parents[1]
    seen: dict[str, list[str]] = {}
    for p in tests.rglob("test_*.py"):
        seen.setdefault(p.name, []).append(str(p.relative_to(tests)))
    assert not {n: ps for n, ps in seen.items() if len(ps) > 1}
