"""Recordings are someone else's files too (issue 48): `clarke site import` stops a
decompression bomb (gzip and brotli, in a body and in the WARC's own gzip layer) at the
archive's limits, exit 2 naming the record, in seconds and a bounded amount of memory;
a file cut short, a body that is not what its coding says, odd dates, names and status
lines end as exit 2 or as entries left out, never as a traceback or a silent loss."""

from __future__ import annotations

import base64
import gzip
import json
import sys
from pathlib import Path

import brotli
import pytest

from clarke.sites import archive, composition
from clarke.sites.archive_files import MIB
from hostile_sites import (
    GIB,
    HTML,
    PAGE,
    brotli_bomb_warc,
    clarke_each,
    gzip_bomb_warc,
    http_response,
    outer_bomb_warc_gz,
    page_warc,
    run_measured,
    warc_head,
    warc_record,
)

PEAK_MB = 300  # what an import may take, whatever the recording decodes to
SECONDS = 20  # a loaded two-core machine; the figures are printed


def _resource_bomb(path: Path) -> Path:
    """A .warc.gz whose gzip layer holds a 10 GiB `resource` record (one the importer
    leaves out) after the page: only the file's own bound stops it."""
    import zlib

    from hostile_sites import ZEROS_BLOCK

    page = warc_record(PAGE, http_response([("Content-Type", "text/html")], HTML))
    co = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    start = co.compress(warc_head(PAGE + "video", 10 * GIB, "resource", 2))
    start += co.flush(zlib.Z_FULL_FLUSH)
    first = co.compress(bytes(ZEROS_BLOCK)) + co.flush(zlib.Z_FULL_FLUSH)
    block = co.compress(bytes(ZEROS_BLOCK)) + co.flush(zlib.Z_FULL_FLUSH)
    bomb = start + first + block * (10 * GIB // ZEROS_BLOCK - 1) + co.flush()
    # A gzip member per record, as WARC writers make them.
    path.write_bytes(gzip.compress(page, mtime=0) + bomb)
    return path


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bombs")
    return {
        "gzip body": gzip_bomb_warc(d / "gzip.warc"),
        "brotli body": brotli_bomb_warc(d / "br.warc"),
        "gzip layer, body": outer_bomb_warc_gz(d / "outer.warc.gz"),
        "gzip layer, header line": outer_bomb_warc_gz(d / "line.warc.gz", where="header"),
        "gzip layer, a record left out": _resource_bomb(d / "resource.warc.gz"),
    }


@pytest.mark.timing
def test_bombs_stop_at_the_limits_in_bounded_memory(bombs: dict[str, Path], tmp_path: Path) -> None:
    """Each bomb imported by `clarke site import` in a process of its own, whose peak
    memory (wait4) is the import's."""
    expected = {
        "gzip body": "--max-body-mb",
        "brotli body": "--max-body-mb",
        "gzip layer, body": "--max-body-mb",
        "gzip layer, header line": "header line longer than",
        "gzip layer, a record left out": "once decompressed",
    }
    for i, (name, bomb) in enumerate(bombs.items()):
        out = tmp_path / f"out{i}"
        m = run_measured(
            [sys.executable, "-m", "clarke", "site", "import", str(bomb), "-o", str(out)]
        )
        size = bomb.stat().st_size / MIB
        said = m.err.strip()[-160:]
        print(f"{name}: {size:.1f} MB on disk -> exit {m.code} in {m.seconds:.2f} s, "
              f"peak {m.peak_mb:.0f} MB: {said}")  # fmt: skip
        assert m.code == 2 and "Traceback" not in m.err, (name, m.err)
        assert expected[name] in m.err, (name, m.err)
        assert m.seconds < SECONDS and m.peak_mb < PEAK_MB, (name, m.seconds, m.peak_mb)
        assert not out.exists(), "a failed import left something behind"


def test_a_brotli_coded_warc_body_imports(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    """warcio 1.8.1 could not decode br with Brotli 1.1 (every such body failed)."""
    html = HTML * 50
    warc = page_warc(
        tmp_path / "br.warc",
        [("Content-Type", "text/html"), ("Content-Encoding", "br")],
        brotli.compress(html),
    )
    code, _, err = run_cli("site", "import", str(warc), "-o", str(tmp_path / "a"))
    assert code == 0, err
    site = archive.read(tmp_path / "a")
    (e,) = site.archive.exchanges
    assert e.content_encoding == "br" and site.body(e) == html


def test_a_cut_short_or_mislabelled_warc_exits_2(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    html = HTML * 400
    whole = gzip.compress(
        warc_record(PAGE, http_response([("Content-Type", "text/html")], html)), mtime=0
    )
    (tmp_path / "cut.warc.gz").write_bytes(whole[:-20])
    code, _, err = run_cli(
        "site", "import", str(tmp_path / "cut.warc.gz"), "-o", str(tmp_path / "c")
    )
    assert code == 2 and "cut short" in err, err
    not_gzip = page_warc(
        tmp_path / "label.warc", [("Content-Type", "text/html"), ("Content-Encoding", "gzip")], html
    )
    code, _, err = run_cli("site", "import", str(not_gzip), "-o", str(tmp_path / "l"))
    assert code == 2 and "does not decode (gzip)" in err, err
    cut_gzip = page_warc(
        tmp_path / "cutbody.warc",
        [("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
        gzip.compress(html)[:-30],
    )
    code, _, err = run_cli("site", "import", str(cut_gzip), "-o", str(tmp_path / "g"))
    assert code == 2 and "ends before its end" in err, err
    assert not any((tmp_path / n).exists() for n in "clg")


def _har(path: Path, entries: list[dict[str, object]], creator: str = "test") -> Path:
    path.write_text(
        json.dumps({"log": {"version": "1.2", "creator": {"name": creator}, "entries": entries}})
    )
    return path


def _entry(url: str, status: int = 200, **extra: object) -> dict[str, object]:
    return {
        "startedDateTime": "2024-05-01T10:00:00+00:00",
        "request": {"method": "GET", "url": url},
        "response": {
            "status": status,
            "headers": [{"name": "Content-Type", "value": "text/html"}],
            "content": {"size": len(HTML), "text": HTML.decode()},
        },
        **extra,
    }


def test_odd_recordings_are_an_exit_2_or_a_line_left_out_never_a_traceback(
    tmp_path: Path,
) -> None:
    far = _entry(PAGE) | {"startedDateTime": "9999-12-31T23:59:59-14:00"}
    crlf = _entry(PAGE)
    crlf["response"]["headers"].append({"name": "X-A", "value": "a\r\nb"})  # type: ignore[index]
    deep = tmp_path / "deep.har"
    deep.write_text('{"log": ' + "[" * 100_000 + "]" * 100_000 + "}")
    status_abc = page_warc(tmp_path / "abc.warc", [("Content-Type", "text/html")], HTML, "abc OK")
    no_uri = tmp_path / "nouri.warc"
    no_uri.write_bytes(
        warc_record(None, http_response([], HTML))
        + warc_record(PAGE, http_response([("Content-Type", "text/html")], HTML), record_id=2)
    )
    cases = {
        "a date past the year 9999 in UTC": (_har(tmp_path / "far.har", [far]), 0),
        "a 300-character creator": (_har(tmp_path / "c.har", [_entry(PAGE)], "x" * 300), 0),
        "a header value with CR LF": (_har(tmp_path / "crlf.har", [crlf]), 2),
        "JSON nested 100,000 deep": (deep, 2),
        "a status line without a status": (status_abc, 2),
        "a response without WARC-Target-URI": (no_uri, 2),
    }
    names = list(cases)
    args = [
        ["site", "import", str(cases[n][0]), "-o", str(tmp_path / f"o{i}")]
        for i, n in enumerate(names)
    ]
    runs, _ = clarke_each(args)
    for name, r in zip(names, runs, strict=True):
        print(f"{name}: exit {r.code}: {r.err.strip()[-200:]}")
        assert not r.traceback and r.code == cases[name][1], (name, r.err)


def test_addresses_localhost_and_interim_responses_are_left_out(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    entries = [
        _entry(PAGE),
        _entry("https://127.0.0.1/x"),
        _entry("https://169.254.169.254/latest/meta-data/"),
        _entry("https://localhost:8443/y"),
        _entry("https://www.site.test/ws", status=101),
    ]
    har = _har(tmp_path / "s.har", entries)
    code, out, err = run_cli("site", "import", str(har), "-o", str(tmp_path / "a"), "--json")
    assert code == 0, err
    skipped = json.loads(out)["skipped"]
    assert len(skipped) == 4, skipped
    assert sum("IP address literal" in s for s in skipped) == 2
    assert any("localhost" in s for s in skipped) and any("status 101" in s for s in skipped)
    assert archive.read(tmp_path / "a").archive.hosts() == ["www.site.test"]


def test_a_shared_body_is_coded_once_however_many_exchanges_name_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = base64.b64encode(bytes(range(256)) * 64).decode()
    entries = [
        _entry(PAGE),
        *(
            _entry(f"https://www.site.test/{i}.bin")
            | {
                "response": {
                    "status": 200,
                    "headers": [{"name": "Content-Encoding", "value": "br"}],
                    "content": {"size": 16384, "text": body, "encoding": "base64"},
                }
            }
            for i in range(20)
        ),
    ]
    from clarke.sites.har import HarOptions, import_har

    imported = import_har(_har(tmp_path / "s.har", entries), tmp_path / "a", HarOptions("s"))
    calls: list[int] = []
    real = composition.encoded

    def counted(data: bytes, coding: str | None) -> bytes:
        calls.append(len(data))
        return real(data, coding)

    monkeypatch.setattr(composition, "encoded", counted)
    c = composition.of(archive.read(imported.path))
    assert c.total.requests == 21
    assert len(calls) == 2, calls  # the page's body and the shared one
