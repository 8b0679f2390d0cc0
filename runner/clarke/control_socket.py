"""One JSON line each way on a Rust part's Unix control socket (satlink's and
splittcp's protocol: {"cmd": "health" | "stats" | "reset_stats" | "set", ...})."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from clarke.errors import ClarkeError, InputError
from clarke.json_value import JsonObject


def ask(control_socket: Path, request: JsonObject, speaker: str) -> JsonObject:
    """`speaker`'s reply to `request` (an empty object where it sent no object);
    ClarkeError where the socket cannot be used or the reply is not JSON, InputError
    where `speaker` refused the request."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        try:
            s.connect(str(control_socket))
            s.sendall(json.dumps(request).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
        except OSError as e:
            raise ClarkeError(f"{speaker} control socket {control_socket}: {e}") from None
    try:
        reply = json.loads(buf or b"{}")
    except ValueError:
        raise ClarkeError(
            f"{speaker} control socket {control_socket}: not JSON: {buf[:200]!r}"
        ) from None
    if isinstance(reply, dict) and reply.get("error"):
        raise InputError(f"{speaker} refused {request.get('cmd')}: {reply['error']}")
    return reply if isinstance(reply, dict) else {}


def answers(control_socket: Path, speaker: str) -> bool:
    """Whether `speaker` answers a health request on its control socket."""
    if not control_socket.exists():
        return False
    try:
        ask(control_socket, {"cmd": "health"}, speaker)
    except ClarkeError:
        return False
    return True
