"""A campaign file from someone else (issue 37, finding 6): the paths it names stay
inside its own directory and Clarke's shipped data; a path outside (absolute, `..`, or
a link that leads out) is refused naming the field, before the file it names is read,
so no error ever quotes a foreign file's lines. Paths given on the command line are the
user's own choice and are not limited."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SMOKE = Path("campaigns/smoke.yaml")
SECRET = "SECRET-LINE-7f3a"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A campaign directory, and a foreign file beside it holding a secret that also
    happens to be a page-model file of the wrong shape."""
    campaign_dir = tmp_path / "campaign"
    campaign_dir.mkdir()
    foreign = tmp_path / "elsewhere" / "secret.yaml"
    foreign.parent.mkdir()
    foreign.write_text(f"models:\n  x: {SECRET}\n{SECRET}-2: 1\n")
    return campaign_dir, foreign


def _campaign(campaign_dir: Path, extra: str) -> Path:
    path = campaign_dir / "c.yaml"
    path.write_text(SMOKE.read_text() + extra)
    return path


def _validate(run_cli, path: Path) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    code, out, err = run_cli("campaign", "validate", str(path))
    return code, out + err


@pytest.mark.parametrize(
    "how",
    ["absolute", "dotdot", "link", "linked-dir", "etc-shadow"],
)
def test_a_models_file_outside_is_refused_unread(
    run_cli,
    layout: tuple[Path, Path],
    how: str,  # type: ignore[no-untyped-def]
) -> None:
    campaign_dir, foreign = layout
    if how == "absolute":
        given = str(foreign)
    elif how == "dotdot":
        given = "../elsewhere/secret.yaml"
    elif how == "link":
        (campaign_dir / "models.yaml").symlink_to(foreign)
        given = "models.yaml"
    elif how == "linked-dir":
        (campaign_dir / "sub").symlink_to(foreign.parent)
        given = "sub/secret.yaml"
    else:
        given = "/etc/shadow"
    code, text = _validate(run_cli, _campaign(campaign_dir, f"pages:\n  models_file: {given}\n"))
    assert code == 2, text
    assert "pages.models_file" in text and "outside" in text, text
    assert SECRET not in text and "root:" not in text and "Traceback" not in text, text


def test_a_models_file_inside_or_shipped_is_read(
    run_cli,
    layout: tuple[Path, Path],  # type: ignore[no-untyped-def]
) -> None:
    campaign_dir, _ = layout
    (campaign_dir / "models").mkdir()
    (campaign_dir / "models" / "mine.yaml").write_text(
        "models:\n  mine:\n    sizes: {small: [2, 3]}\n"
    )
    code, text = _validate(
        run_cli, _campaign(campaign_dir, "pages:\n  models_file: models/mine.yaml\n")
    )
    assert code == 0, text
    # The shipped campaigns name the shipped pages beside them.
    for shipped in ("campaigns/moktan2018.yaml", "campaigns/choffnes2006.yaml"):
        code, text = _validate(run_cli, Path(shipped))
        assert code == 0, text


def test_errors_of_a_file_inside_name_fields(
    run_cli,
    layout: tuple[Path, Path],  # type: ignore[no-untyped-def]
) -> None:
    """A malformed models file inside: the error names the file and the field, and quotes
    no value longer than a short excerpt."""
    campaign_dir, _ = layout
    long_value = "A" * 5000
    (campaign_dir / "m.yaml").write_text(f"models:\n  x: {long_value}\n")
    code, text = _validate(run_cli, _campaign(campaign_dir, "pages:\n  models_file: m.yaml\n"))
    assert code == 2 and "models.x" in text, text
    assert long_value not in text


def test_a_browser_binary_outside_is_refused(
    run_cli,
    layout: tuple[Path, Path],  # type: ignore[no-untyped-def]
) -> None:
    campaign_dir, foreign = layout
    program = foreign.parent / "firefox"
    program.write_text("#!/bin/sh\necho ran > /dev/null\n")
    program.chmod(0o755)
    for given in (str(program), "../elsewhere/firefox"):
        campaign = _campaign(campaign_dir, "")
        campaign.write_text(
            campaign.read_text().replace("engine: selenium", f"engine: selenium\n  binary: {given}")
        )
        code, text = _validate(run_cli, campaign)
        assert code == 2, text
        assert "browser.binary" in text and "outside" in text, text


def test_a_profiles_schedule_file_may_not_lead_out_of_its_directory(
    run_cli,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """A profile given on the command line is the user's; the schedule file it names is
    read from schedules/ beside it, and a link there leading elsewhere is refused."""
    (tmp_path / "schedules").mkdir()
    foreign = tmp_path.parent / f"{tmp_path.name}-foreign.yaml"
    foreign.write_text(f"version: 1\nsteps:\n  - {{at_s: 0, forward: {{rate_mbps: {SECRET}}}}}\n")
    try:
        os.symlink(foreign, tmp_path / "schedules" / "s.yaml")
        profile = tmp_path / "p.yaml"
        profile.write_text(
            Path("profiles/lan.yaml").read_text().split("schedule")[0] + "schedule_file: s.yaml\n"
        )
        code, out, err = run_cli("link", "schedule", "validate", str(profile))
        assert code == 2, out + err
        assert "schedule_file" in err and "outside" in err and SECRET not in err, err
    finally:
        foreign.unlink()
