"""The offline corpus (docs/sites.md): pages of Debian's python3.11-doc and
debian-handbook packages, served on loopback under several host names so that a
browser's load of them is multi-origin, ready for `clarke site record`.

The split over hosts is ours, not Debian's (the packages' pages use relative links
only). python3.11-doc: pages on docs.python.test; the theme's CSS, scripts and icons
(`_static/`) on static.python.test; the figures (`_images/`) on images.python.test;
jQuery and Underscore, which Debian's `_static/` links to its libjs-jquery and
libjs-underscore packages, on js.cdn.test, as sites take them from a public CDN.
debian-handbook (English): pages on www.handbook.test, its theme (`Common_Content/`:
CSS and icons) on static.handbook.test, its screenshots (`images/`) on
img.handbook.test. The pages' references to those are rewritten into absolute https
URLs; nothing else in any file changes."""

from __future__ import annotations

import gzip
import mimetypes
import shutil
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from types import TracebackType
from urllib.parse import unquote, urlsplit

from clarke.errors import EnvironmentProblem
from clarke.tls import issue_testbed_pki

DOC_ROOT = Path("/usr/share/doc/python3.11/html")
JS_ROOT = Path("/usr/share/javascript")
HANDBOOK_ROOT = Path("/usr/share/doc/debian-handbook/html/en-US")
PAGES_HOST = "docs.python.test"
STATIC_HOST = "static.python.test"
IMAGES_HOST = "images.python.test"
CDN_HOST = "js.cdn.test"
HANDBOOK_HOST = "www.handbook.test"
HANDBOOK_STATIC_HOST = "static.handbook.test"
HANDBOOK_IMAGES_HOST = "img.handbook.test"
PYTHON_HOSTS = (PAGES_HOST, STATIC_HOST, IMAGES_HOST, CDN_HOST)
HANDBOOK_HOSTS = (HANDBOOK_HOST, HANDBOOK_STATIC_HOST, HANDBOOK_IMAGES_HOST)
HOSTS = PYTHON_HOSTS + HANDBOOK_HOSTS


@dataclass(frozen=True)
class Page:
    host: str
    path: str  # in its package's HTML tree, and on its host


# name in the corpus -> the page. The handbook's chapter on installing Debian is its
# page with the most images (19 screenshots); Python's pathlib page has the scripts.
PAGES = {
    "python-pathlib": Page(PAGES_HOST, "library/pathlib.html"),
    "handbook-installation": Page(HANDBOOK_HOST, "sect.installation-steps.html"),
}
# The library files Debian's _static/ links to, and where js.cdn.test serves them.
CDN_FILES = {"jquery.js": "jquery/jquery.js", "underscore.js": "underscore/underscore.js"}
# Compressed when the browser accepts gzip, as web servers commonly configure it.
COMPRESSIBLE = ("text/", "application/javascript", "application/json", "image/svg+xml")


@dataclass(frozen=True)
class Tree:
    """The corpus's files: `root/<host>/<path>`, each host's files as that host serves them."""

    root: Path

    def host_dir(self, host: str) -> Path:
        return self.root / host

    def url(self, name: str) -> str:
        return f"https://{PAGES[name].host}/{PAGES[name].path}"


def _rewritten(html: str, depth: int) -> str:
    up = "../" * depth
    for file, cdn_path in CDN_FILES.items():
        html = html.replace(f'"{up}_static/{file}"', f'"https://{CDN_HOST}/{cdn_path}"')
    html = html.replace(f'"{up}_static/', f'"https://{STATIC_HOST}/_static/')
    return html.replace(f'"{up}_images/', f'"https://{IMAGES_HOST}/_images/')


def _handbook_rewritten(html: str) -> str:
    html = html.replace('"Common_Content/', f'"https://{HANDBOOK_STATIC_HOST}/Common_Content/')
    return html.replace('"images/', f'"https://{HANDBOOK_IMAGES_HOST}/images/')


