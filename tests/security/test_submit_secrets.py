"""Issue 48: `clarke submit` writes an InfluxDB password given in `--influx URL`.

- Kubernetes: the password was a plain env value in clarke-campaign.yaml, a 0644 file.
  It is now only in a Secret, in a manifest of its own (clarke-influx-secret.yaml),
  created 0600 in a 0700 directory; the shards' env holds the URL without it.
- Slurm: the batch script that exports the URL was written 0644 and chmodded 0700 after:
  the password could be read in between. It is now created with its final mode.

"Never readable" is watched with an audit hook: at every file event of the process
(open, chmod, rename, copy, ...) while `clarke submit` runs, every file under the
directory it writes that holds the password must already be closed to other users. A
write followed by a chmod shows as the chmod's event finding the password in a 0644 file.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

SMOKE = "campaigns/smoke.yaml"
PASSWORD = "s3cret-Pw.42"
URL = f"http://clarke:{PASSWORD}@influx.example:8086/clarke"
EVENTS = {
    "open", "os.chmod", "os.chown", "os.rename", "os.link", "os.symlink", "os.remove",
    "os.mkdir", "os.rmdir", "os.truncate", "shutil.copyfile", "shutil.copymode",
    "tempfile.mkstemp", "subprocess.Popen",
}  # fmt: skip


class _Watch:
    """The directory watched (None: the hook does nothing) and what the hook found."""

    directory: Path | None = None
    problems: list[str] = []  # noqa: RUF012  (one watch at a time, per process)
    busy = threading.local()


def _exposed(directory: Path) -> list[str]:
    """The files under `directory` that hold the password and other users may read."""
    out = []
    for root, _, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            try:
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o077:
                    continue
                if PASSWORD.encode() in path.read_bytes():
                    out.append(f"{path.relative_to(directory)} {stat.S_IMODE(st.st_mode):04o}")
            except FileNotFoundError:
                continue
    return out


def _hook(event: str, args: tuple[object, ...]) -> None:
    directory = _Watch.directory
    if directory is None or event not in EVENTS or getattr(_Watch.busy, "on", False):
        return
    _Watch.busy.on = True
    try:
        _Watch.problems += [f"{p} at {event}" for p in _exposed(directory)]
    finally:
        _Watch.busy.on = False


sys.addaudithook(_hook)


@contextmanager
def watching(directory: Path, umask: int = 0o022) -> Iterator[list[str]]:
    """Watch `directory` (under the usual umask: files are 0644 unless made otherwise);
    yields the problems found, the last check made on leaving."""
    old = os.umask(umask)
    _Watch.directory, _Watch.problems = directory, []
    try:
        yield _Watch.problems
    finally:
        _Watch.problems += [f"{p} at the end" for p in _exposed(directory)]
        _Watch.directory = None
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_k8s_manifests_carry_the_password_in_a_secret_only(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "k8s"
    with watching(tmp_path) as problems:
        code, stdout, err = run_cli(
            "submit", "k8s", SMOKE, "--shards", "3", "--campaign-id", "smoke-s",
            "--influx", URL, "--emit", "--out", str(out),
        )  # fmt: skip
        assert code == 0, err
    assert problems == [], "the password was readable by other users: " + "; ".join(problems)
    campaign = (out / "clarke-campaign.yaml").read_text()
    assert PASSWORD not in campaign and PASSWORD not in stdout
    secret_file = out / "clarke-influx-secret.yaml"
    assert PASSWORD in secret_file.read_text()
    assert _mode(secret_file) == 0o600 and _mode(out) == 0o700
    # The Secret is what the shards' env and volume name; the URL they see has no password.
    (secret,) = yaml.safe_load_all(secret_file.read_text())
    assert secret["kind"] == "Secret" and secret["stringData"]["password"] == PASSWORD
    docs = [d for d in yaml.safe_load_all(campaign) if d]
    (job,) = [d for d in docs if d["kind"] == "Job"]
    pod = job["spec"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["CLARKE_INFLUX"]["value"] == "http://influx.example:8086/clarke"
    ref = env["CLARKE_INFLUX_USER"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == secret["metadata"]["name"]
    assert secret["stringData"][ref["key"]] == "clarke"
    volumes = [v for v in pod["volumes"] if "secret" in v]
    assert [v["secret"]["secretName"] for v in volumes] == [secret["metadata"]["name"]]
    # The Secret is applied first.
    applied = [x.split()[-1] for x in stdout.splitlines() if x.startswith("  kubectl apply")]
    assert applied == [
        str(out / n) for n in (secret_file.name, "clarke-campaign.yaml", "clarke-merge.yaml")
    ]


def test_k8s_without_a_password_writes_no_secret(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "k8s"
    code, _, err = run_cli(
        "submit", "k8s", SMOKE, "--shards", "3", "--campaign-id", "smoke-s",
        "--influx", "http://influx.example:8086/clarke", "--emit", "--out", str(out),
    )  # fmt: skip
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["clarke-campaign.yaml", "clarke-merge.yaml"]
    assert "secretKeyRef" not in (out / "clarke-campaign.yaml").read_text()


def test_a_secret_is_not_written_into_a_directory_others_may_change(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path
) -> None:
    """Another user who may write the directory could have planted a link where the
    Secret goes, or swap the file afterwards: refused (exit 3), nothing written."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    code, _, err = run_cli(
        "submit", "k8s", SMOKE, "--shards", "3", "--influx", URL, "--emit", "--out", str(shared),
    )  # fmt: skip
    assert code == 3 and "--out" in err and "Traceback" not in err, err
    assert list(shared.iterdir()) == []


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077], ids=lambda u: f"umask{u:03o}")
def test_the_slurm_script_is_never_readable_by_others(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path, umask: int
) -> None:
    results = tmp_path / "results"
    for attempt in ("first", "again"):  # a second submission rewrites the scripts
        with watching(tmp_path, umask) as problems:
            code, _, err = run_cli(
                "submit", "slurm", SMOKE, "--shards", "3", "--results", str(results),
                "--campaign-id", "smoke-s", "--influx", URL, "--emit",
            )  # fmt: skip
            assert code == 0, err
        assert problems == [], f"{attempt}: the password was readable: " + "; ".join(problems)
        where = results / "smoke-s.slurm"
        assert PASSWORD in (where / "shards.sbatch").read_text()
        assert _mode(where / "shards.sbatch") == 0o700 and _mode(where / "merge.sbatch") == 0o700
        assert not [p for p in where.iterdir() if p.name.endswith(".tmp")]


def test_slurm_scripts_without_a_password_are_0755_whatever_the_umask(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path
) -> None:
    old = os.umask(0o077)
    try:
        code, _, err = run_cli(
            "submit", "slurm", SMOKE, "--shards", "3", "--results", str(tmp_path / "r"),
            "--campaign-id", "smoke-s", "--emit",
        )  # fmt: skip
    finally:
        os.umask(old)
    assert code == 0, err
    assert _mode(tmp_path / "r" / "smoke-s.slurm" / "shards.sbatch") == 0o755
