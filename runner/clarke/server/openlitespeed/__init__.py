"""OpenLiteSpeed in the server role (docs/openlitespeed.md): the registry entry, and the
names of its parts.

    settings.py  the congestion controls the runner sets between runs, POST /config's body
    config.py    the two configuration files it reads, every key one its manual documents
    install.py   where it is installed, and a server root of its own that runs it
    tcp.py       its TCP connections measured: `ss -tin` sampled during a page load
    quic.py      its HTTP/3 connections measured: lsquic's log, nftables counters
    stats.py     its connections' records: the access log joined with those measurements
    server.py    OpenLiteSpeedRole, the role agent's process: start, stop, /config, /stats
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from clarke.campaign.dimensions import CC, SCHEDULER, SITE
from clarke.errors import EnvironmentProblem
from clarke.place import Place
from clarke.roles import EVERY, Capabilities, RoleProcess, ServerImplementation
from clarke.server import serve_link_checks
from clarke.server.openlitespeed.config import (
    DOCUMENTED_KEYS,
    HTTPD_CONFIG,
    VHCONF,
    OlsSite,
    render,
    write,
)
from clarke.server.openlitespeed.install import (
    check_master_can_reopen,
    find_install,
    install_problem,
    make_server_root,
)
from clarke.server.openlitespeed.server import OlsPlace, OpenLiteSpeedRole, initial_settings
from clarke.server.openlitespeed.settings import OWN_SCHEDULER, OlsSettings, settings_from_body
from clarke.vocab import Scheduler

__all__ = [
    "DOCUMENTED_KEYS",
    "HTTPD_CONFIG",
    "VHCONF",
    "OlsPlace",
    "OlsSettings",
    "OlsSite",
    "OpenLiteSpeed",
    "OpenLiteSpeedRole",
    "check_master_can_reopen",
    "find_install",
    "initial_settings",
    "install_problem",
    "make_server_root",
    "render",
    "settings_from_body",
    "write",
]


class OpenLiteSpeed(ServerImplementation):
    name = "openlitespeed"
    summary = "OpenLiteSpeed (the study's server); its image: images/openlitespeed"
    supports: ClassVar[Capabilities] = {CC.name: EVERY, SCHEDULER.name: {Scheduler.own.value}}
    notes: ClassVar[Mapping[str, str]] = {
        SCHEDULER.name: f"OpenLiteSpeed keeps its own stream scheduler, {OWN_SCHEDULER}; "
        "origin takes every scheduler (docs/scheduling.md)",
        SITE.name: "only origin replays a recorded site (docs/sites.md)",
    }
    own_scheduler = OWN_SCHEDULER
    install = "see docs/openlitespeed.md, or use --server origin"

    def check_environment(self) -> None:
        if find_install() is None:
            raise EnvironmentProblem(f"{install_problem()}; or use --server origin")

    def start(self, place: Place) -> RoleProcess:
        self.check_environment()
        role = OpenLiteSpeedRole.for_place(place)
        try:
            role.start()
            serve_link_checks(place, role.children)
        except BaseException:
            role.stop()
            raise
        return role
