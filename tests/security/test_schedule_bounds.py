"""Schedules with bounds (issue 37, finding 8): a 16-byte mahimahi trace asked for a
billion entries (a MemoryError traceback), a huge schedule file parsed for ever, and a
20,000-step profile validated and then failed at `testbed up` with the agent's 413.

Every reader refuses what is too big before it builds it (exit 2 naming the limit and
CLARKE_MAX_SCHEDULE_STEPS, which raises it), within seconds and in bounded memory
(each command here runs with its address space capped at 2 GiB). What validates is what
the agents take: the largest profile that validates fits the agents' request limit,
which follows the same setting (one constant), and a raised limit works end to end."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import need
from testbeds import down_each_testbed_in

LIMIT_ENV = "CLARKE_MAX_SCHEDULE_STEPS"
DEFAULT_LIMIT = 10_000
MEMORY_CAP = 2 << 30


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _clarke(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> tuple[int, str, float]:
    """The command's exit code, output, and the CPU seconds it used: what "refused at once"
    is judged by, since wall time also counts whatever else the machine runs (a 20,000-step
    refusal took 11.8 s of wall time at load 9)."""
    started = _cpu_of_children()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "clarke", *args], capture_output=True, text=True,
            timeout=timeout, preexec_fn=_capped, env={**os.environ, **(env or {})},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout} s", timeout
    return proc.returncode, proc.stdout + proc.stderr, _cpu_of_children() - started


def _refused_naming_the_limit(code: int, text: str, took: float) -> None:
    assert code == 2, text[-2000:]
    assert LIMIT_ENV in text and "Traceback" not in text and "MemoryError" not in text, text
    assert took < 30, took


def test_a_16_byte_mahimahi_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.write_bytes(b"1\n1000000000000\n")
    assert len(trace.read_bytes()) == 16
    code, text, took = _clarke(
        "link", "schedule", "import", "--format", "mahimahi", "--forward", str(trace),
        "--out", str(tmp_path / "s.yaml"),
    )  # fmt: skip
    _refused_naming_the_limit(code, text, took)
    assert str(DEFAULT_LIMIT) in text.replace(",", "")
    assert not (tmp_path / "s.yaml").exists()


def test_a_csv_series_and_a_synthetic_fade_too_long(tmp_path: Path) -> None:
    csv = tmp_path / "series.csv"
    csv.write_text("t_s,rate_mbps\n" + "".join(f"{i},{1 + i % 7}\n" for i in range(30_000)))
    code, text, took = _clarke(
        "link", "schedule", "import", "--format", "csv", "--forward", str(csv),
        "--out", str(tmp_path / "s.yaml"),
    )  # fmt: skip
    _refused_naming_the_limit(code, text, took)
    code, text, took = _clarke(
        "link", "schedule", "rain-fade", "--depth-db", "10", "--duration-s", "1e9",
        "--step-s", "0.001", "--symbol-rate-mbaud", "10", "--clear-sky-esn0-db", "12",
        "--out", str(tmp_path / "r.yaml"),
    )  # fmt: skip
    _refused_naming_the_limit(code, text, took)


def test_a_huge_schedule_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("w") as f:
        f.write("version: 1\nsteps:\n")
        for i in range(600_000):
            f.write(f"  - {{at_s: {i}, forward: {{rate_mbps: {1 + i % 5}}}}}\n")
    code, text, took = _clarke("link", "schedule", "validate", str(big))
    _refused_naming_the_limit(code, text, took)
    assert took < 10, took


def _widest_step(i: int) -> dict[str, Any]:
    """A step naming every field in both directions, every number at its longest."""
    change = {
        "rate_mbps": 123456.78901234567,
        "uplink_delay_ms": 12345.678901234567,
        "downlink_delay_ms": 23456.789012345678,
        "framing_delay_ms": 34567.890123456789,
        "loss": {"gilbert_elliott": {"p_good_bad": 0.012345678901234567,
                                     "p_bad_good": 0.98765432109876543,
                                     "loss_good": 0.00012345678901234567,
                                     "loss_bad": 0.12345678901234567}},
        "outage": False,
    }  # fmt: skip
    return {"at_s": round(i * 0.123456789, 9) + 1e-7 * (i > 0), "forward": change,
            "return": change}  # fmt: skip


def _small_step(i: int) -> dict[str, Any]:
    return {"at_s": i, "forward": {"rate_mbps": 1 + i % 5}}


def _profile_data(steps: int, step: Any = _widest_step) -> dict[str, Any]:
    lan = yaml.safe_load(Path("profiles/lan.yaml").read_text())
    lan["description"] = "é" * 4000  # the longest description, every character escaped
    lan["sources"] = ["𝄞" * 1000] * 64
    lan["schedule"] = {"version": 1, "end": "hold", "steps": [step(i) for i in range(steps)]}
    return lan


def _profile(tmp_path: Path, steps: int, step: Any = _widest_step, name: str = "big") -> Path:
    path = tmp_path / f"{name}.yaml"
    # libyaml's dumper: PyYAML's own takes a minute for 10,000 such steps.
    text = yaml.dump(
        _profile_data(steps, step), Dumper=yaml.CSafeDumper, allow_unicode=True, width=10_000
    )
    path.write_text(text)
    return path


def test_the_largest_profile_that_validates_fits_the_agents_limit() -> None:
    """The widest profile (every step, description and source at its longest) at the
    limit, and at a raised one, is a body the link agents take."""
    from clarke.agent.server import config_body_limit
    from clarke.profiles import LinkProfile
    from clarke.roles import link_config

    for limit in (DEFAULT_LIMIT, 20_000):
        os.environ[LIMIT_ENV] = str(limit)
        try:
            profile = LinkProfile.model_validate(_profile_data(limit))
            assert profile.schedule is not None and len(profile.schedule.steps) == limit
            body = json.dumps(link_config("p" * 255, profile)).encode()
            assert len(body) <= config_body_limit(), (limit, len(body), config_body_limit())
            with pytest.raises(ValueError, match=LIMIT_ENV):
                LinkProfile.model_validate(_profile_data(limit + 1, _small_step))
        finally:
            del os.environ[LIMIT_ENV]


def test_20000_steps_are_refused_by_default_and_taken_when_raised(tmp_path: Path) -> None:
    """The issue's 20,000-step profile: refused when read, at once (before it is parsed);
    with the limit raised, it validates."""
    path = _profile(tmp_path, 20_000, _small_step)
    code, text, took = _clarke("link", "schedule", "validate", str(path))
    _refused_naming_the_limit(code, text, took)
    assert took < 10, took
    code, text, _ = _clarke("link", "schedule", "validate", str(path),
                            env={LIMIT_ENV: "20000"})  # fmt: skip
    assert code == 0, text[-2000:]


@pytest.mark.root
@pytest.mark.slow
def test_what_validates_is_what_testbed_up_takes(tmp_path: Path) -> None:
    """A profile of 3,000 of the widest steps (2 MB as the agents' JSON: twice the body
    the agents took before) with the limit raised to just that, for the runner and so
    for the agents it starts: `testbed up` brings it up, the link runs it."""
    need(os.geteuid() == 0, "root (network namespaces)")
    path = _profile(tmp_path, 3000)
    state = Path(tempfile.mkdtemp(prefix="clarke-sec-sched-"))
    env = {**os.environ, "CLARKE_STATE_DIR": str(state), LIMIT_ENV: "3000"}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "clarke", "testbed", "up", "--profile", str(path), "--json"],
            capture_output=True, text=True, env=env, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "413" not in proc.stderr
        up = json.loads(proc.stdout)
        assert up["profile"] == str(path) and up["profile_sha256"], up
    finally:
        down_each_testbed_in(state, env)
