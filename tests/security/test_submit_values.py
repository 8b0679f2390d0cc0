"""Issue 48: every value `clarke submit` writes into a batch script or a manifest is
refused (exit 2, naming the option and what it takes, nothing written) when it holds a
control character: a newline in `--time` or `--partition` wrote shell lines into the
Slurm script, one in `--image` or `--storage` YAML into the manifest. The values that
become one word of an `#SBATCH` line (`--time`, `--partition`) take no white space
either: a space there adds an option of the user's choice to sbatch's."""

from __future__ import annotations

from pathlib import Path

import pytest

SMOKE = "campaigns/smoke.yaml"

SLURM = [
    ("--time", "1:00:00\necho pwned", "a Slurm time limit"),
    ("--time", "1:00:00 --uid=0", "a Slurm time limit"),
    ("--partition", "debug\necho pwned", "a partition name"),
    ("--partition", "debug\r", "a partition name"),
    ("--partition", "debug\x00", "a partition name"),
    ("--results", "{tmp}/r\x1b[2Jx", "--results"),
    ("--influx", "http://127.0.0.1:8086/clarke\necho pwned", "an InfluxDB URL"),
    ("--influx", "http://127.0.0.1:8086/clarke\u2028x", "an InfluxDB URL"),
]


K8S = [
    ("--image", "clarke-client:1\nkind: Pod", "an image reference"),
    ("--image", "clarke-client:1\u2028x", "an image reference"),
    ("--storage", "2Gi\n", "a size"),
    ("--storage", "2Gi\x85", "a size"),
    ("--influx", "http://influxdb:8086/clarke\nx: y", "an InfluxDB URL"),
    ("--influx", "http://influxdb:8086/clarke\x00", "an InfluxDB URL"),
]


def _submit(scheduler: str) -> tuple[str, ...]:
    """`clarke submit` of the smoke campaign in 3 shards, manifests written only."""
    return ("submit", scheduler, SMOKE, "--shards", "3", "--campaign-id", "smoke-v", "--emit")


@pytest.mark.parametrize(("option", "value", "allowed"), SLURM)
def test_slurm_refuses_control_characters(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path, option: str, value: str, allowed: str
) -> None:
    value = value.replace("{tmp}", str(tmp_path))
    results = ["--results", str(tmp_path / "results")] if option != "--results" else []
    code, _, err = run_cli(*_submit("slurm"), *results, option, value)
    assert code == 2, err
    assert f"Invalid input: {option} " in err and allowed in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("option", "value", "allowed"), K8S)
def test_k8s_refuses_control_characters(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path, option: str, value: str, allowed: str
) -> None:
    code, _, err = run_cli(*_submit("k8s"), "--out", str(tmp_path / "k8s"), option, value)
    assert code == 2, err
    assert f"Invalid input: {option} " in err and allowed in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "extra",
    [
        ["--time", "90"],
        ["--time", "1-12:00:00"],
        ["--time", "UNLIMITED"],
        ["--partition", "measure,debug_2"],
        ["--influx", "https://clarke:pw@influx.example:8086/clarke"],
    ],
)
def test_slurm_takes_plain_values(run_cli, tmp_path: Path, extra: list[str]) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli(*_submit("slurm"), "--results", str(tmp_path / "results"), *extra)
    assert code == 0, err


@pytest.mark.parametrize(
    "extra",
    [
        ["--image", "registry.example:5000/lab/clarke-client@sha256:0123abcd"],
        ["--image", "clarke-client:1.2_rc-3"],
        ["--storage", "500Mi"],
        ["--storage", "1.5T"],
    ],
)
def test_k8s_takes_plain_values(run_cli, tmp_path: Path, extra: list[str]) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli(*_submit("k8s"), "--out", str(tmp_path / "k8s"), *extra)
    assert code == 0, err
    assert extra[1] in (tmp_path / "k8s" / "clarke-campaign.yaml").read_text()
