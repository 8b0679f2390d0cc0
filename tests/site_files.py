"""Writing the same recorded exchanges as a HAR file and as a WARC file, the way browsers
and mitmproxy write HARs and warcio writes WARCs: for the importers' tests."""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter


@dataclass
class Flow:
    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes  # as the page uses it
    started: float  # Unix seconds
    ttfb_ms: float = 12.5
    address: str = "192.0.2.10"
    version: str = "HTTP/2.0"
    method: str = "GET"
    gzip: bool = False  # sent gzip-coded (Content-Encoding: gzip)
    extra: dict[str, object] = field(default_factory=dict)

    def wire_headers(self) -> list[tuple[str, str]]:
        coded = [("Content-Encoding", "gzip")] if self.gzip else []
        return [*self.headers, *coded]

    def wire_body(self) -> bytes:
        return gzip.compress(self.body, mtime=0) if self.gzip else self.body


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat()


def write_har(path: Path, flows: list[Flow], creator: str = "mitmproxy exporthar") -> Path:
    entries = []
    for f in flows:
        ctype = dict((k.lower(), v) for k, v in f.headers).get("content-type", "")
        binary = not ctype.startswith("text/") and "javascript" not in ctype
        content: dict[str, object] = {"size": len(f.body), "mimeType": ctype}
        if binary:
            content |= {"text": base64.b64encode(f.body).decode(), "encoding": "base64"}
        else:
            content["text"] = f.body.decode("utf-8")
        entries.append(
            {
                "startedDateTime": iso(f.started),
                "request": {"method": f.method, "url": f.url, "httpVersion": f.version},
                "response": {
                    "status": f.status,
                    "httpVersion": f.version,
                    "headers": [{"name": k, "value": v} for k, v in f.wire_headers()],
                    "content": content,
                },
                "timings": {"wait": f.ttfb_ms},
                "serverIPAddress": f.address,
                **f.extra,
            }
        )
    har = {
        "log": {"version": "1.2", "creator": {"name": creator, "version": "1"}, "entries": entries}
    }
    path.write_text(json.dumps(har))
    return path


def write_warc(path: Path, flows: list[Flow], chunked: bool = True) -> Path:
    with path.open("wb") as out:
        writer = WARCWriter(out, gzip=True, warc_version="1.1")
        info = writer.create_warcinfo_record(path.name, {"software": "test writer"})
        writer.write_record(info)
        for f in flows:
            target = f.url.split("//", 1)[1]
            path_q = "/" + target.split("/", 1)[1] if "/" in target else "/"
            req = writer.create_warc_record(
                f.url,
                "request",
                http_headers=StatusAndHeaders(
                    f"{f.method} {path_q} {f.version}",
                    [("Host", target.split("/")[0])],
                    is_http_request=True,
                ),
                warc_headers_dict={"WARC-Date": iso(f.started).replace("+00:00", "Z")},
            )
            body = f.wire_body()
            hdrs = f.wire_headers()
            if chunked:
                hdrs = [*hdrs, ("Transfer-Encoding", "chunked")]
                half = len(body) // 2
                parts = [body[:half], body[half:]]
                body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n\r\n"
            resp = writer.create_warc_record(
                f.url,
                "response",
                payload=io.BytesIO(body),
                http_headers=StatusAndHeaders(f"{f.status} OK", hdrs, protocol=f.version),
                warc_headers_dict={
                    "WARC-Date": iso(f.started + 0.2).replace("+00:00", "Z"),
                    "WARC-IP-Address": f.address,
                    "WARC-Concurrent-To": req.rec_headers.get_header("WARC-Record-ID"),
                    "Clarke-Server-TTFB-Ms": repr(f.ttfb_ms),
                },
            )
            for record in (req, resp):
                writer.write_record(record)
                record.raw_stream.close()  # warcio spools each record's block in a file
    return path


def sample_flows() -> list[Flow]:
    """A small page from three origins: HTML (gzip), CSS, a font, an image from a CDN
    that shares the page's address, a redirect, and a cross-origin JSON."""
    t = 1_714_557_600.0
    html = (
        b"<!doctype html><html><head><link rel=stylesheet href='https://static.site.test/s.css'>"
        b"</head><body><img src='https://img.cdn.test/a.png'><p>caf\xc3\xa9</p></body></html>"
    )
    return [
        Flow(
            "https://www.site.test/",
            200,
            [("Content-Type", "text/html; charset=utf-8"), ("Alt-Svc", 'h3=":443"; ma=3600')],
            html,
            t,
            80.0,
            gzip=True,
        ),
        Flow(
            "https://static.site.test/s.css",
            200,
            [("content-type", "text/css")],
            b"body{font-family:f}" * 20,
            t + 0.3,
            5.0,
            gzip=True,
        ),
        Flow(
            "https://static.site.test/f.woff2",
            200,
            [("content-type", "font/woff2")],
            bytes(range(256)) * 8,
            t + 0.5,
        ),
        Flow(
            "https://img.cdn.test/a.png",
            200,
            [("content-type", "image/png"), ("cache-control", "max-age=60")],
            b"\x89PNG\r\n\x1a\n" + bytes(1000),
            t + 0.4,
            address="192.0.2.10",
        ),
        Flow(
            "https://www.site.test/old",
            301,
            [("location", "https://www.site.test/")],
            b"",
            t + 0.6,
            version="HTTP/1.1",
        ),
        Flow(
            "https://api.other.test/data.json?x=1&y=2",
            200,
            [("content-type", "application/json")],
            b'{"a": 1}',
            t + 0.7,
            address="198.51.100.7",
        ),
    ]
