"""`clarke site import` and `clarke site check` as a user runs them: what they print, and
exit 2 naming the file and the entry for anything broken, never a traceback (issue 33)."""

from __future__ import annotations

import json
from pathlib import Path

from site_files import sample_flows, write_har, write_warc


def test_import_writes_an_archive_that_check_reads(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    har = write_har(tmp_path / "s.har", sample_flows())
    code, out, err = run_cli("site", "import", str(har), "-o", str(tmp_path / "s"))
    assert code == 0, err
    assert "site www.site.test, 6 exchanges from 4 origins" in out
    code, out, err = run_cli("site", "check", str(tmp_path / "s"), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert (report["name"], report["origins"], report["total"]["requests"]) == (
        "www.site.test",
        4,
        6,
    )
    warc = write_warc(tmp_path / "s.warc.gz", sample_flows())
    code, out, err = run_cli("site", "import", str(warc), "-o", str(tmp_path / "w"), "--json")
    assert code == 0, err
    assert json.loads(out)["exchanges"] == 6


def test_an_archive_is_never_written_over(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    har = write_har(tmp_path / "s.har", sample_flows())
    assert run_cli("site", "import", str(har), "-o", str(tmp_path / "s"))[0] == 0
    code, _, err = run_cli("site", "import", str(har), "-o", str(tmp_path / "s"))
    assert code == 2 and "exists and is not empty" in err and "Traceback" not in err


def test_a_har_without_bodies_exits_2_naming_file_and_entry(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    har = write_har(tmp_path / "s.har", sample_flows())
    data = json.loads(har.read_text())
    del data["log"]["entries"][3]["response"]["content"]["text"]
    har.write_text(json.dumps(data))
    code, _, err = run_cli("site", "import", str(har), "-o", str(tmp_path / "s"))
    assert code == 2 and "Traceback" not in err
    assert f"{har}: log.entries[3]: GET https://img.cdn.test/a.png: the response has" in err
    assert not (tmp_path / "s").exists()


def test_files_that_are_not_recordings_exit_2_naming_the_file(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    not_json = tmp_path / "x.har"
    not_json.write_text("<html>")
    not_warc = tmp_path / "x.warc"
    not_warc.write_text("hello")
    no_entries = tmp_path / "e.har"
    no_entries.write_text('{"log": {}}')
    for path, expected in [
        (not_json, "not valid JSON"),
        (not_warc, "not a WARC file warcio can read"),
        (no_entries, "log.entries"),
    ]:
        code, _, err = run_cli("site", "import", str(path), "-o", str(tmp_path / "out"))
        assert code == 2, err
        assert str(path) in err and expected in err and "Traceback" not in err
    other = tmp_path / "x.txt"
    other.write_text("")
    code, _, err = run_cli("site", "import", str(other), "-o", str(tmp_path / "out"))
    assert code == 2 and "say --format har or warc" in err


def test_check_of_a_directory_without_an_archive_exits_2(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli("site", "check", str(tmp_path))
    assert code == 2 and f"{tmp_path}/site.json: cannot read" in err
