"""The compose stack's secrets (issue 37, finding 5): every service sees only the
secrets it uses. Root in the server's or InfluxDB's container must not read the
InfluxDB admin's password or the agents' token it has no use for.

What a service *sees* is read from docker-compose.yml (the volumes it mounts) and from
images/secrets.sh itself (run here: which files it puts in each volume). What it *uses*
is read from its own definition: a secret's file named in its environment, entrypoint
or command, in the provisioning files it mounts, and the agent token for every service
whose command is `clarke serve` (clarke.agent.auth)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import need

ROOT = Path(__file__).resolve().parents[2]
SECRETS_DIR = "/run/clarke-secrets"
AGENT_TOKEN = "agent-token"


def _compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _secret_names(tmp_path: Path) -> set[str]:
    need(shutil.which("sh") is not None and os.geteuid() == 0, "sh, as root (chown 0:0)")
    out = tmp_path / "names"
    out.mkdir()
    proc = subprocess.run(
        ["sh", str(ROOT / "images/secrets.sh"), str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return {p.name for p in out.iterdir()}


def _seen(compose: dict[str, Any], tmp_path: Path) -> dict[str, set[str]]:
    """Service -> the secret files it can read at SECRETS_DIR, by running the secrets
    service's script with the volumes it mounts as directories."""
    maker = compose["services"]["secrets"]
    script = next(v for v in maker["volumes"] if v.startswith("./images/secrets.sh:"))
    command = maker["command"]
    assert command[:2] == ["sh", script.split(":")[1]], command
    volumes: dict[str, Path] = {}
    root = tmp_path / "volumes"
    for spec in maker["volumes"]:
        source, target = spec.split(":")[:2]
        if source.startswith("./"):
            continue
        volumes[source] = root / target.lstrip("/")
        volumes[source].mkdir(parents=True)
    args = [str(root / a.lstrip("/")) if a.startswith("/run/") else a for a in command[2:]]
    proc = subprocess.run(["sh", str(ROOT / "images/secrets.sh"), *args], capture_output=True,
                          text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    seen: dict[str, set[str]] = {}
    for name, svc in compose["services"].items():
        if name == "secrets":
            continue
        files: set[str] = set()
        for spec in svc.get("volumes", []):
            source, target = spec.split(":")[:2]
            if target == SECRETS_DIR or target.startswith(SECRETS_DIR + "/"):
                assert source in volumes, (
                    f"{name} mounts {source}, which the secrets service fills not"
                )
                files |= {p.name for p in volumes[source].iterdir()}
        seen[name] = files
    return seen


def _uses(name: str, svc: dict[str, Any], secrets: set[str]) -> set[str]:
    text = yaml.safe_dump(svc)
    for spec in svc.get("volumes", []):
        source = spec.split(":")[0]
        if source.startswith("./") and (ROOT / source).exists():
            mounted = ROOT / source
            files = [mounted] if mounted.is_file() else list(mounted.rglob("*"))
            text += "".join(f.read_text(errors="replace") for f in files if f.is_file())
    used = {s for s in secrets if f"{SECRETS_DIR}/{s}" in text or f"$$s/{s}" in text}
    command = svc.get("command") or []
    if command[:2] == ["clarke", "serve"]:
        used.add(AGENT_TOKEN)  # every agent reads it (clarke.agent.auth.COMPOSE_TOKEN_FILE)
    return used


def test_every_service_sees_only_the_secrets_it_uses(tmp_path: Path) -> None:
    compose = _compose()
    secrets = _secret_names(tmp_path)
    assert len(secrets) == 5, secrets
    seen = _seen(compose, tmp_path)
    for name, svc in compose["services"].items():
        if name == "secrets":
            continue
        uses = _uses(name, svc, secrets)
        assert seen[name] == uses, f"{name} sees {sorted(seen[name])}, uses {sorted(uses)}"
    # What the finding named: no admin password nor token where they are not used.
    assert "influx-admin-password" not in seen["server"] | seen["client"] | seen["grafana"]
    assert AGENT_TOKEN not in seen["influxdb"] | seen["grafana"]
    for role in ("terminal", "satellite", "gateway", "server"):
        assert seen[role] == {AGENT_TOKEN}, role


@pytest.mark.parametrize("service", ["influxdb", "grafana", "client"])
def test_what_a_service_uses_is_there(service: str, tmp_path: Path) -> None:
    """The other way round: nothing a service needs was taken from it."""
    compose = _compose()
    secrets = _secret_names(tmp_path)
    seen = _seen(compose, tmp_path)
    assert _uses(service, compose["services"][service], secrets) <= seen[service]
    assert seen[service], service
