"""The mitmdump addon of `clarke site record` (browser/record.py). It runs inside
mitmproxy's own environment (`mitmdump -s THIS_FILE`), not Clarke's: it imports nothing
from Clarke.

It sends the hosts named by `--resolve` to the address (and port) given there instead of
asking a resolver, and with `--only-resolved` refuses to connect to any other host, so a
recording against local servers never leaves the machine. mitmproxy's own `hardump`
writes the HAR that Clarke then imports.

mitmproxy's `proxyauth` (set in the confdir's config.yaml, browser/proxy_auth.py) answers
a request without the recording's credentials with 407 before any hook here sees it;
this addon marks such a flow, and the HAR's filter (record.har_filter) leaves marked
flows out: they were never sent anywhere, and need not be the browser's."""

from __future__ import annotations

import json
from typing import Any

from mitmproxy import ctx, http
from mitmproxy.proxy import server_hooks


class ResolveHosts:
    def __init__(self) -> None:
        self.asked: dict[str, str] = {}  # a server connection's id -> the host it was for

    def load(self, loader: Any) -> None:
        loader.add_option(
            "clarke_resolve",
            str,
            "{}",
            'JSON: {"host": ["address", port or null]}; the hosts to connect to there',
        )
        loader.add_option(
            "clarke_only_resolved", bool, False, "refuse every host that clarke_resolve lacks"
        )
        loader.add_option(
            "clarke_refuse", str, "[]", "JSON: hosts never connected to (the browser's own)"
        )
        loader.add_option(
            "clarke_errors", str, "", "a file for failed server connections, one JSON a line"
        )

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        # proxyauth, a built-in addon, runs before any script's: a response set now with
        # no credentials accepted is its 407. (A refused CONNECT makes no HTTP flow.)
        refused = flow.response is not None and "proxyauth" not in flow.metadata
        if ctx.options.proxyauth and refused:
            flow.marked = "refused: no proxy credentials"

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        if data.server.address is None:
            return
        host, port = data.server.address
        self.asked[data.server.id] = str(host)
        mapping: dict[str, list[Any]] = json.loads(ctx.options.clarke_resolve)
        target = mapping.get(str(host).lower().rstrip("."))
        if str(host).lower().rstrip(".") in json.loads(ctx.options.clarke_refuse):
            data.server.error = f"{host} is one of the browser's own services, not the page's"
        elif target is not None:
            address, new_port = target
            data.server.address = (address, new_port or port)
        elif ctx.options.clarke_only_resolved:
            # Set before the connection is opened: mitmproxy neither resolves nor connects.
            data.server.error = f"{host} is not in --resolve, and --only-resolved is set"

    def server_connect_error(self, data: server_hooks.ServerConnectionHookData) -> None:
        if not ctx.options.clarke_errors:
            return
        address = data.server.address
        line = {
            "host": self.asked.get(data.server.id) or (address[0] if address else None),
            "address": list(address) if address else None,
            "error": str(data.server.error),
        }
        with open(ctx.options.clarke_errors, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


addons = [ResolveHosts()]
