#!/usr/bin/env python3
"""Loopback throughput of origin against Caddy for one 2 MB object, per protocol.

Both servers serve the same file with the same certificate on 127.0.0.1. h1 and h2 are
driven by h2load (Debian: nghttp2-client), h3 by origin's h3get (Debian's h2load has no
HTTP/3). Each round is one connection with REQUESTS sequential requests (one request in
flight), after a short warm-up; of ROUNDS rounds the median is reported, so it shows
what one connection of a page load can carry; Gbit/s counts response body bytes only (goodput).

Usage: bench.py [--requests N] [--rounds R] [--out FILE.json]
Needs: caddy, h2load, openssl, and origin built (cargo build --release in origin/).
Everything runs on loopback and stops by itself; the servers it starts are stopped by
their PIDs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RELEASE = HERE.parent / "target" / "release"
HOST = "www.clarke.test"
SIZE = 2_000_000


def free_port() -> int:
    # TCP and UDP must both be free on the same number.
    for _ in range(50):
        with socket.socket() as t, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
            try:
                u.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SystemExit("ERROR: no free port")


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    for _ in range(100):
        if proc.poll() is not None:
            raise SystemExit(f"ERROR: {what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"ERROR: {what} did not listen on {port}")


def h2load(url: str, proto: str, requests: int) -> dict:
    argv = ["h2load", "-n", str(requests), "-c", "1", "-m", "1", url]
    if proto == "h1":
        argv.insert(1, "--h1")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
    m = re.search(r"finished in ([\d.]+)(ms|s), ([\d.]+) req/s", out)
    ok = re.search(r"(\d+) succeeded", out)
    alpn = re.search(r"Application protocol: (\S+)", out)
    if not (m and ok and alpn):
        raise SystemExit(f"ERROR: cannot read h2load's output:\n{out}")
    want = "http/1.1" if proto == "h1" else "h2"
    if alpn.group(1) != want or int(ok.group(1)) != requests:
        raise SystemExit(f"ERROR: h2load used {alpn.group(1)} with {ok.group(1)} successes:\n{out}")
    rps = float(m.group(3))
    return {"requests": requests, "req_per_s": rps, "gbit_per_s": rps * SIZE * 8 / 1e9}


def h3get(port: int, ca: Path, requests: int) -> dict:
    argv = [
        str(RELEASE / "h3get"),
        "--cacert",
        str(ca),
        "--connect",
        f"127.0.0.1:{port}",
        "--repeat",
        str(requests),
        f"https://{HOST}:{port}/big.jpg",
    ]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"ERROR: h3get failed: {r.stderr}")
    rep = json.loads(r.stdout)
    if rep["bytes"] != SIZE * requests:
        raise SystemExit(f"ERROR: h3get got {rep['bytes']} bytes")
    return {
        "requests": requests,
        "req_per_s": rep["requests_per_second"],
        "gbit_per_s": rep["gbit_per_second"],
    }


def measure(name: str, port: int, ca: Path, requests: int, rounds: int) -> dict[str, dict]:
    """Per protocol, the round with the median req/s (the machine may be shared)."""
    url = f"https://127.0.0.1:{port}/big.jpg"
    res = {}
    for proto in ("h1", "h2", "h3"):
        # Warm-up: page cache, TLS set-up paths, allocators.
        if proto == "h3":
            h3get(port, ca, 3)
            runs = [h3get(port, ca, requests) for _ in range(rounds)]
        else:
            h2load(url, proto, 3)
            runs = [h2load(url, proto, requests) for _ in range(rounds)]
        runs.sort(key=lambda r: r["req_per_s"])
        res[proto] = dict(
            runs[len(runs) // 2], rounds_req_per_s=[round(r["req_per_s"], 1) for r in runs]
        )
        r = res[proto]
        print(
            f"{name:7} {proto}: {r['req_per_s']:8.1f} req/s  {r['gbit_per_s']:6.2f} Gbit/s"
            f"  (rounds: {r['rounds_req_per_s']})",
            flush=True,
        )
    return res


def version(argv: list[str]) -> str:
    r = subprocess.run(argv, capture_output=True, text=True)
    return (r.stdout or r.stderr).strip().splitlines()[0] if r.returncode == 0 else "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=50, help="requests per round (default 50)")
    ap.add_argument(
        "--rounds", type=int, default=3, help="rounds per protocol; the median is kept (default 3)"
    )
    ap.add_argument("--out", type=Path, help="also write the results here as JSON")
    args = ap.parse_args()
    for tool in ("caddy", "h2load", "openssl"):
        if shutil.which(tool) is None:
            raise SystemExit(
                f"ERROR: {tool} is not installed (Debian: caddy, nghttp2-client, openssl)"
            )
    for b in ("origin", "h3get"):
        if not (RELEASE / b).exists():
            raise SystemExit(f"ERROR: {RELEASE / b} missing: run cargo build --release in origin/")

    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="origin-bench-") as tmp_s:
        tmp = Path(tmp_s)
        try:
            subprocess.run([str(HERE / "mkcerts.sh"), str(tmp / "pki")], check=True)
            ca, cert, key = tmp / "pki/ca.pem", tmp / "pki/cert.pem", tmp / "pki/key.pem"
            root = tmp / "root"
            root.mkdir()
            (root / "big.jpg").write_bytes(os.urandom(SIZE))

            o_port, c_port = free_port(), free_port()
            origin = subprocess.Popen(
                [
                    str(RELEASE / "origin"),
                    "--root",
                    str(root),
                    "--listen",
                    f"127.0.0.1:{o_port}",
                    "--cert",
                    str(cert),
                    "--key",
                    str(key),
                    "--control",
                    "127.0.0.1:0",
                    "--tcp-cc",
                    "cubic",
                    "--quic-cc",
                    "cubic",
                ],
                stdout=subprocess.DEVNULL,
                stderr=(tmp / "origin.log").open("wb"),
            )
            procs.append(origin)
            caddyfile = tmp / "Caddyfile"
            caddyfile.write_text(
                "{\n  admin off\n  auto_https disable_redirects\n  skip_install_trust\n"
                "  servers {\n    protocols h1 h2 h3\n  }\n}\n"
                f"https://127.0.0.1:{c_port}, https://{HOST}:{c_port} {{\n"
                f"  bind 127.0.0.1\n  tls {cert} {key}\n  root * {root}\n  file_server\n}}\n"
            )
            env = dict(
                os.environ,
                HOME=str(tmp),
                XDG_DATA_HOME=str(tmp / "data"),
                XDG_CONFIG_HOME=str(tmp / "cfg"),
            )
            caddy = subprocess.Popen(
                ["caddy", "run", "--config", str(caddyfile), "--adapter", "caddyfile"],
                stdout=subprocess.DEVNULL,
                stderr=(tmp / "caddy.log").open("wb"),
                env=env,
            )
            procs.append(caddy)
            wait_port(o_port, origin, "origin")
            wait_port(c_port, caddy, "caddy")
            time.sleep(0.3)

            results = {
                "object_bytes": SIZE,
                "requests_per_round": args.requests,
                "rounds": args.rounds,
                "method": "one connection, one request in flight, loopback, body bytes only",
                "nproc": os.cpu_count(),
                "kernel": os.uname().release,
                "origin": {
                    "version": version([str(RELEASE / "origin"), "--version"]),
                    **measure("origin", o_port, ca, args.requests, args.rounds),
                },
                "caddy": {
                    "version": version(["caddy", "version"]),
                    **measure("caddy", c_port, ca, args.requests, args.rounds),
                },
            }
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    print()
    print("| server | protocol | req/s | Gbit/s |")
    print("|---|---|---:|---:|")
    for server in ("origin", "caddy"):
        for proto in ("h1", "h2", "h3"):
            r = results[server][proto]
            print(f"| {server} | {proto} | {r['req_per_s']:.1f} | {r['gbit_per_s']:.2f} |")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
