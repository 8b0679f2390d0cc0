"""Static checks of the compose stack: docker-compose.yml and its offline override agree
with the testbed plan (the one place addresses are defined), publish only on loopback,
give capabilities only where needed, and never run with a default Grafana password.
`docker compose config` (where Docker Compose is installed) validates both files."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from clarke.place.plan import COMPOSE_NETWORKS, ROLES, compose_plan
from conftest import need
from helpers import dockerfile_args, dockerfile_instructions

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


# The capabilities each service may add after dropping all of them, and why.
CAPABILITIES = {
    # TAP, bridge, routes, qdiscs; ICMP echoes over the link (the terminal's log-on check)
    "terminal": {"NET_ADMIN", "NET_RAW"},
    "satellite": {"NET_ADMIN", "NET_RAW"},
    "gateway": {"NET_ADMIN", "NET_RAW"},
    # OpenLiteSpeed's master starts workers as nobody and reopens their files as root
    "server": {
        "NET_ADMIN",
        "NET_BIND_SERVICE",
        "SETUID",
        "SETGID",
        "CHOWN",
        "FOWNER",
        "KILL",
        "DAC_OVERRIDE",
    },
    # route; the link checks' echoes; results into the user's directory
    "client": {"NET_ADMIN", "NET_RAW", "DAC_OVERRIDE", "SYS_NICE"},
    "influxdb": {"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID"},
    "secrets": {"CHOWN", "FOWNER"},  # the secret files' owner and mode
    "grafana": set(),
    "hostcheck": set(),
}


def test_only_loopback_ports_and_least_privilege(base: dict[str, Any]) -> None:
    assert set(base["services"]) == set(CAPABILITIES)
    for name, svc in base["services"].items():
        assert not svc.get("privileged"), name
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port}"
        assert svc.get("cap_drop") == ["ALL"], name
        assert set(svc.get("cap_add", [])) == CAPABILITIES[name], name
        assert "no-new-privileges:true" in svc.get("security_opt", []), name
        # A TAP only at the terminal and the gateway; the satellite relays UDP.
        has_tun = any("/dev/net/tun" in d for d in svc.get("devices", []))
        assert has_tun == (name in ("terminal", "gateway")), name
    assert {n for n, s in base["services"].items() if s.get("ports")} == {"influxdb", "grafana"}


def test_images_built_here_are_never_pulled(base: dict[str, Any]) -> None:
    offline = load(OFFLINE)["services"]
    for name, svc in offline.items():
        if "build" in svc:
            assert svc.get("pull_policy", base["services"][name].get("pull_policy")) == "build"
    for name, svc in base["services"].items():
        image = svc.get("image", "")
        if "build" in svc:
            assert svc["pull_policy"] == "build", name
        elif image.startswith("clarke-"):
            assert svc["pull_policy"] == "never", name  # built by another service


def _compose_default(value: str | None) -> str | None:
    """A compose value as `docker compose` reads it with no .env and no environment:
    ${VAR:-default} and ${VAR-default} give the default, ${VAR} and $VAR nothing, and
    a key without a value (None) leaves the Dockerfile's own default."""
    if value is None:
        return None
    value = re.sub(r"\$\{\w+:?-([^}]*)\}", r"\1", str(value))
    return re.sub(r"\$\{\w+\}|\$\w+", "", value)


def _dockerfile_args(dockerfile: Path) -> dict[str, str]:
    """Build arguments and their defaults, "" where there is none."""
    return {k: v or "" for k, v in dockerfile_args(dockerfile_instructions(dockerfile)).items()}


# Build arguments that may be empty, and why.
MAY_BE_EMPTY = {
    # empty: the Nightly the repository serves on the day the layer is built
    "FIREFOX_NIGHTLY_DATE",
}


def test_every_build_argument_has_a_usable_default(base: dict[str, Any]) -> None:
    """docker-compose.yml alone (no .env, no environment): every build argument of the
    canonical images resolves to a value, so `docker compose up` builds with nothing
    but Docker."""
    checked = 0
    for name, svc in base["services"].items():
        if "build" not in svc:
            continue
        dockerfile = ROOT / svc["build"]["dockerfile"]
        given = svc["build"].get("args", {})
        for arg, default in _dockerfile_args(dockerfile).items():
            value = _compose_default(given[arg]) if arg in given else None
            if value is None:
                value = default
            if arg not in MAY_BE_EMPTY:
                assert value, f"{name}: build argument {arg} has no value and no default"
            checked += 1
    assert checked >= 10


