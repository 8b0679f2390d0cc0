"""A mitmdump addon for the site recording test (tests/integration/test_site_recording.py),
run inside mitmproxy's own environment (`mitmdump -s`), not Clarke's.

It sends every host name the proxy is asked for to one server on loopback (127.0.0.1,
`loopback_port`), so a test records a multi-origin site without any resolver, and writes
each exchange as mitmproxy saw it (the body as sent, content coding and all) as one JSON
object a line into `flows_out`: the test writes those as a WARC with warcio, beside the
HAR mitmproxy exports itself (`hardump`)."""

from __future__ import annotations

import base64
import json
from typing import Any

from mitmproxy import ctx, http
from mitmproxy.proxy import server_hooks

LOOPBACK = "127.0.0.1"


class RecordOnLoopback:
    def load(self, loader: Any) -> None:
        loader.add_option("loopback_port", int, 0, "the port on 127.0.0.1 every host goes to")
        loader.add_option("flows_out", str, "", "one JSON object a line per exchange")

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        data.server.address = (LOOPBACK, ctx.options.loopback_port)

    def response(self, flow: http.HTTPFlow) -> None:
        req, resp = flow.request, flow.response
        assert resp is not None and resp.timestamp_start is not None
        assert req.timestamp_end is not None
        peer = flow.server_conn.peername
        line = {
            "url": req.pretty_url,
            "method": req.method,
            "host": req.pretty_host,
            "http_version": resp.http_version,
            "status": resp.status_code,
            "reason": resp.reason,
            "headers": [[k, v] for k, v in resp.headers.items(multi=True)],
            "body": base64.b64encode(resp.raw_content or b"").decode(),
            "started": req.timestamp_start,
            "ttfb_ms": (resp.timestamp_start - req.timestamp_end) * 1000,
            "address": peer[0] if peer else None,
        }
        with open(ctx.options.flows_out, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


addons = [RecordOnLoopback()]
