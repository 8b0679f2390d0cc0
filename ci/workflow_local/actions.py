"""The `uses:` steps of Clarke's workflows, which only GitHub can run, and what the local
runner does in their place. Each one is either *emulated* (the same effect by local
means: a git clone of this repository, this host's toolchains of the pinned versions
mounted read-only, artifacts kept in the run directory) or *skipped* (a GitHub service
that does not exist here: the cache, buildx's cache backend). An action with no entry
here stops the run before anything starts."""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from .machine import Machine, MachineError, Mount

TOOLCACHE = "/opt/hostedtoolcache"


class ActionError(ValueError):
    """A `uses:` step the local runner cannot stand in for (the step and why)."""


@dataclass
class Outcome:
    handling: str  # "emulated" or "skipped"
    note: str
    result: str = "success"
    env: dict[str, str] = field(default_factory=dict)
    path: list[str] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class RunInfo:
    """What an emulation needs to know about the local run."""

    repo: Path
    sha: str
    ref_name: str
    dirty: bool
    run_dir: Path
    offline_stack: bool


@dataclass
class StepIO:
    machine: Machine
    inputs: dict[str, Any]
    workspace: str
    run: RunInfo


def _out(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


@cache
def host_go() -> tuple[str, str]:
    try:
        version, root = _out("go", "env", "GOVERSION", "GOROOT").splitlines()
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        raise ActionError(f"this host has no usable Go ({e})") from None
    return version.removeprefix("go"), root


@cache
def host_node() -> tuple[str, str, str]:
    node = shutil.which("node")
    if not node:
        raise ActionError("this host has no Node.js")
    version = _out(node, "--version").removeprefix("v")
    npm_dir = Path(_out("npm", "root", "-g")) / "npm"
    return version, os.path.realpath(node), str(npm_dir)


@cache
def host_rust() -> tuple[str, str]:
    try:
        version = _out("rustc", "--version").split()[1]
        sysroot = _out("rustc", "--print", "sysroot")
    except (OSError, subprocess.CalledProcessError, IndexError) as e:
        raise ActionError(f"this host has no usable Rust ({e})") from None
    return version, sysroot


@cache
def host_uv() -> tuple[str, str]:
    uv = os.environ.get("UV") or shutil.which("uv")  # `uv run` names its own binary in UV
    if not uv:
        raise ActionError("this host has no uv")
    with open(uv, "rb") as f:
        if f.read(4) != b"\x7fELF":
            raise ActionError(f"{uv} is not uv's binary (a wrapper?): run through `uv run`")
    return _out(uv, "--version").split()[1], uv


def _same(action: str, key: str, wanted: Any, have: str) -> None:
    if str(wanted) != have:
        raise ActionError(
            f"{action}: {key} {wanted!r}, but this host has {have}: the local run uses this "
            "host's toolchain, so the workflow must pin the version this host has"
        )


class Emulation:
    action = ""

    def mounts(self, inputs: dict[str, Any]) -> list[Mount]:
        return []

    def run(self, io: StepIO) -> Outcome:
        raise NotImplementedError


class Checkout(Emulation):
    action = "actions/checkout"

    def run(self, io: StepIO) -> Outcome:
        m, ws, run = io.machine, io.workspace, io.run
        bundle = run.run_dir / "checkout.bundle"
        subprocess.run(
            ["git", "-C", str(run.repo), "bundle", "create", "-q", str(bundle), "HEAD"], check=True
        )
        m.write("/home/runner/work/_checkout.bundle", bundle.read_bytes())
        bundle.unlink()
        origin = "/home/runner/work/_origin.git"
        m.sh(
            f"git clone -q --bare /home/runner/work/_checkout.bundle {origin}"
            f" && git clone -q {origin} {ws} && cd {ws}"
            f" && git checkout -q -B '{run.ref_name}' {run.sha}"
        )
        note = f"git clone of commit {run.sha[:12]} (origin: a bare copy in the container)"
        if run.dirty:
            note += "; uncommitted changes are not in it, as on GitHub"
        if run.offline_stack:
            note += "; " + self._offline_stack(m, ws)
        return Outcome("emulated", note)

    @staticmethod
    def _offline_stack(m: Machine, ws: str) -> str:
        """docker-compose.yml becomes the canonical stack with the offline override: the
        canonical images cannot be built without their registries."""
        name = m.sh(f"sed -n 's/^name: *//p' {ws}/docker-compose.yml").strip() or "clarke"
        wrapper = (
            "# ci/run-workflow-locally --offline-stack: canonical stack + offline override\n"
            f"name: {name}\n"
            "include:\n  - path: [docker-compose.canonical.yml, docker-compose.offline.yml]\n"
        )
        m.sh(f"mv {ws}/docker-compose.yml {ws}/docker-compose.canonical.yml")
        m.write(f"{ws}/docker-compose.yml", wrapper.encode())
        return "docker-compose.yml = canonical stack + docker-compose.offline.yml (--offline-stack)"


class HostToolSetup(Emulation):
    """A setup action whose tool is this host's own, of the version the workflow pins,
    mounted read-only at `mount` under the tool cache, with `bin_dir` put on the PATH."""

    label = ""  # the tool's name in the step's note
    version_input = ""  # the action's input that pins the version
    mount = ""
    bin_dir = ""

    @staticmethod
    def host() -> tuple[str, str]:
        """This host's version of the tool and the path to mount."""
        raise NotImplementedError

    def mounts(self, inputs: dict[str, Any]) -> list[Mount]:
        version, source = self.host()
        _same(self.action, self.version_input, inputs.get(self.version_input), version)
        return [Mount(source, f"{TOOLCACHE}/{self.mount.format(version=version)}")]

    def run(self, io: StepIO) -> Outcome:
        version, _ = self.host()
        return Outcome(
            "emulated",
            f"this host's {self.label} {version}, mounted read-only",
            path=[f"{TOOLCACHE}/{self.bin_dir.format(version=version)}"],
        )


class SetupGo(HostToolSetup):
    action = "actions/setup-go"
    label, version_input, host = "Go", "go-version", staticmethod(host_go)
    mount, bin_dir = "go/{version}/x64", "go/{version}/x64/bin"


class SetupNode(Emulation):
    action = "actions/setup-node"

    def mounts(self, inputs: dict[str, Any]) -> list[Mount]:
        version, node, npm_dir = host_node()
        _same(self.action, "node-version", inputs.get("node-version"), version)
        base = f"{TOOLCACHE}/node/{version}/x64"
        return [Mount(node, f"{base}/bin/node"), Mount(npm_dir, f"{base}/lib/node_modules/npm")]

    def run(self, io: StepIO) -> Outcome:
        version, _, _ = host_node()
        base = f"{TOOLCACHE}/node/{version}/x64"
        io.machine.sh(
            f"ln -sf ../lib/node_modules/npm/bin/npm-cli.js {base}/bin/npm"
            f" && ln -sf ../lib/node_modules/npm/bin/npx-cli.js {base}/bin/npx"
        )
        return Outcome(
            "emulated", f"this host's Node.js {version}, mounted read-only", path=[f"{base}/bin"]
        )


class SetupRust(Emulation):
    action = "actions-rust-lang/setup-rust-toolchain"

    def mounts(self, inputs: dict[str, Any]) -> list[Mount]:
        version, sysroot = host_rust()
        _same(self.action, "toolchain", inputs.get("toolchain"), version)
        for comp in re.split(r"[,\s]+", str(inputs.get("components", "")).strip()):
            binary = {"rustfmt": "rustfmt", "clippy": "cargo-clippy"}.get(comp)
            if comp and (binary is None or not (Path(sysroot) / "bin" / binary).exists()):
                raise ActionError(
                    f"{self.action}: component {comp!r} is not in this host's toolchain"
                )
        return [Mount(sysroot, f"/root/.rustup/toolchains/{version}-x86_64-unknown-linux-gnu")]

    def run(self, io: StepIO) -> Outcome:
        version, _ = host_rust()
        env = {"RUSTFLAGS": str(io.inputs["rustflags"])} if "rustflags" in io.inputs else {}
        return Outcome(
            "emulated",
            f"this host's Rust {version} (with its rustfmt and clippy), mounted read-only",
            env=env,
            path=[f"/root/.rustup/toolchains/{version}-x86_64-unknown-linux-gnu/bin"],
        )


class SetupUv(HostToolSetup):
    action = "astral-sh/setup-uv"
    label, version_input, host = "uv", "version", staticmethod(host_uv)
    mount, bin_dir = "uv/{version}/x86_64/uv", "uv/{version}/x86_64"


class Skip(Emulation):
    def __init__(self, action: str, note: str, outputs: dict[str, str] | None = None) -> None:
        self.action = action
        self.note = note
        self.outputs = outputs or {}

    def run(self, io: StepIO) -> Outcome:
        return Outcome("skipped", self.note, outputs=self.outputs)


def _abs(path: str, ws: str) -> str:
    if any(c in path for c in "*?[!"):
        raise ActionError(
            f"artifact path {path!r}: wildcards are not supported by the local runner"
        )
    return posixpath.normpath(path if path.startswith("/") else posixpath.join(ws, path))


class UploadArtifact(Emulation):
    action = "actions/upload-artifact"

    def run(self, io: StepIO) -> Outcome:
        name = str(io.inputs.get("name") or "artifact")
        paths = [
            _abs(p.strip(), io.workspace) for p in str(io.inputs["path"]).splitlines() if p.strip()
        ]
        present = [
            p for p in paths if io.machine.sh(f"test -e '{p}' && echo y", check=False).strip()
        ]
        if not present:
            mode = str(io.inputs.get("if-no-files-found", "warn"))
            result = "failure" if mode == "error" else "success"
            return Outcome(
                "emulated", f"no files at {', '.join(paths)}: nothing kept ({mode})", result
            )
        if len(present) == 1:
            single = present[0]
            is_dir = io.machine.sh(f"test -d '{single}' && echo y", check=False).strip()
            root, members = (
                (single, ["."])
                if is_dir
                else (posixpath.dirname(single), [posixpath.basename(single)])
            )
        else:
            root = posixpath.commonpath(present)
            members = [posixpath.relpath(p, root) for p in present]
        dest = io.run.run_dir / "artifacts" / name
        replaced = dest.exists()
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        tar = subprocess.Popen(
            ["docker", "exec", io.machine.name, "tar", "-C", root, "-cf", "-", *members],
            stdout=subprocess.PIPE,
        )
        subprocess.run(["tar", "-C", str(dest), "-xf", "-"], stdin=tar.stdout, check=True)
        if tar.wait() != 0:
            raise MachineError(f"reading {present} from {io.machine.name}")
        files = sum(1 for p in dest.rglob("*") if p.is_file())
        note = f"kept in the run directory as artifacts/{name} ({files} files)"
        return Outcome(
            "emulated", note + ("; replaced an earlier one of that name" if replaced else "")
        )


class DownloadArtifact(Emulation):
    action = "actions/download-artifact"

    def run(self, io: StepIO) -> Outcome:
        store = io.run.run_dir / "artifacts"
        target = _abs(str(io.inputs.get("path") or "."), io.workspace)
        if io.inputs.get("name"):
            name = str(io.inputs["name"])
            if not (store / name).is_dir():
                return Outcome("emulated", f"artifact {name!r} not found in this run", "failure")
            picks = [(store / name, target)]
        else:
            pattern = str(io.inputs.get("pattern") or "*")
            merge = str(io.inputs.get("merge-multiple", "false")).lower() == "true"
            names = sorted(
                p.name for p in store.glob("*") if p.is_dir() and fnmatch.fnmatch(p.name, pattern)
            )
            picks = [(store / n, target if merge else posixpath.join(target, n)) for n in names]
        for src, dst in picks:
            io.machine.sh(f"mkdir -p '{dst}'")
            tar = subprocess.Popen(["tar", "-C", str(src), "-cf", "-", "."], stdout=subprocess.PIPE)
            subprocess.run(
                ["docker", "exec", "-i", io.machine.name, "tar", "-C", dst, "-xf", "-"],
                stdin=tar.stdout,
                check=True,
            )
            tar.wait()
        return Outcome("emulated", f"{len(picks)} artifact(s) of this run copied to {target}")


EMULATIONS: dict[str, Callable[[], Emulation]] = {
    e.action: e
    for e in (Checkout, SetupGo, SetupNode, SetupRust, SetupUv, UploadArtifact, DownloadArtifact)
}
SKIPPED = {
    "actions/cache": "no cache service here: nothing restored (a first run), nothing saved",
    "docker/setup-buildx-action": "no buildx here: compose builds with the daemon's own builder",
    "crazy-max/ghaction-github-runtime": "no Actions runtime here: ACTIONS_RUNTIME_TOKEN unset",
}


def emulation(uses: str) -> Emulation:
    """The stand-in for a `uses:` reference (owner/name@ref)."""
    action, _, ref = uses.partition("@")
    if not ref:
        raise ActionError(f"uses: {uses}: no version")
    if action in EMULATIONS:
        return EMULATIONS[action]()
    if action in SKIPPED:
        outputs = {"name": ""} if action == "docker/setup-buildx-action" else {}
        return Skip(action, SKIPPED[action], outputs)
    raise ActionError(
        f"uses: {uses}: no local stand-in for this action (ci/workflow_local/actions.py): "
        "add one, or run the workflow on GitHub"
    )
