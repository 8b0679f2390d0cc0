"""Implementations of the server role, one registry entry each (clarke.registry): origin
(origin.py, Clarke's own), openlitespeed (openlitespeed/). Whichever serves the pages,
the server role also answers the link checks' bulk transfers (iperf3 -s)."""

from __future__ import annotations

import logging
import shutil

from clarke.place import Place, procs
from clarke.place.plan import IPERF_PORT

log = logging.getLogger(__name__)


def serve_link_checks(place: Place, children: procs.Children) -> None:
    """iperf3 -s at the server's address, for the link checks' bulk transfers; without
    iperf3 the link checks say so, the pages are still served."""
    if shutil.which("iperf3") is None:
        log.warning("iperf3 is not installed: link checks cannot measure rates here")
        return
    address = place.plan.addresses["server"]
    children.spawn("iperf3", place.argv(["iperf3", "-s", "-B", address, "-p", str(IPERF_PORT)]))
