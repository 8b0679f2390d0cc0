"""Static checks of the compose stack: docker-compose.yml and its offline override agree
with the testbed plan (the one place addresses are defined), publish only on loopback,
give capabilities only where needed, and never run with a default Grafana password.
`docker compose config` (where Docker Compose is installed) validates both files."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from clarke.place.plan import COMPOSE_NETWORKS, ROLES, compose_plan
from conftest import need
from helpers import dockerfile_instructions

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "docker-compose.yml"
OFFLINE = ROOT / "docker-compose.offline.yml"
SERVICES = (*ROLES, "influxdb", "grafana")


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    return load(BASE)


def _compose() -> list[str] | None:
    if shutil.which("docker") is None:
        return None
    ok = subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0
    return ["docker", "compose"] if ok else None


@pytest.mark.parametrize("files", [[BASE], [BASE, OFFLINE]], ids=["canonical", "offline"])
def test_docker_compose_config_accepts_the_files(files: list[Path]) -> None:
    compose = _compose()
    need(compose is not None, "Docker Compose v2 (`docker compose`) is not installed")
    assert compose is not None
    argv = [*compose, "--project-directory", str(ROOT)]
    for f in files:
        argv += ["-f", str(f)]
    proc = subprocess.run([*argv, "config", "--quiet"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_networks_and_addresses_are_the_plans(base: dict[str, Any]) -> None:
    plan = compose_plan()
    nets = {n.name: n for n in plan.docker_networks}
    assert tuple(base["networks"]) == COMPOSE_NETWORKS
    for name, spec in base["networks"].items():
        (ipam,) = spec["ipam"]["config"]
        assert ipam["subnet"] == str(nets[name].prefix), name
        assert ipam["gateway"] == plan.docker_gateway(nets[name]), name
        # Docker drops packets with a foreign source or destination on an internal
        # network (routed LAN traffic, OpenSAND's multicast on emu): only mgmt carries
        # none; the others must not masquerade.
        assert spec.get("internal", False) is (name == "mgmt"), name
        if not spec.get("internal"):
            masquerade = spec["driver_opts"]["com.docker.network.bridge.enable_ip_masquerade"]
            assert masquerade == "false", name
    for service in SERVICES:
        attached = base["services"][service]["networks"]
        expected = {n.name: n.address(service) for n in nets.values() if service in n.members}
        assert {k: v["ipv4_address"] for k, v in attached.items()} == expected, service


def test_names_and_urls_are_the_plans(base: dict[str, Any]) -> None:
    plan = compose_plan()
    client = base["services"]["client"]
    assert client["extra_hosts"] == [f"www.clarke.test:{plan.addresses['server']}"]
    assert client["environment"]["CLARKE_INFLUX"] == f"{plan.influx_url}/clarke"
    assert base["services"]["grafana"]["environment"]["CLARKE_INFLUX_URL"] == plan.influx_url
    for role in ("terminal", "satellite", "gateway", "server"):
        test = base["services"][role]["healthcheck"]["test"]
        assert test == ["CMD", "python3", "-m", "clarke.compose.health", role]


def test_only_loopback_ports_and_least_privilege(base: dict[str, Any]) -> None:
    for name, svc in base["services"].items():
        assert not svc.get("privileged"), name
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port}"
        caps = set(svc.get("cap_add", []))
        if name in ROLES:
            assert caps == {"NET_ADMIN"}, name  # routes; TUN/TAP on the link roles
        else:
            assert not caps, name
        has_tun = any("/dev/net/tun" in d for d in svc.get("devices", []))
        assert has_tun == (name in ("terminal", "satellite", "gateway")), name
    assert {n for n, s in base["services"].items() if s.get("ports")} == {"influxdb", "grafana"}


def test_grafana_has_no_default_password(base: dict[str, Any]) -> None:
    env = base["services"]["grafana"]["environment"]
    assert "GF_SECURITY_ADMIN_PASSWORD" not in env
    assert env["GF_SECURITY_ADMIN_PASSWORD__FILE"].startswith("/run/clarke-secrets/")
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    deps = base["services"]["grafana"]["depends_on"]
    assert deps["grafana-secret"]["condition"] == "service_completed_successfully"


def test_admin_password_is_generated_once_and_kept(tmp_path: Path) -> None:
    need(shutil.which("sh") is not None, "sh")
    env, secret = tmp_path / ".env", tmp_path / "secret"
    env.write_text("CAMPAIGN=smoke")  # no trailing newline: the script must add one
    script = ROOT / "dashboards/admin-password.sh"
    first = subprocess.run(["sh", str(script), str(env), str(secret)], capture_output=True)
    assert first.returncode == 0, first.stderr
    lines = env.read_text().splitlines()
    assert lines[0] == "CAMPAIGN=smoke" and lines[1].startswith("GRAFANA_ADMIN_PASSWORD=")
    password = lines[1].split("=", 1)[1]
    assert len(password) == 24 and password.isalnum()
    assert secret.read_text() == password and secret.stat().st_mode & 0o777 == 0o440
    secret.unlink()
    again = subprocess.run(["sh", str(script), str(env), str(secret)], capture_output=True)
    assert again.returncode == 0 and env.read_text().count("GRAFANA_ADMIN_PASSWORD=") == 1
    assert secret.read_text() == password


def test_start_order_and_health(base: dict[str, Any]) -> None:
    svc = base["services"]
    assert svc["gateway"]["depends_on"]["satellite"]["condition"] == "service_healthy"
    assert svc["terminal"]["depends_on"]["gateway"]["condition"] == "service_healthy"
    for dep in ("terminal", "server", "influxdb"):
        assert svc["client"]["depends_on"][dep]["condition"] == "service_healthy"


def test_offline_override_uses_the_built_in_parts() -> None:
    off = load(OFFLINE)["services"]
    # One image for the three link roles, built by the satellite's service only.
    assert off["satellite"]["build"]["dockerfile"] == "images/satlink/Dockerfile"
    for role in ("terminal", "satellite", "gateway"):
        assert off[role]["image"] == off["satellite"]["image"]
        assert off[role]["environment"]["CLARKE_IMPLEMENTATION"] == "satlink"
        assert "build" not in off[role] or role == "satellite"
    assert off["server"]["build"]["dockerfile"] == "images/origin/Dockerfile"
    assert off["client"]["build"]["args"]["FIREFOX"] == "firefox-esr"
    assert off["influxdb"]["build"]["dockerfile"] == "images/influxdb/Dockerfile"
    assert off["grafana"]["profiles"] == ["grafana"]  # not started offline
    for svc in off.values():
        if "build" in svc and "dockerfile" in svc["build"]:
            assert (ROOT / svc["build"]["dockerfile"]).is_file()
            for arg in ("RUST_IMAGE", "NODE_IMAGE"):
                value = svc["build"].get("args", {}).get(arg)
                assert value in (None, f"clarke-{arg.split('_')[0].lower()}:local")


@pytest.mark.parametrize("image", ["client", "satlink", "origin", "opensand", "openlitespeed"])
def test_images_install_clarke_the_same_way(image: str) -> None:
    """Every Clarke image: Debian 12 slim, the locked dependencies with only
    pyproject.toml and uv.lock (their own layer), then Clarke's code and data, through
    images/clarke-install.sh (uv pinned, uv sync --frozen --no-dev)."""
    ins = dockerfile_instructions(ROOT / "images" / image / "Dockerfile")
    assert ("FROM", "debian:bookworm-slim") in ins
    steps = [(kind, a) for kind, a in ins if kind in ("COPY", "RUN")]
    order = [
        ("COPY", "images/clarke-install.sh /usr/local/bin/clarke-install"),
        ("COPY", "pyproject.toml uv.lock README.md /opt/clarke/"),
        ("RUN", "clarke-install --no-install-project"),
        ("COPY", "runner/clarke /opt/clarke/runner/clarke"),
        ("COPY", "pages /opt/clarke/pages"),
        ("COPY", "campaigns /opt/clarke/campaigns"),
        ("COPY", "profiles /opt/clarke/profiles"),
        ("RUN", "clarke-install"),
    ]
    positions = [steps.index(step) for step in order]
    assert positions == sorted(positions)
    apt = next(a for kind, a in ins if kind == "RUN" and "apt-get install" in a)
    assert "python3 python3-pip" in apt


def test_clarke_install_script() -> None:
    install = (ROOT / "images" / "clarke-install.sh").read_text()
    assert "UV_VERSION=0.13.9" in install and "--break-system-packages" in install
    assert "UV_PROJECT_ENVIRONMENT=/opt/clarke/.venv" in install
    assert "uv sync --frozen --no-dev" in install and "UV_PYTHON_DOWNLOADS=never" in install
