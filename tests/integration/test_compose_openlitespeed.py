"""The compose stack with OpenLiteSpeed in the server role (the canonical stack's server)
for real: the offline stack's link, client and InfluxDB, and the server container of the
`clarke-openlitespeed-src` image (OpenLiteSpeed built from source,
tests/data/compose-openlitespeed-server.yml), a quarter of the demo campaign through
`docker compose up`: HTTP/1.1, /2 and /3 on the GEO link, every load verified with the
congestion control measured (kernel for TCP, lsquic's log for QUIC), wire bytes
reported, the records naming OpenLiteSpeed, and `down -v` leaving nothing behind.

Runs where the image exists: CI cannot build it (no source snapshots there), so it skips
there, saying how to build it (docs/openlitespeed.md, "The image built from source").
The server container runs this checkout's Clarke (mounted over the image's), so an image
built earlier still tests the code at hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from clarke.campaign.dimensions import CC, HTTP
from compose_part import COMPOSE_MARKS, demo_shard_with, every_planned_run_ok

pytestmark = COMPOSE_MARKS

IMAGE = "clarke-openlitespeed-src:local"


@pytest.fixture(scope="module")
def ols_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, str]]:
    with demo_shard_with(
        tmp_path_factory.mktemp("ols_stack"),
        IMAGE,
        "build it from source snapshots (docs/openlitespeed.md, 'The image built from source')",
        "tests/data/compose-openlitespeed-server.yml",
        ("server",),
    ) as stack:
        yield stack


MEASURED_BY = {"1.1": "kernel", "2": "kernel", "3": "lsquic log"}


def test_demo_shard_on_the_openlitespeed_container(ols_stack: tuple[Path, int, str]) -> None:
    d, records = every_planned_run_ok(ols_stack)
    for r in records:
        assert r.implementations == {"link": "satlink", "server": "openlitespeed",
                                     "client": "firefox"}  # fmt: skip
        assert r.details.substrate == "compose"
        assert r.versions["openlitespeed"].startswith("1.9"), r.versions
        conns = r.details.server_connections
        assert {k.cc_source for k in conns} == {MEASURED_BY[r.cell[HTTP]]}, conns
        assert all(k.cc == r.cell[CC] for k in conns), conns
        assert r.metrics["wire_bytes"] > r.metrics["app_bytes"], r.metrics
    print(
        "\n[compose openlitespeed] "
        + "; ".join(
            f"HTTP {r.cell[HTTP]}: PLT {r.metrics['plt_ms']:.0f} ms, overhead "
            f"{100 * r.metrics['overhead']:.1f} %"
            for r in sorted(records, key=lambda r: r.cell[HTTP])
        )
    )
