"""The stand-in for a GitHub-hosted runner: a privileged Debian 12 container with its own
Docker daemon, started from debian:bookworm-slim (ci/offline-images makes it without a
registry), with the tools Clarke's workflows call on the runner (bash, git, jq, curl,
sudo, python3, Docker with Compose v2) and a `gh` that answers from earlier local runs.
One container per job, as GitHub gives each job a fresh machine; removed at the end."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BASE_IMAGE = "debian:bookworm-slim"
RUNNER_IMAGE = "clarke-gha-runner:local"
RUNNER_PACKAGES = (
    "ca-certificates curl git jq sudo kmod iproute2 procps python3 xz-utils zstd docker.io iptables"
)
RUNNER_DOCKERFILE = f"""FROM {BASE_IMAGE}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {RUNNER_PACKAGES} \\
 && rm -rf /var/lib/apt/lists/*
"""
CAPABILITIES = (
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
)
# The host's proxy and CA settings, where it has them: the registries are reached the
# same way from inside (ci/debian-container passes the same list on).
PASS_ENV = (
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "PIP_CERT",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
)
COMPOSE_PLUGINS = (
    "/usr/local/lib/docker/cli-plugins/docker-compose",
    "/usr/libexec/docker/cli-plugins/docker-compose",
    "/usr/lib/docker/cli-plugins/docker-compose",
)


class MachineError(RuntimeError):
    """The runner container could not be made or used (the command and its output)."""


def say(msg: str) -> None:
    print(f"==> {msg}", file=sys.stderr, flush=True)


def docker(
    *args: str, check: bool = True, input: bytes | None = None, timeout: float | None = None
) -> str:
    """Run a docker command; its output, or MachineError with what it printed."""
    proc = subprocess.run(["docker", *args], input=input, capture_output=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise MachineError(
            f"$ docker {shlex.join(args)}\n{proc.stderr.decode(errors='replace').strip()}"
        )
    return proc.stdout.decode(errors="replace")


@dataclass(frozen=True)
class Mount:
    host: str
    container: str
    read_only: bool = True

    def arg(self) -> str:
        return f"{self.host}:{self.container}" + (":ro" if self.read_only else "")


def privileges() -> tuple[list[str], str | None]:
    """--privileged, or, where this Docker daemon cannot grant it (a capability missing
    from its bounding set, e.g. inside a sandbox), the closest it can: every other
    capability, unconfined seccomp/AppArmor/system paths, every device, and read-write
    /sys and cgroups (remounted in the container). The second value says what differs."""
    probe = subprocess.run(
        ["docker", "run", "--rm", "--privileged", "--network", "none", BASE_IMAGE, "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode == 0:
        return ["--privileged"], None
    if "apply caps" not in probe.stderr:
        raise MachineError(f"docker run --privileged {BASE_IMAGE}: {probe.stderr.strip()}")
    status = Path("/proc/self/status").read_text()
    bounding = int(
        next(ln.split()[1] for ln in status.splitlines() if ln.startswith("CapBnd:")), 16
    )
    dropped = [name for i, name in enumerate(CAPABILITIES) if not (bounding >> i) & 1]
    args = [
        "--cap-add", "ALL",
        "--security-opt", "seccomp=unconfined",
        "--security-opt", "apparmor=unconfined",
        "--security-opt", "systempaths=unconfined",
        "--device-cgroup-rule", "a *:* rwm",
    ]  # fmt: skip
    if Path("/dev/net/tun").exists():
        args += ["--device", "/dev/net/tun"]
    for cap in dropped:
        args += ["--cap-drop", cap]
    note = (
        f"--privileged emulated: this Docker daemon cannot grant {', '.join(dropped) or '?'}; "
        "every other capability, unconfined seccomp/AppArmor/system paths, every device, "
        "read-write /sys and cgroups"
    )
    return args, note


def ensure_runner_image() -> None:
    """Build the runner image from the offline base image, once per recipe."""
    recipe = hashlib.sha256(RUNNER_DOCKERFILE.encode()).hexdigest()[:16]
    have = docker(
        "image",
        "inspect",
        "-f",
        '{{index .Config.Labels "clarke.recipe"}}',
        RUNNER_IMAGE,
        check=False,
    )
    if have.strip() == recipe:
        return
    if not docker("image", "inspect", BASE_IMAGE, check=False).strip():
        raise MachineError(f"no {BASE_IMAGE} image here: make it with ci/offline-images (root)")
    say(f"building {RUNNER_IMAGE} from {BASE_IMAGE} (apt-get install {RUNNER_PACKAGES})")
    dockerfile = RUNNER_DOCKERFILE + f'LABEL clarke.recipe="{recipe}"\n'
    proc = subprocess.run(
        ["docker", "build", "-q", "-t", RUNNER_IMAGE, "-"],
        input=dockerfile.encode(),
        capture_output=True,
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )
    if proc.returncode != 0:
        raise MachineError(
            f"building {RUNNER_IMAGE}:\n{proc.stdout.decode()}{proc.stderr.decode()}"
        )


def compose_plugin() -> str:
    for path in COMPOSE_PLUGINS:
        if Path(path).is_file():
            return path
    home = Path.home() / ".docker/cli-plugins/docker-compose"
    if home.is_file():
        return str(home)
    raise MachineError("Docker Compose v2 is needed on this host (ci/docker-setup.sh installs it)")


class Machine:
    """One job's runner container."""

    def __init__(self, name: str, keep: bool = False) -> None:
        self.name = name
        self.keep = keep
        self.started = False
        self.notes: list[str] = []

    def start(self, mounts: Sequence[Mount], load_images: Sequence[str]) -> None:
        ensure_runner_image()
        args, note = privileges()
        if note:
            self.notes.append(note)
        pass_env: list[str] = []
        for var in PASS_ENV:
            if os.environ.get(var):
                pass_env += ["-e", var]
        run = [
            "run", "-d", "--init", "--name", self.name, *args, "--cgroupns=host",
            "-v", "/var/lib/docker",
            "-v", f"{compose_plugin()}:/usr/local/lib/docker/cli-plugins/docker-compose:ro",
            *pass_env,
            # A local guard: a uv that found no Python here would download one.
            "-e", "UV_PYTHON_DOWNLOADS=never",
        ]  # fmt: skip
        if Path("/lib/modules").is_dir():
            run += ["-v", "/lib/modules:/lib/modules:ro"]
        for m in mounts:
            run += ["-v", m.arg()]
        docker(*run, RUNNER_IMAGE, "sleep", "infinity")
        self.started = True
        if note:
            self.sh(
                "mount -o remount,rw /sys && findmnt -rn -t cgroup,cgroup2 -o TARGET"
                ' | while read -r t; do mount -o remount,bind,rw "$t"; done'
            )
        self.sh(
            "(dockerd > /var/log/dockerd.log 2>&1 & echo $! > /run/dockerd.pid);"
            " for i in $(seq 150); do docker info >/dev/null 2>&1 && exit 0; sleep 0.2; done;"
            " tail -n 20 /var/log/dockerd.log; exit 1"
        )
        for image in load_images:
            say(f"{self.name}: docker load {image} (from this host's Docker)")
            save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
            load = subprocess.run(
                ["docker", "exec", "-i", self.name, "docker", "load", "-q"],
                stdin=save.stdout,
                capture_output=True,
            )
            save.wait()
            if save.returncode != 0 or load.returncode != 0:
                raise MachineError(f"loading {image}: {load.stderr.decode().strip()}")

    def sh(self, script: str, *, check: bool = True, input: bytes | None = None) -> str:
        """A shell command in the container, as root (set-up, not a workflow step)."""
        return docker("exec", "-i", self.name, "bash", "-c", script, check=check, input=input)

    def write(self, path: str, data: bytes, mode: str = "0644") -> None:
        q = shlex.quote(path)
        self.sh(f"mkdir -p $(dirname {q}) && cat > {q} && chmod {mode} {q}", input=data)

    def read(self, path: str) -> str:
        return self.sh(f"cat {shlex.quote(path)} 2>/dev/null || true")

    def stop(self) -> None:
        if not self.started:
            return
        if self.keep:
            say(f"kept {self.name}: docker exec -it {self.name} bash; docker rm -f -v {self.name}")
            return
        # What the job's Docker daemon runs first, so nothing is left in the host's cgroups.
        self.sh(
            "docker ps -aq | xargs -r docker rm -f >/dev/null 2>&1;"
            " [ -f /run/dockerd.pid ] && kill $(cat /run/dockerd.pid) 2>/dev/null;"
            " for i in $(seq 50); do [ -e /proc/$(cat /run/dockerd.pid) ] || break;"
            " sleep 0.2; done",
            check=False,
        )
        docker("rm", "-f", "-v", self.name, check=False)
        self.started = False
