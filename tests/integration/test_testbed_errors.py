"""`clarke testbed up` refuses clearly (exit 2 for bad input, 3 for the environment)
and leaves nothing behind: bad profile, bad id, not root, no /dev/net/tun, no satlink,
a satlink that dies at start-up (rollback of everything already created)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_testbed import NOTHING, _leftovers

from conftest import need

pytestmark = pytest.mark.root


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    need(os.geteuid() == 0, "needs root (network namespaces)")
    need(Path("/dev/net/tun").exists(), "needs /dev/net/tun")
    from clarke.testbed import lifecycle

    state_dir = tmp_path / "state"
    monkeypatch.setenv("CLARKE_STATE_DIR", str(state_dir))
    before = _leftovers(state_dir)
    need(before == NOTHING, f"testbed leftovers exist already: {before}")
    try:
        yield state_dir
    finally:
        lifecycle.down_all()
    assert _leftovers(state_dir) == NOTHING


def test_unknown_profile(env: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run_cli("testbed", "up", "--profile", "nope")
    assert code == 2
    assert "unknown link profile 'nope'" in err and "geo" in err
    assert _leftovers(env) == NOTHING


def test_invalid_profile_file(env: Path, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text("description: x\nforward: {rate_mbps: -1, uplink_delay_ms: 1}\n")
    code, out, err = run_cli("testbed", "up", "--profile", str(bad))
    assert code == 2
    assert "forward.rate_mbps" in err and "forward.downlink_delay_ms" in err and "return" in err
    assert "Traceback" not in err
    assert _leftovers(env) == NOTHING


@pytest.mark.parametrize("bad_id", ["64", "-1", "x"])
def test_bad_id(env: Path, run_cli, bad_id: str) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run_cli("testbed", "up", "--profile", "lan", "--id", bad_id)
    assert code == 2 and "--id" in err
    assert _leftovers(env) == NOTHING


def test_not_root(env: Path, run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, out, err = run_cli("testbed", "up", "--profile", "lan")
    assert code == 3 and err.startswith("Environment: the netns testbed needs root")
    assert _leftovers(env) == NOTHING


def test_no_tun(env: Path, run_cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from clarke.place import netns

    monkeypatch.setattr(netns, "TUN", tmp_path / "no-tun")
    code, out, err = run_cli("testbed", "up", "--profile", "lan")
    assert code == 3 and "no-tun is missing" in err
    assert _leftovers(env) == NOTHING


def test_no_satlink_binary(env: Path, run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CLARKE_SATLINK", "/nonexistent/satlink")
    code, out, err = run_cli("testbed", "up", "--profile", "lan")
    assert code == 3 and "satlink binary is missing" in err
    assert _leftovers(env) == NOTHING


def test_satlink_dying_at_start_rolls_everything_back(
    env: Path, run_cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    fake = tmp_path / "satlink"
    fake.write_text("#!/bin/sh\necho 'satlink: cannot open the TUN device' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CLARKE_SATLINK", str(fake))
    code, out, err = run_cli("testbed", "up", "--profile", "geo")
    assert code == 3, err
    assert "exited during start-up" in err and "cannot open the TUN device" in err
    assert _leftovers(env) == NOTHING
    assert not (env / "0").exists()


def test_explicit_netem_is_refused_when_the_kernel_lacks_it(env: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    from clarke.link import netem

    ok, _ = netem.netem_available()
    if ok:
        pytest.skip("this kernel has netem")
    code, out, err = run_cli("testbed", "up", "--profile", "lan", "--link", "netem")
    assert code == 3 and "the netem link is not available" in err and "--link satlink" in err
    assert "no netem qdisc" in err
    assert _leftovers(env) == NOTHING


@pytest.fixture
def path_without_opensand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This host's PATH as it would be without OpenSAND: every other program stays
    reachable (ip, satlink, ...), so only OpenSAND's absence can make `up` refuse."""
    from clarke.link.opensand import entity

    bin_dir = tmp_path / "bin-without-opensand"
    bin_dir.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not directory or not Path(directory).is_dir():
            continue
        for program in Path(directory).iterdir():
            link = bin_dir / program.name
            if program.name.startswith("opensand") or link.exists():
                continue
            link.symlink_to(program)
    monkeypatch.setenv("PATH", str(bin_dir))
    entity._installed_version.cache_clear()
    yield
    entity._installed_version.cache_clear()


def test_opensand_backend_refuses_without_opensand(  # type: ignore[no-untyped-def]
    env: Path, path_without_opensand: None, run_cli
) -> None:
    code, out, err = run_cli("testbed", "up", "--profile", "geo", "--link", "opensand")
    assert code == 3 and "OpenSAND is not installed" in err and "--link satlink" in err
    assert _leftovers(env) == NOTHING


def test_down_needs_id_or_all(env: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run_cli("testbed", "down")
    assert code == 2 and "--id ID or --all" in err
    code, out, err = run_cli("testbed", "down", "--id", "7")
    assert code == 0 and "nothing to remove" in out


def test_run_checks_every_part_before_anything_runs(  # type: ignore[no-untyped-def]
    env: Path, run_cli, tmp_path: Path
) -> None:
    """Issue 21: a missing part is found before the testbed, the link checks or the
    results directory exist (exit 3, the part named); a profile the link cannot take
    too (exit 2)."""
    from clarke.link import netem

    results = tmp_path / "results"
    if not netem.netem_available()[0]:
        code, out, err = run_cli(
            "run", "campaigns/smoke.yaml", "--link", "netem", "--results", str(results)
        )
        assert code == 3 and "no netem qdisc" in err
    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        Path("campaigns/smoke.yaml")
        .read_text()
        .replace("engine: selenium", "engine: selenium\n  binary: bin/no-firefox")
    )
    code, out, err = run_cli("run", str(campaign), "--results", str(results))
    # A path beside the campaign (docs/campaigns.md), taken relative to it.
    assert code == 3 and "no Firefox found" in err and str(tmp_path / "bin/no-firefox") in err
    code, out, err = run_cli(
        "run", "campaigns/smoke.yaml", "--link", "opensand", "--results", str(results)
    )
    assert code == 2 and "lan: forward.rate_mbps" in err
    assert not results.exists() and _leftovers(env) == NOTHING
