"""`clarke site record` and the corpus, without a browser: what --resolve accepts, the
errors found before anything starts (exit 2, naming the problem, no traceback), and how
the corpus spreads a python3.11-doc page and a debian-handbook page over their hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from clarke.browser.record import RecordOptions, Resolve, _checked
from clarke.errors import EnvironmentProblem, InputError
from clarke.sites import corpus


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("www.site.test=127.0.0.1", Resolve("www.site.test", "127.0.0.1")),
        ("WWW.Site.test.=127.0.0.2:8443", Resolve("www.site.test", "127.0.0.2", 8443)),
        ("a.test=[::1]:443", Resolve("a.test", "::1", 443)),
        ("a.test=[::1]", Resolve("a.test", "::1")),
    ],
)
def test_resolve_takes_host_address_and_an_optional_port(text: str, expected: Resolve) -> None:
    assert Resolve.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("www.site.test", "say HOST=ADDRESS[:PORT]"),
        ("=127.0.0.1", "say HOST=ADDRESS[:PORT]"),
        ("a_b.test=127.0.0.1", "say HOST=ADDRESS[:PORT]"),
        ("a.test=localhost", "'localhost' is not an IP address[:port]"),
        ("a.test=300.1.1.1", "'300.1.1.1' is not an IP address"),
        ("a.test=127.0.0.1:0", "port 0 is not in 1-65535"),
        ("a.test=::1", "is not an IP address[:port] ([IPv6]:port for IPv6)"),
    ],
)
def test_a_bad_resolve_names_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(InputError, match=r"^--resolve ") as e:
        Resolve.parse(text)
    assert says in str(e.value)


def test_what_cannot_be_recorded_is_refused_before_anything_starts(tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    local = (Resolve("a.test", "127.0.0.1"),)
    cases = [
        (RecordOptions("http://a.test/", tmp_path / "o"), "only https URLs"),
        (RecordOptions("https://a.test/", full), "exists and is not empty"),
        (RecordOptions("https://a.test/", tmp_path / "o", local * 2), "given twice"),
        (RecordOptions("https://b.test/", tmp_path / "o", local, True), "not in --resolve"),
        (
            RecordOptions("https://a.test/", tmp_path / "o", upstream_ca=tmp_path / "no.pem"),
            "no such file",
        ),
    ]
    for opts, says in cases:
        with pytest.raises(InputError, match=says):
            _checked(opts)
    assert _checked(RecordOptions("HTTPS://A.test:443/x#f", tmp_path / "o")) == "https://a.test/x"


def test_the_cli_exits_2_for_a_bad_resolve(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli(
        "site", "record", "https://a.test/", "-o", str(tmp_path / "o"), "--resolve", "a.test"
    )
    assert code == 2 and "--resolve a.test: say HOST=ADDRESS[:PORT]" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_the_corpus_puts_pages_styles_images_and_libraries_on_their_own_hosts(
    tmp_path: Path,
) -> None:
    """A doc root shaped as python3.11-doc's: the page's references to _static/ and
    _images/ become absolute URLs on the corpus's hosts; nothing else changes."""
    doc, js = tmp_path / "html", tmp_path / "javascript"
    for path, text in {
        doc / "_static/pydoctheme.css": "@import url('default.css');",
        doc / "_static/default.css": "p{}",
        doc / "_images/fig.png": "png",
        doc / "_images/unused.png": "png",
        js / "jquery/jquery.js": "jq",
        js / "underscore/underscore.js": "us",
        doc / "library/pathlib.html": (
            '<link href="../_static/pydoctheme.css?2022.1" /><script src="../_static/jquery.js">'
            '<script src="../_static/underscore.js"><img src="../_images/fig.png" />'
            '<a href="../index.html">'
        ),
    }.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (doc / "_static/jquery.js").symlink_to(js / "jquery/jquery.js")
    tree = corpus.build_tree(tmp_path / "tree", doc, js, _handbook(tmp_path / "handbook"))
    page = (tree.host_dir(corpus.PAGES_HOST) / "library/pathlib.html").read_text()
    assert page == (
        '<link href="https://static.python.test/_static/pydoctheme.css?2022.1" />'
        '<script src="https://js.cdn.test/jquery/jquery.js">'
        '<script src="https://js.cdn.test/underscore/underscore.js">'
        '<img src="https://images.python.test/_images/fig.png" /><a href="../index.html">'
    )
    handbook = (tree.host_dir(corpus.HANDBOOK_HOST) / "sect.installation-steps.html").read_text()
    assert handbook == (
        '<link href="https://static.handbook.test/Common_Content/css/default.css" />'
        '<img src="https://static.handbook.test/Common_Content/images//image_left.png" />'
        '<img src="https://img.handbook.test/images/inst-boot.png" /><a href="apt.html">'
    )
    files = sorted(str(p.relative_to(tree.root)) for p in tree.root.rglob("*") if p.is_file())
    assert files == [
        "docs.python.test/library/pathlib.html",
        "images.python.test/_images/fig.png",
        "img.handbook.test/images/inst-boot.png",
        "js.cdn.test/jquery/jquery.js",
        "js.cdn.test/underscore/underscore.js",
        "static.handbook.test/Common_Content/css/default.css",
        "static.handbook.test/Common_Content/images/image_left.png",
        "static.python.test/_static/default.css",
        "static.python.test/_static/pydoctheme.css",
        "www.handbook.test/sect.installation-steps.html",
    ]
    assert tree.url("python-pathlib") == "https://docs.python.test/library/pathlib.html"
    assert tree.url("handbook-installation") == (
        "https://www.handbook.test/sect.installation-steps.html"
    )


