"""The offline compose stack with a canonical part swapped in from a locally built image
(OpenSAND in the link roles, OpenLiteSpeed in the server role), running a shard of the
demo campaign to its end: shared by the tests of each part. Those run where the image
exists and skip elsewhere (CI cannot build them), saying how to build it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from clarke.campaign.dimensions import HTTP
from clarke.campaign.plan import plan_file
from clarke.results.journal import Journal
from clarke.results.record import RunRecord, Status
from conftest import need

ROOT = Path(__file__).resolve().parents[1]
# The marks of every test that brings the compose stack up.
COMPOSE_MARKS = [
    pytest.mark.root,
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.browser,
    # One compose project (`clarke`), its ports and subnets: one stack at a time.
    pytest.mark.xdist_group("compose"),
]
DEMO = ROOT / "campaigns/demo.yaml"
SHARD = (1, 4)  # 3 of the demo's 12 runs: HTTP/1.1, /2 and /3 on the GEO link


def image_present(image: str) -> bool:
    if shutil.which("docker") is None:
        return False
    return (
        subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0
    )


@contextmanager
def demo_shard_with(
    tmp: Path, image: str, how_to_build: str, overlay: str, services: tuple[str, ...]
) -> Iterator[tuple[Path, int, str]]:
    """`docker compose up` of the offline stack plus `overlay` (which puts `image` in
    `services`, whose Clarke is this checkout's, mounted over the image's), until the
    client has run the demo's shard; yields the results directory, the client's exit
    code and the logs of the client and those services. `down -v` after, also on
    failure, and nothing of the project may be left."""
    if not image_present(image):
        # pytest.skip, not need(): CI cannot build the image, so it skips there too.
        pytest.skip(f"no {image} image: {how_to_build}; skipped, also in CI")
    need(os.geteuid() == 0, "root (the compose stack's TUN devices and sysctls)")
    results = tmp / "results"
    results.mkdir()
    code = tmp / "this-checkout.yml"
    mount = {"volumes": [f"{ROOT / 'runner/clarke'}:/opt/clarke/runner/clarke:ro"]}
    code.write_text(json.dumps({"services": {s: mount for s in services}}))
    files = ["-f", "docker-compose.yml", "-f", "docker-compose.offline.yml",
             "-f", overlay, "-f", str(code)]  # fmt: skip
    env = {
        **os.environ,
        "CAMPAIGN": "demo",
        "SHARD": f"{SHARD[0]}/{SHARD[1]}",
        "RESULTS_DIR": str(results),
        "LINK_CHECK": "quick",
        "CLARKE_GIT_REV": f"compose-{image.split(':')[0]}-test",
    }

    def compose(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["docker", "compose", *files, *args], cwd=ROOT, env=env,
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    images = subprocess.run(["sh", "ci/offline-images"], cwd=ROOT, capture_output=True, text=True)
    assert images.returncode == 0, images.stdout + images.stderr
    try:
        up = compose("up", "-d", "--build", timeout=3600)
        assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
        client = compose("ps", "-a", "-q", "client", timeout=60).stdout.strip()
        waited = subprocess.run(
            ["docker", "wait", client], capture_output=True, text=True, timeout=1200
        )
        log = compose("logs", "--no-color", "client", *services, timeout=60).stdout
        yield results, int(waited.stdout.strip() or -1), log
    finally:
        down = compose("down", "-v", "--remove-orphans", timeout=300)
        assert down.returncode == 0, down.stderr
        label = "label=com.docker.compose.project=clarke"
        left = subprocess.run(
            ["docker", "ps", "-aq", "--filter", label], capture_output=True, text=True
        ).stdout.split()
        assert left == [], left


def every_planned_run_ok(stack: tuple[Path, int, str]) -> tuple[Path, list[RunRecord]]:
    """What [`demo_shard_with`] yielded, judged: the client exited 0 and every run of
    the shard (HTTP/1.1, /2 and /3) was recorded ok; the results directory and the
    records."""
    results, exit_code, log = stack
    assert exit_code == 0, log[-6000:]
    (d,) = [p for p in results.iterdir() if (p / "journal.jsonl").is_file()]
    records = list(Journal.in_dir(d).records())
    ok = {r.run_id for r in records if r.status is Status.ok}
    planned = plan_file(DEMO).shard(*SHARD)
    assert {r.cell[HTTP] for r in planned} == {"1.1", "2", "3"}
    assert ok == {r.run_id for r in planned}, [(r.run_id, r.reason) for r in records]
    return d, records
