"""Grafana's provisioning files as Grafana expands them (tests/grafana_expand.py, after
Grafana's own sources), with the environment docker-compose.yml gives the grafana
service: the datasource gets a URL, a database, a user and a password; the dashboards
provider a path that the compose file mounts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from grafana_expand import expand, expand_tree

ROOT = Path(__file__).resolve().parents[2]
PROVISIONING = ROOT / "dashboards/provisioning"


def _grafana_env() -> dict[str, str]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    env = compose["services"]["grafana"]["environment"]
    return {k: str(v) for k, v in env.items()}


def _secret_files(path: str) -> str:
    # The files the secrets service makes (images/secrets.sh); their contents are random.
    assert path.startswith("/run/clarke-secrets/"), path
    name = path.rsplit("/", 1)[1]
    assert name in (ROOT / "images/secrets.sh").read_text(), f"{name}: no secret makes it"
    return f"secret-of-{name}\n"


def test_expansion_follows_grafanas_rules() -> None:
    env = {"A": "x", "B_C": "y"}

    def no_file(path: str) -> str:
        raise AssertionError(path)

    assert expand("$A-${B_C}", env, no_file) == "x-y"
    # No default syntax: the whole text between the braces is the name, so it is empty.
    assert expand("${A:-http://influxdb:8086}", env, no_file) == ""
    assert expand("$$A", env, no_file) == "$A"
    assert expand("$__env{A}/$__file{/f}", env, lambda p: " z \n") == "x/z"
    assert expand("100$", env, no_file) == "100$"


@pytest.mark.parametrize("path", sorted(PROVISIONING.rglob("*.yaml")), ids=lambda p: p.name)
def test_every_value_expands_to_something(path: Path) -> None:
    raw = yaml.safe_load(path.read_text())
    expanded = expand_tree(raw, _grafana_env(), _secret_files)

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")
        elif isinstance(node, str):
            assert node.strip(), f"{path.name}: {where} expands to nothing"

    walk(expanded, path.name)


def test_datasource_reaches_the_stacks_influxdb() -> None:
    raw = yaml.safe_load((PROVISIONING / "datasources/influxdb.yaml").read_text())
    expanded = expand_tree(raw, _grafana_env(), _secret_files)
    assert isinstance(expanded, dict)
    (ds,) = expanded["datasources"]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    influx = compose["services"]["influxdb"]
    address = influx["networks"]["mgmt"]["ipv4_address"]
    assert ds["url"] == f"http://{address}:8086"
    assert ds["jsonData"]["dbName"] == influx["environment"]["INFLUXDB_DB"]
    assert ds["user"] == influx["environment"]["INFLUXDB_READ_USER"]
    assert ds["secureJsonData"]["password"] == "secret-of-influx-reader-password"
