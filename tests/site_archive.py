"""A small recorded site for the replay tests: three origins (www and static recorded
at one address, an image CDN at another), a page with render-blocking CSS, a deferred
script and an image. `write_three_origins(dir, extra_image=...)` makes a page that
also asks for an image the archive lacks (a replay's miss)."""

from __future__ import annotations

from pathlib import Path

from clarke.pages import jpeg
from clarke.pages.layout import Box
from clarke.sites import archive
from clarke.sites.archive import Exchange, Origin, SiteArchive, Source

START = "https://www.site.test/"
HOSTS = ["www.site.test", "static.site.test", "img.cdn.test"]
CSS = b"body{font-family:sans-serif;margin:8px} h1{color:#234} img{display:block}" * 20
JS = b"document.getElementById('js').textContent = 'script ran';" + b"\n//" + b"x" * 2000
HTML = (
    b"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>site</title>"
    b'<link rel="icon" href="data:,">'
    b'<link rel="stylesheet" href="https://static.site.test/s.css">'
    b'<script src="https://static.site.test/app.js" defer></script></head>'
    b"<body><h1>A recorded site</h1><p id=js>no script</p>"
    b'<img src="https://img.cdn.test/hero.jpg" width="600" height="400" alt="hero">'
    b"</body></html>\n"
)


def write_three_origins(
    directory: Path, name: str = "three-origins", extra_image: str = ""
) -> Path:
    """The archive into `directory`; `extra_image`: a URL the page also shows, not in
    the archive."""
    image, _ = jpeg.make(40_000, 1, 7, Box(600, 400))
    html = HTML
    if extra_image:
        html = HTML.replace(b"</body>", f'<img src="{extra_image}" alt="missing"></body>'.encode())
    bodies = {"html": html, "css": CSS, "js": JS, "jpg": image}
    (directory / archive.BODIES).mkdir(parents=True)
    sha = {}
    for kind, body in bodies.items():
        sha[kind] = archive.sha256_of(body)
        (directory / archive.BODIES / sha[kind]).write_bytes(body)

    def exchange(url: str, kind: str, ctype: str, ttfb: float) -> Exchange:
        return Exchange(
            method="GET", url=url, status=200, headers=[("content-type", ctype)],
            body=sha[kind], size=len(bodies[kind]), server_ttfb_ms=ttfb,
        )  # fmt: skip

    site = SiteArchive(
        name=name,
        start_url=START,
        source=Source(kind="files", tool="tests/integration/test_site_netns.py"),
        origins=[
            # www and static were recorded at one address (they may share a connection
            # where the certificate allows); the image CDN at another.
            Origin(
                host="www.site.test",
                address="192.0.2.1",
                protocols=["h1", "h2", "h3"],
                certificate_names=["www.site.test"],
            ),
            Origin(
                host="static.site.test",
                address="192.0.2.1",
                protocols=["h1", "h2", "h3"],
                certificate_names=["*.site.test"],
            ),
            Origin(
                host="img.cdn.test",
                address="192.0.2.9",
                protocols=["h1", "h2", "h3"],
                certificate_names=["img.cdn.test"],
            ),
        ],
        exchanges=[
            exchange(START, "html", "text/html; charset=utf-8", 20),
            exchange("https://static.site.test/s.css", "css", "text/css", 5),
            exchange("https://static.site.test/app.js", "js", "text/javascript", 5),
            exchange("https://img.cdn.test/hero.jpg", "jpg", "image/jpeg", 10),
        ],
    )
    archive.write(directory, site)
    return directory