def build_tree(
    out: Path,
    doc_root: Path = DOC_ROOT,
    js_root: Path = JS_ROOT,
    handbook_root: Path = HANDBOOK_ROOT,
) -> Tree:
    """Copy the corpus's pages and what they use into `out` (made anew)."""
    missing = [p for p in (doc_root / "_static", js_root / "jquery") if not p.is_dir()]
    if missing:
        raise EnvironmentProblem(
            f"{missing[0]} is missing: the corpus is built from Debian's python3.11-doc "
            "package (apt-get install python3.11-doc; ci/setup.sh does)"
        )
    if not (handbook_root / "Common_Content").is_dir():
        raise EnvironmentProblem(
            f"{handbook_root / 'Common_Content'} is missing: the corpus is built from "
            "Debian's debian-handbook package too (apt-get install debian-handbook; "
            "ci/setup.sh does)"
        )
    if out.exists():
        shutil.rmtree(out)
    tree = Tree(out)
    static = tree.host_dir(STATIC_HOST) / "_static"
    static.mkdir(parents=True)
    for f in (doc_root / "_static").iterdir():
        if f.is_file() and not f.is_symlink():  # the links are the CDN's files
            shutil.copyfile(f, static / f.name)
    for cdn_path in CDN_FILES.values():
        target = tree.host_dir(CDN_HOST) / cdn_path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(js_root / cdn_path, target)
    images = tree.host_dir(IMAGES_HOST) / "_images"
    images.mkdir(parents=True)
    for page in (p for p in PAGES.values() if p.host == PAGES_HOST):
        html = (doc_root / page.path).read_text(encoding="utf-8")
        depth = len(PurePosixPath(page.path).parts) - 1
        target = tree.host_dir(PAGES_HOST) / page.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_rewritten(html, depth), encoding="utf-8")
        for image in (doc_root / "_images").iterdir():
            if f"_images/{image.name}" in html:
                shutil.copyfile(image, images / image.name)
    _add_handbook(tree, handbook_root)
    return tree


def _add_handbook(tree: Tree, root: Path) -> None:
    """The handbook's pages (all at the top of its tree), its whole theme, and the
    screenshots the pages show."""
    shutil.copytree(root / "Common_Content", tree.host_dir(HANDBOOK_STATIC_HOST) / "Common_Content")
    images = tree.host_dir(HANDBOOK_IMAGES_HOST) / "images"
    images.mkdir(parents=True)
    for page in (p for p in PAGES.values() if p.host == HANDBOOK_HOST):
        html = (root / page.path).read_text(encoding="utf-8")
        target = tree.host_dir(HANDBOOK_HOST) / page.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_handbook_rewritten(html), encoding="utf-8")
        for image in (root / "images").iterdir():
            if f'"images/{image.name}"' in html:
                shutil.copyfile(image, images / image.name)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HostServer

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        parts = PurePosixPath(path).parts[1:]
        if ".." in parts or not path.startswith("/"):
            self.send_error(400)
            return
        file = self.server.directory.joinpath(*parts)
        if not file.is_file():
            self.send_error(404)
            return
        body = file.read_bytes()
        ctype = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype == "application/javascript":
            ctype += "; charset=utf-8"
        coded = ctype.startswith(COMPRESSIBLE) and "gzip" in self.headers.get("Accept-Encoding", "")
        wire = gzip.compress(body, 6, mtime=0) if coded else body
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "max-age=3600")
        if coded:
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(len(wire)))
        self.end_headers()
        self.wfile.write(wire)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _HostServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: str, directory: Path, context: ssl.SSLContext) -> None:
        super().__init__((address, 0), _Handler)
        self.directory = directory
        self.socket = context.wrap_socket(self.socket, server_side=True)


class Servers:
    """Each host of a tree on its own loopback address (127.0.0.2, .3, …: Linux answers
    for all of 127.0.0.0/8), over TLS with a certificate from a new testbed CA naming
    them all. A context manager; `resolve` maps each host to its address and port."""

    def __init__(self, tree: Tree, pki_dir: Path) -> None:
        self.tree = tree
        self.pki = issue_testbed_pki(pki_dir, hosts=list(HOSTS), label="site corpus")
        self.resolve: dict[str, tuple[str, int]] = {}
        self._servers: list[tuple[_HostServer, threading.Thread]] = []

    def __enter__(self) -> Servers:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.pki.cert, self.pki.key)
        try:
            for i, host in enumerate(HOSTS):
                server = _HostServer(f"127.0.0.{2 + i}", self.tree.host_dir(host), context)
                thread = threading.Thread(target=server.serve_forever, daemon=True)
                thread.start()
                self._servers.append((server, thread))
                address, port = server.server_address[:2]
                self.resolve[host] = (str(address), int(port))
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for server, thread in self._servers:
            server.shutdown()
            server.server_close()
            thread.join(5)
        self._servers.clear()

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
