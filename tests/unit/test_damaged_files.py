"""A damaged or missing file a command is pointed at exits 2 naming the file, never
with a traceback: a damaged meta.json, a journal that is no file, an --out into a
missing directory."""

from __future__ import annotations

import shutil
from pathlib import Path

RECORDED = Path("tests/data/recorded-lan")


def test_damaged_meta_json(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path / "r"
    shutil.copytree(RECORDED, d)
    (d / "meta.json").write_text("{bad")
    for argv in (
        ["report", str(d)],
        ["results", "export", str(d), "--out", str(tmp_path / "x.csv")],
    ):
        code, _, err = run_cli(*argv)
        assert code == 2, (argv, err)
        assert f"{d / 'meta.json'}: damaged, not JSON" in err and "Traceback" not in err


def test_journal_that_is_no_file(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path / "r"
    shutil.copytree(RECORDED, d)
    (d / "journal.jsonl").unlink()
    (d / "journal.jsonl").mkdir()
    code, _, err = run_cli("report", str(d))
    assert code == 2 and "not a Clarke results directory" in err


def test_export_into_a_missing_directory(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "missing" / "x.csv"
    code, _, err = run_cli("results", "export", str(RECORDED), "--out", str(out))
    assert code == 2 and f"{out}: No such file or directory" in err
