"""A small HTTP/3 client for tests (aioquic): one QUIC connection, GET requests on it,
and what was negotiated. Run in a network namespace with `python -m h3client` style
use through `main()` (argv: address port host path... --ca FILE)."""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
from dataclasses import asdict, dataclass, field

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import QuicEvent


@dataclass
class H3Response:
    path: str
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body_bytes: int = 0


@dataclass
class H3Result:
    alpn: str | None
    local_port: int
    responses: list[H3Response]


class _Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.waiters: dict[int, asyncio.Future[None]] = {}
        self.responses: dict[int, H3Response] = {}

    def quic_event_received(self, event: QuicEvent) -> None:
        for h3_event in self.h3.handle_event(event):
            self._h3_event(h3_event)

    def _h3_event(self, event: H3Event) -> None:
        if not isinstance(event, HeadersReceived | DataReceived):
            return
        resp = self.responses.get(event.stream_id)
        if resp is None:
            return
        if isinstance(event, HeadersReceived):
            for k, v in event.headers:
                key, value = k.decode(), v.decode()
                if key == ":status":
                    resp.status = int(value)
                else:
                    resp.headers[key] = value
        else:
            resp.body_bytes += len(event.data)
        if event.stream_ended:
            waiter = self.waiters.pop(event.stream_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def get(self, authority: str, path: str) -> H3Response:
        stream_id = self._quic.get_next_available_stream_id()
        self.responses[stream_id] = H3Response(path)
        self.waiters[stream_id] = self._loop.create_future()
        self.h3.send_headers(
            stream_id,
            [
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", authority.encode()),
                (b":path", path.encode()),
                (b"user-agent", b"clarke-test-h3"),
            ],
            end_stream=True,
        )
        self.transmit()
        await self.waiters[stream_id]
        return self.responses[stream_id]


async def fetch(
    address: str, port: int, host: str, paths: list[str], ca_file: str, timeout: float = 20.0
) -> H3Result:
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=host)
    config.load_verify_locations(ca_file)
    config.verify_mode = ssl.CERT_REQUIRED
    async with connect(address, port, configuration=config, create_protocol=_Client) as client:
        assert isinstance(client, _Client)
        responses = []
        for path in paths:
            responses.append(await asyncio.wait_for(client.get(host, path), timeout))
        local_port = client._transport.get_extra_info("sockname")[1]  # type: ignore[union-attr]
        alpn = client._quic.tls.alpn_negotiated
        client.close()
        await client.wait_closed()
    return H3Result(alpn, local_port, responses)


def main(argv: list[str]) -> int:
    """argv: ADDRESS PORT HOST CA_FILE PATH...; prints the H3Result as JSON."""
    address, port, host, ca_file, *paths = argv
    result = asyncio.run(fetch(address, int(port), host, paths or ["/"], ca_file))
    print(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
