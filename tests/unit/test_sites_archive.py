"""The site archive: importing HARs (the shapes Firefox, Chromium, Browsertime and
mitmproxy write) and WARCs, one archive from both formats, and broken archives refused
with exit 2 naming the entry (issue 33)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import get_args

import pytest

from clarke.errors import InputError, ValidationFailed
from clarke.sites import archive, composition
from clarke.sites.har import HarOptions, import_har
from clarke.sites.warc import WarcOptions, import_warc
from clarke.vocab import HttpTag, HttpVersion
from site_files import Flow, sample_flows, write_har, write_warc


def _imported(tmp_path: Path) -> tuple[archive.Site, archive.Site]:
    flows = sample_flows()
    har = import_har(write_har(tmp_path / "s.har", flows), tmp_path / "from-har", HarOptions("s"))
    warc = import_warc(
        write_warc(tmp_path / "s.warc.gz", flows), tmp_path / "from-warc", WarcOptions("s")
    )
    return archive.read(har.path), archive.read(warc.path)


def test_a_har_and_a_warc_of_one_recording_import_to_the_same_archive(tmp_path: Path) -> None:
    har, warc = _imported(tmp_path)
    assert har.archive.content_digest() == warc.archive.content_digest()
    assert har.archive.exchanges == warc.archive.exchanges  # server times included
    assert sorted(p.name for p in (har.path / "bodies").iterdir()) == sorted(
        p.name for p in (warc.path / "bodies").iterdir()
    )
    assert (har.archive.source.kind, warc.archive.source.kind) == ("har", "warc")
    assert warc.archive.source.tool == "test writer"


def test_what_an_archive_keeps_of_a_recording(tmp_path: Path) -> None:
    site, _ = _imported(tmp_path)
    a = site.archive
    assert a.start_url == "https://www.site.test/"
    by_host = {o.host: o for o in a.origins}
    # The page's origin advertised h3 (Alt-Svc) and spoke h2; the redirect came over h1.
    assert by_host["www.site.test"].protocols == ["h1", "h2", "h3"]
    assert by_host["img.cdn.test"].address == by_host["www.site.test"].address == "192.0.2.10"
    assert by_host["api.other.test"].address == "198.51.100.7"
    page = a.exchanges[0]
    # The body as the page uses it; the coding kept aside; no framing headers.
    assert page.content_encoding == "gzip" and b"caf\xc3\xa9" in site.body(page)
    assert [k for k, _ in page.headers] == ["content-type"]
    assert page.server_ttfb_ms == 80.0
    assert [e.url for e in a.exchanges][-1] == "https://api.other.test/data.json?x=1&y=2"
    redirect = next(e for e in a.exchanges if e.status == 301)
    assert redirect.body is None and redirect.header("location") == "https://www.site.test/"
    stats = composition.of(site)
    assert (stats.rows["html"].requests, stats.rows["other"].requests) == (1, 2)
    assert stats.rows["css"].transfer_bytes < stats.rows["css"].bytes
    assert (stats.origins, stats.third_parties) == (4, 2)


def test_browser_har_shapes_are_read(tmp_path: Path) -> None:
    """Chromium: pseudo-headers, IPv6 in brackets, entries from the memory cache, a
    blocked request (status 0), `wait` -1; a data: URL and plain http are left out."""
    flows = sample_flows()[:2]
    flows[1].address = "[2001:db8::7]"
    flows.append(
        Flow(
            "https://www.site.test/",
            200,
            [("content-type", "text/html")],
            b"<p>x",
            flows[1].started + 1,
            extra={"_fromCache": "memory"},
        )
    )
    flows.append(Flow("https://ads.test/x.js", 0, [], b"", flows[1].started + 2))
    flows.append(
        Flow(
            "http://plain.test/y.js",
            200,
            [("content-type", "text/javascript")],
            b"1",
            flows[1].started + 3,
        )
    )
    flows[0].headers = [(":status", "200"), *flows[0].headers]
    flows[0].ttfb_ms = -1
    imported = import_har(
        write_har(tmp_path / "c.har", flows, "WebInspector"), tmp_path / "c", HarOptions(None)
    )
    a = imported.archive
    assert a.name == "www.site.test"
    assert [e.url for e in a.exchanges] == [
        "https://www.site.test/",
        "https://static.site.test/s.css",
    ]
    assert a.exchanges[0].server_ttfb_ms is None and ":status" not in dict(a.exchanges[0].headers)
    assert a.origin("static.site.test").address == "2001:db8::7"
    assert len(imported.skipped) == 3 and "memory cache" in imported.skipped[0]


def test_a_har_saved_without_content_is_refused_naming_the_entry(tmp_path: Path) -> None:
    har = write_har(tmp_path / "n.har", sample_flows())
    data = json.loads(har.read_text())
    del data["log"]["entries"][2]["response"]["content"]["text"]
    har.write_text(json.dumps(data))
    with pytest.raises(
        InputError,
        match=r"log\.entries\[2\]: GET https://static.site.test/f.woff2: "
        r"the response has 2048 bytes but the HAR holds none",
    ):
        import_har(har, tmp_path / "n", HarOptions("n"))
    assert not (tmp_path / "n").exists()  # nothing half-written
    imported = import_har(har, tmp_path / "n", HarOptions("n", skip_incomplete=True))
    assert len(imported.archive.exchanges) == 5


def _broken(tmp_path: Path) -> Path:
    site, _ = _imported(tmp_path)
    copy = tmp_path / "broken"
    shutil.copytree(site.path, copy)
    return copy


def test_a_missing_body_is_refused_with_exit_2_naming_the_exchange(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    path = _broken(tmp_path)
    css = json.loads((path / "site.json").read_text())["exchanges"][1]
    (path / "bodies" / css["body"]).unlink()
    code, _, err = run_cli("site", "check", str(path))
    assert code == 2
    assert (
        f"exchanges[1] (GET https://static.site.test/s.css): its body {css['body']} is missing"
        in err
    )


def test_a_body_whose_hash_is_not_its_name_is_refused(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    path = _broken(tmp_path)
    font = json.loads((path / "site.json").read_text())["exchanges"][3]
    assert font["url"].endswith("f.woff2")
    (path / "bodies" / font["body"]).write_bytes(b"\x00" * font["size"])
    code, _, err = run_cli("site", "check", str(path))
    assert code == 2 and "exchanges[3] (GET https://static.site.test/f.woff2)" in err
    assert "has the SHA-256 " in err and "not its name" in err


def test_an_exchange_of_an_unknown_origin_is_refused(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    path = _broken(tmp_path)
    data = json.loads((path / "site.json").read_text())
    data["origins"] = [o for o in data["origins"] if o["host"] != "img.cdn.test"]
    (path / "site.json").write_text(json.dumps(data))
    code, _, err = run_cli("site", "check", str(path))
    assert code == 2
    assert (
        "exchanges[2].url: GET https://img.cdn.test/a.png: "
        "its origin img.cdn.test is not in origins" in err
    )


def test_other_broken_archives_are_named(tmp_path: Path) -> None:
    path = _broken(tmp_path)
    data = json.loads((path / "site.json").read_text())
    for change, expected in [
        ({"version": 2}, "this Clarke reads version 1, not 2"),
        ({"start_url": "https://www.site.test/nope"}, "start_url: no GET exchange has the URL"),
        (
            {"origins": data["origins"] + data["origins"][:1]},
            r"origins\[4\]: origin www.site.test is listed twice",
        ),
    ]:
        (path / "site.json").write_text(json.dumps({**data, **change}))
        with pytest.raises(ValidationFailed, match=expected):
            archive.read(path)
    bad = dict(data["origins"][0], certificate_names=["*.other.test"])
    (path / "site.json").write_text(json.dumps({**data, "origins": [bad, *data["origins"][1:]]}))
    with pytest.raises(
        ValidationFailed, match=r"origins\[0\]\.certificate_names: no certificate name covers"
    ):
        archive.read(path)
    (path / "site.json").write_text("{")
    with pytest.raises(ValidationFailed, match="not valid JSON"):
        archive.read(path)


def test_the_archive_names_protocols_by_the_vocabulary_s_tags() -> None:
    assert set(get_args(HttpTag)) == {v.tag for v in HttpVersion}


def test_certificate_names_cover_as_rfc_6125_says() -> None:
    assert archive.covers(["*.example.org"], "www.example.org")
    assert not archive.covers(["*.example.org"], "example.org")
    assert not archive.covers(["*.example.org"], "a.b.example.org")
    assert archive.normalise("HTTPS://WWW.Ex.ORG:443/a?b#c") == "https://www.ex.org/a?b"
    assert archive.normalise("https://x.org:8443") == "https://x.org:8443/"


def test_har_text_is_read_back_in_the_charset_its_writer_decoded_it_in(tmp_path: Path) -> None:
    """mitmproxy writes a body whose response names no charset as Latin-1 text (a font
    as much as a page), browsers as UTF-8; content.size settles it where it can."""
    font = bytes(range(256)) * 2
    flows = sample_flows()[:1]
    har = write_har(tmp_path / "m.har", flows, creator="mitmproxy")
    data = json.loads(har.read_text())
    entry = data["log"]["entries"][0]
    entry["response"]["headers"] = [{"name": "content-type", "value": "font/woff2"}]
    entry["response"]["content"] = {"size": len(font), "text": font.decode("latin-1")}
    har.write_text(json.dumps(data))
    site = archive.read(import_har(har, tmp_path / "m", HarOptions("m")).path)
    assert site.body(site.archive.exchanges[0]) == font
    # No size to settle it: the writer's default (Latin-1 for mitmproxy, UTF-8 else).
    del entry["response"]["content"]["size"]
    for creator, expected in [("mitmproxy", font), ("Firefox", font.decode("latin-1").encode())]:
        data["log"]["creator"]["name"] = creator
        har.write_text(json.dumps(data))
        out = tmp_path / f"m-{creator}"
        site = archive.read(import_har(har, out, HarOptions("m")).path)
        assert site.body(site.archive.exchanges[0]) == expected