def _handbook(root: Path) -> Path:
    """A tree shaped as debian-handbook's English HTML: pages at the top, the theme in
    Common_Content/, screenshots in images/ (only the ones a page shows are copied)."""
    for path, text in {
        root / "Common_Content/css/default.css": "@import url('common.css');",
        root / "Common_Content/images/image_left.png": "png",
        root / "images/inst-boot.png": "png",
        root / "images/unused.png": "png",
        root / "sect.installation-steps.html": (
            '<link href="Common_Content/css/default.css" />'
            '<img src="Common_Content/images//image_left.png" />'
            '<img src="images/inst-boot.png" /><a href="apt.html">'
        ),
    }.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_corpus_says_which_package_it_needs(tmp_path: Path) -> None:
    none = tmp_path / "none"
    with pytest.raises(EnvironmentProblem, match=r"apt-get install python3\.11-doc"):
        corpus.build_tree(tmp_path / "tree", none, none, none)
    doc, js = tmp_path / "html", tmp_path / "javascript"
    (doc / "_static").mkdir(parents=True)
    (js / "jquery").mkdir(parents=True)
    with pytest.raises(EnvironmentProblem, match=r"apt-get install debian-handbook"):
        corpus.build_tree(tmp_path / "tree", doc, js, none)


class _Driver:
    def __init__(self) -> None:
        self.ended = False

    def quit(self) -> None:
        raise AssertionError("a driver that failed is ended, not asked to quit")


@pytest.mark.parametrize("stage", ["start", "answer"])
def test_a_driver_that_drops_its_connection_fails_with_its_log(tmp_path: Path, stage: str) -> None:
    """A connection reset under Selenium (the BiDi WebSocket raises it raw) is an
    EnvironmentProblem naming the stage and carrying the driver log's end; a started
    browser is ended."""
    from clarke.browser.record import _drive

    log = tmp_path / "geckodriver.log"
    log.write_text("1733 geckodriver INFO Listening\n1734 Marionette WARN the last line\n")
    driver = _Driver()

    def start() -> _Driver:
        if stage == "start":
            raise ConnectionResetError(104, "Connection reset by peer")
        return driver

    def answer(_: _Driver) -> None:
        raise ConnectionResetError(104, "Connection reset by peer")

    def end(d: _Driver) -> None:
        d.ended = True

    opts = RecordOptions("https://www.rec.test/", tmp_path / "archive")
    with pytest.raises(EnvironmentProblem) as caught:
        _drive(start, answer, end, opts.url, opts, log)
    says = str(caught.value)
    stage_says = "could not start Firefox" if stage == "start" else "cannot answer"
    assert stage_says in says and "ConnectionResetError" in says, says
    assert "geckodriver.log, its end:" in says and "the last line" in says, says
    assert driver.ended is (stage == "answer")
