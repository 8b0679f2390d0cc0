"""One JSON line each way on a Rust part's Unix control socket (satlink's and
splittcp's protocol: {"cmd": "health" | "stats" | "reset_stats" | "set", ...})."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from clarke.errors import ClarkeError, InputError
from clarke.json_value import JsonObject


def reply(control_socket: Path, request: JsonObject) -> object:
    """The reply to one request as the part sent it, errors included (OSError where the
    socket cannot be used; json.JSONDecodeError, whose `doc` is the reply, where it is
    not JSON). Benchmarks and tests of the protocol itself read it; the runner asks."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(control_socket))
        s.sendall(json.dumps(request).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf.decode(errors="replace") or "{}")


def ask(control_socket: Path, request: JsonObject, speaker: str) -> JsonObject:
    """`speaker`'s reply to `request` (an empty object where it sent no object);
    ClarkeError where the socket cannot be used or the reply is not JSON, InputError
    where `speaker` refused the request."""
    where = f"{speaker} control socket {control_socket}"
    try:
        answer = reply(control_socket, request)
    except OSError as e:
        raise ClarkeError(f"{where}: {e}") from None
    except json.JSONDecodeError as e:
        raise ClarkeError(f"{where}: not JSON: {e.doc[:200]!r}") from None
    if isinstance(answer, dict) and answer.get("error"):
        raise InputError(f"{speaker} refused {request.get('cmd')}: {answer['error']}")
    return answer if isinstance(answer, dict) else {}


def answers(control_socket: Path, speaker: str) -> bool:
    """Whether `speaker` answers a health request on its control socket."""
    if not control_socket.exists():
        return False
    try:
        ask(control_socket, {"cmd": "health"}, speaker)
    except ClarkeError:
        return False
    return True
