"""A site archive is someone else's file (issue 48): links to /dev/zero or to a copy,
FIFOs, sparse bodies, bodies declared 10 GiB, IP literals and localhost as origins,
header values that end the header, interim statuses, fields the model does not have.
Every hostile archive of tests/hostile_sites.py gets the same verdict from `clarke site
check` and from origin's replay (`origin --check-site`), each in seconds and a bounded
amount of memory; staging copies only what site.json names."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clarke.errors import ValidationFailed
from clarke.server.origin import origin_binary
from clarke.sites import archive, staging
from clarke.sites.archive_files import MIB, Limits
from conftest import need
from hostile_sites import CASES, Case, clarke_each, run_measured, write_case
from site_archive import write_three_origins

PEAK_MB = 300  # what one check may take, whatever the archive holds
SECONDS = 10


def _origin() -> Path:
    binary = origin_binary()
    need(binary is not None, "origin is not built (ci/build.sh builds it)")
    assert binary is not None
    return binary


def _runner_verdict(d: Path) -> str | None:
    try:
        archive.read(d)
    except ValidationFailed as e:
        return str(e)
    return None


@pytest.mark.timing
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_runner_and_origin_give_one_verdict(case: Case, tmp_path: Path) -> None:
    d = write_case(case, tmp_path)
    runner = _runner_verdict(d)
    origin = run_measured([str(_origin()), "--check-site", str(d)], timeout=60)
    print(f"{case.name}: runner {runner!r}; origin exit {origin.code} {origin.err.strip()!r}, "
          f"{origin.seconds:.2f} s, {origin.peak_mb:.0f} MB")  # fmt: skip
    assert "panicked" not in origin.err, origin.err
    if case.servable:
        assert runner is None, runner
        assert origin.code == 0, origin.err
    else:
        assert runner is not None, "the runner took it"
        assert origin.code == 2, f"origin exit {origin.code}: {origin.out} {origin.err}"
        assert case.says in runner, runner
        assert case.says.lower() in origin.err.lower(), origin.err
    assert origin.seconds < SECONDS and origin.peak_mb < PEAK_MB


@pytest.mark.timing
def test_site_check_takes_seconds_and_bounded_memory_on_every_one(tmp_path: Path) -> None:
    """`clarke site check` on every archive, in one process of its own: exit 0 or 2 as
    above, never a traceback, each within SECONDS, and the process's peak memory (from
    wait4) within PEAK_MB over all of them."""
    dirs = {str(write_case(c, tmp_path)): c for c in CASES}
    runs, m = clarke_each([["site", "check", d] for d in dirs])
    for r in runs:
        case = dirs[r.args[-1]]
        assert r.code == (0 if case.servable else 2), (case.name, r)
        assert not r.traceback and r.seconds < SECONDS, (case.name, r)
    print(f"site check over {len(CASES)} archives: peak {m.peak_mb:.0f} MB, "
          f"slowest {max(r.seconds for r in runs):.2f} s")  # fmt: skip
    assert m.peak_mb < PEAK_MB


def test_staging_copies_only_site_json_and_the_bodies_it_names(tmp_path: Path) -> None:
    others = next(c for c in CASES if c.name == "files-it-does-not-name")
    d = write_case(others, tmp_path / "in")
    pages = tmp_path / "pages"
    name = staging.stage(d, pages)
    staged = pages / staging.SITES / name
    names = {e.body for e in archive.read(d).archive.exchanges if e.body}
    assert sorted(p.name for p in staged.iterdir()) == [archive.BODIES, archive.SITE_JSON]
    assert {p.name for p in (staged / archive.BODIES).iterdir()} == names
    for p in staged.rglob("*"):
        assert not p.is_symlink() and (p.is_file() or p.is_dir()), p
        assert p.stat().st_nlink == 1 or p.is_dir(), f"{p} is a hard link to the archive's file"
    assert (staged / archive.SITE_JSON).read_bytes() == (d / archive.SITE_JSON).read_bytes()


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if not c.servable and c.says in ("link", "FIFO")],
    ids=lambda c: c.name,
)
def test_staging_a_linked_archive_copies_nothing(case: Case, tmp_path: Path) -> None:
    d = write_case(case, tmp_path / "in")
    pages = tmp_path / "pages"
    with pytest.raises(ValidationFailed, match=case.says):
        staging.stage(d, pages)
    assert not list((pages / staging.SITES).glob("*")) if (pages / staging.SITES).exists() else True


def test_the_limits_are_raised_by_an_option_on_both_readers(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli,  # type: ignore[no-untyped-def]
) -> None:
    """A 1.5 MiB archive against a 1 MiB limit: refused by both, named with the option
    that raises it; taken by both once it is raised."""
    d = write_three_origins(tmp_path / "big")
    data = json.loads((d / archive.SITE_JSON).read_text())
    body = os.urandom(3 * MIB // 2)
    sha = archive.sha256_of(body)
    (d / archive.BODIES / sha).write_bytes(body)
    data["exchanges"][3] |= {"body": sha, "size": len(body)}
    (d / archive.SITE_JSON).write_text(json.dumps(data))
    with pytest.raises(ValidationFailed, match="--max-site-mb"):
        archive.read(d, Limits(body_bytes=2 * MIB, site_bytes=MIB))
    with pytest.raises(ValidationFailed, match="--max-body-mb"):
        archive.read(d, Limits(body_bytes=MIB, site_bytes=4 * MIB))
    archive.read(d, Limits(body_bytes=2 * MIB, site_bytes=2 * MIB))
    origin = str(_origin())
    small = run_measured([origin, "--check-site", str(d), "--site-max-mb", "1"])
    assert small.code == 2 and "--site-max-mb" in small.err, small.err
    small = run_measured([origin, "--check-site", str(d), "--site-max-body-mb", "1"])
    assert small.code == 2 and "--site-max-body-mb" in small.err, small.err
    assert run_measured([origin, "--check-site", str(d), "--site-max-mb", "2"]).code == 0
    monkeypatch.setenv("CLARKE_SITE_MAX_MB", "1")
    code, _, err = run_cli("site", "check", str(d))
    assert code == 2 and "CLARKE_SITE_MAX_MB" in err, err
    code, _, err = run_cli("site", "check", str(d), "--max-site-mb", "2")
    assert code == 0, err
