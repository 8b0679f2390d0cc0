"""Numbers on the command line (issue 37, finding 9): `clarke testbed check-schedule
--interval 0`, `--duration nan` and `--interval 1e9` ended in tracebacks, negative
values were taken. Every such value now exits 2 naming the option, before any testbed
is looked for (a private, empty state dir here: a check that got that far would say
"no testbed is up" instead)."""

from __future__ import annotations

from pathlib import Path

import pytest

CASES = [
    ("check-schedule", "--interval", "0"),
    ("check-schedule", "--interval", "-0.01"),
    ("check-schedule", "--interval", "nan"),
    ("check-schedule", "--interval", "inf"),
    ("check-schedule", "--interval", "1e9"),
    ("check-schedule", "--interval", "0.000001"),
    ("check-schedule", "--duration", "nan"),
    ("check-schedule", "--duration", "-5"),
    ("check-schedule", "--duration", "0"),
    ("check-schedule", "--duration", "inf"),
    ("check-schedule", "--duration", "1e12"),
    ("check", "--duration", "nan"),
    ("check", "--duration", "-1"),
    ("check", "--omit", "-1"),
    ("check", "--omit", "nan"),
    ("check", "--samples", "0"),
    ("check", "--samples", "-3"),
]


@pytest.fixture(autouse=True)
def no_testbeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLARKE_STATE_DIR", str(tmp_path / "state"))


@pytest.mark.parametrize(("command", "option", "value"), CASES)
def test_a_bad_number_exits_2_naming_the_option(
    run_cli,
    command: str,
    option: str,
    value: str,  # type: ignore[no-untyped-def]
) -> None:
    code, out, err = run_cli("testbed", command, option, value)
    assert code == 2, out + err
    assert option in err and "Traceback" not in err, err
    assert "no testbed is up" not in err


def test_an_interval_longer_than_the_duration(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run_cli("testbed", "check-schedule", "--duration", "5", "--interval", "10")
    assert code == 2, out + err
    assert "--interval" in err and "--duration" in err, err