def test_opensand_defaults_agree_with_its_install_script() -> None:
    args = _dockerfile_args(ROOT / "images/opensand/Dockerfile")
    script = (ROOT / "opensand/install.sh").read_text()
    assert f"DEFAULT_REPO_URL={args['OPENSAND_REPO_URL']}\n" in script
    assert args["OPENSAND_REPO_URL"].endswith("/CNES/net4sat-packages/master")
    for arg in ("KEY_PATH", "KEY_FINGERPRINT", "SUITE", "COMPONENT", "VERSION"):
        assert f"${{OPENSAND_{arg}:-{args['OPENSAND_' + arg]}}}" in script, arg
    assert args["OPENSAND_KEY_FINGERPRINT"] == "6F9F04D69C4B474C167A2FBD252D09EF62D28309"


def test_grafana_has_no_default_password_and_no_anonymous_access(base: dict[str, Any]) -> None:
    env = base["services"]["grafana"]["environment"]
    assert "GF_SECURITY_ADMIN_PASSWORD" not in env
    assert env["GF_SECURITY_ADMIN_PASSWORD__FILE"] == "/run/clarke-secrets/grafana-admin-password"
    assert _compose_default(env["GF_AUTH_ANONYMOUS_ENABLED"]) == "false"
    deps = base["services"]["grafana"]["depends_on"]
    assert deps["secrets"]["condition"] == "service_completed_successfully"


def test_influxdb_asks_for_credentials(base: dict[str, Any]) -> None:
    svc = base["services"]
    env = svc["influxdb"]["environment"]
    assert env["INFLUXDB_HTTP_AUTH_ENABLED"] == "true"
    assert (env["INFLUXDB_ADMIN_USER"], env["INFLUXDB_USER"], env["INFLUXDB_READ_USER"]) == (
        "admin",
        "clarke",
        "grafana",
    )
    entrypoint = "\n".join(svc["influxdb"]["entrypoint"])
    for name in ("influx-admin-password", "influx-writer-password", "influx-reader-password"):
        assert f"/{name})" in entrypoint
    client = svc["client"]["environment"]
    assert client["CLARKE_INFLUX_USER"] == env["INFLUXDB_USER"]
    assert client["CLARKE_INFLUX_PASSWORD_FILE"] == "/run/clarke-secrets/influx-writer-password"
    assert svc["grafana"]["environment"]["CLARKE_INFLUX_READ_USER"] == env["INFLUXDB_READ_USER"]


def test_secrets_are_made_once_private_and_kept(tmp_path: Path) -> None:
    need(shutil.which("sh") is not None and os.geteuid() == 0, "sh, as root (chown 0:0)")
    script = ROOT / "images/secrets.sh"
    first = subprocess.run(["sh", str(script), str(tmp_path)], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    made = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert set(made) == {
        "agent-token",
        "grafana-admin-password",
        "influx-admin-password",
        "influx-writer-password",
        "influx-reader-password",
    }
    for name, value in made.items():
        assert len(value) == 43 and value.isalnum(), name
        mode = (tmp_path / name).stat().st_mode & 0o777
        # Grafana (uid 472, group 0) reads its two; everything else is root's alone.
        assert mode == (
            0o440 if name in ("grafana-admin-password", "influx-reader-password") else 0o600
        )
    assert len(set(made.values())) == len(made)
    again = subprocess.run(["sh", str(script), str(tmp_path)], capture_output=True, text=True)
    assert again.returncode == 0 and "made" not in again.stdout
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == made


def test_secrets_service_mounts_only_its_script(base: dict[str, Any]) -> None:
    svc = base["services"]["secrets"]
    assert svc["network_mode"] == "none" and svc["read_only"] is True
    shares = ("agents", "client", "influxdb", "grafana")
    assert svc["volumes"] == [
        "./images/secrets.sh:/usr/local/bin/clarke-secrets:ro",
        "secrets:/run/clarke-secrets",
        *(f"secrets-{s}:/run/clarke-secrets-shares/{s}" for s in shares),
    ]
    # The whole store is mounted nowhere else (tests/security/test_compose_secrets.py
    # checks each service's share).
    for name, other in base["services"].items():
        if name != "secrets":
            assert not any(v.startswith("secrets:") for v in other.get("volumes", [])), name


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
        ("COPY", "peps /opt/clarke/peps"),
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
