"""`python -m clarke.dns authoritative --zone FILE --listen ADDR [--port 53] --log FILE`
`python -m clarke.dns cache --upstream ADDR --source ADDR --listen ADDR --log FILE`
`python -m clarke.dns stub --zone FILE --upstream ADDR --source ADDR --listen ADDR --log FILE`
`python -m clarke.dns ask --server ADDR [--type A] [--type HTTPS] NAME...`

Runs one resolver (clarke.dns.resolver) on UDP and TCP until SIGTERM or SIGINT, in the
namespace it was started in. Prints `ready <addr>:<port>` on stdout once both sockets
listen, so a starter waits for that line, not for a guess of time. A zone that is not
valid exits 2 naming the file and the field.

`ask` looks each name up at one resolver (a terminal's cache, to fill it before a load:
run/session/site.py), for each record type given (A by default), and prints `NAME TYPE
ANSWER...`; it exits 1 when a name got no A record (an empty answer to another type is
an answer: most names have no HTTPS record)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from dnslib import QTYPE, DNSRecord
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from clarke.dns.resolver import Authoritative, Caching, QueryLog, Stub
from clarke.errors import ClarkeError
from clarke.sites import zone


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m clarke.dns")
    kinds = parser.add_subparsers(dest="kind", required=True)
    auth = kinds.add_parser("authoritative", help="answer one zone's names")
    auth.add_argument("--zone", type=Path, required=True)
    cache = kinds.add_parser("cache", help="a caching forwarder (a terminal's DNS cache)")
    cache.add_argument("--upstream", required=True, help="the resolver it forwards to")
    cache.add_argument("--upstream-port", type=int, default=53)
    cache.add_argument("--source", default="", help="the address it forwards from")
    stub = kinds.add_parser(
        "stub", help="forwards a zone's names only, uncached; any other name is NXDOMAIN here"
    )
    stub.add_argument("--zone", type=Path, required=True, help="the names it forwards")
    stub.add_argument("--upstream", required=True, help="the resolver it forwards to")
    stub.add_argument("--upstream-port", type=int, default=53)
    stub.add_argument("--source", default="", help="the address it forwards from")
    ask = kinds.add_parser("ask", help="look names up at one resolver (A records)")
    ask.add_argument("--server", required=True)
    ask.add_argument("--port", type=int, default=53)
    ask.add_argument("--timeout", type=float, default=5.0, help="per attempt, seconds")
    ask.add_argument("--attempts", type=int, default=2, help="as glibc's resolver: 2")
    ask.add_argument("--type", dest="types", action="append", choices=["A", "HTTPS"])
    ask.add_argument("names", nargs="+")
    for p in (auth, cache, stub):
        p.add_argument("--listen", required=True)
        p.add_argument("--port", type=int, default=53)
        p.add_argument("--log", type=Path, required=True, help="JSON lines, one per query")
    return parser.parse_args(argv)


def _ask(args: argparse.Namespace) -> int:
    unanswered = 0
    for name in args.names:
        for qtype in args.types or ["A"]:
            answers = []
            for attempt in range(1, args.attempts + 1):  # UDP: a query may be lost
                try:
                    reply = DNSRecord.parse(
                        DNSRecord.question(name, qtype).send(
                            args.server, args.port, timeout=args.timeout
                        )
                    )
                    answers = [str(rr.rdata) for rr in reply.rr if QTYPE[rr.rtype] == qtype]
                    break
                except OSError as e:
                    print(f"{name} {qtype}: attempt {attempt}: {e}", file=sys.stderr)
            unanswered += qtype == "A" and not answers
            print(name, qtype, *answers, flush=True)
    return 1 if unanswered else 0


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.kind == "ask":
        return _ask(args)
    log = QueryLog(args.log)
    resolver: BaseResolver
    try:
        if args.kind == "authoritative":
            resolver = Authoritative(zone.read(args.zone), log)
        elif args.kind == "stub":
            names = frozenset(zone.read(args.zone).names)
            resolver = Stub(names, args.upstream, args.source, log, args.upstream_port)
        else:
            resolver = Caching(args.upstream, args.source, log, args.upstream_port)
    except ClarkeError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    quiet = DNSLogger(log="-request,-reply,-truncated,-error,-recv,-send,-data", prefix=False)
    servers = [
        DNSServer(resolver, address=args.listen, port=args.port, tcp=tcp, logger=quiet)
        for tcp in (False, True)
    ]
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    for s in servers:
        s.start_thread()
    print(f"ready {args.listen}:{args.port}", flush=True)
    stop.wait()
    for s in servers:
        s.stop()
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
