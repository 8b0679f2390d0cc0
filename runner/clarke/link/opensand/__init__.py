"""OpenSAND 8.2 in the link roles (docs/opensand.md): the registry entry, and the names
of its parts.

    mapping.py   how a link profile maps onto OpenSAND's configuration; what it refuses
    return_access.py  the return carrier and the terminal's DAMA (constant or on demand)
    xml.py       the three entities' XML (`python -m clarke.link.opensand` writes it)
    entity.py    one entity in one link role: OpenSandRole, the role agent's process
"""

from __future__ import annotations

import os

from clarke.errors import EnvironmentProblem
from clarke.link.opensand.entity import (
    HOW_TO_INSTALL,
    OpenSandRole,
    entrypoint_path,
    require_opensand,
)
from clarke.link.opensand.mapping import (
    BRIDGE_IFACE,
    FILES,
    GLIBC_TUNABLES,
    MAC_GW,
    MAC_ST,
    OPENSAND_VERSION,
    RETURN_CAPACITY_KBPS,
    ROLES,
    TAP_IFACE,
    Entities,
    Mapping,
    delay_value_for,
    derive,
    expected_rtt_ms,
    mapping_table,
)
from clarke.link.opensand.xml import generate, main, write
from clarke.place import Place
from clarke.profiles import LinkProfile
from clarke.roles import Implementation, RoleProcess

__all__ = [
    "BRIDGE_IFACE",
    "FILES",
    "GLIBC_TUNABLES",
    "MAC_GW",
    "MAC_ST",
    "OPENSAND_VERSION",
    "RETURN_CAPACITY_KBPS",
    "ROLES",
    "TAP_IFACE",
    "Entities",
    "Mapping",
    "OpenSand",
    "delay_value_for",
    "derive",
    "expected_rtt_ms",
    "generate",
    "main",
    "mapping_table",
    "write",
]


class OpenSand(Implementation):
    kind = "link"
    name = "opensand"
    summary = "OpenSAND 8.2 ST, SAT and GW (the study's emulator); no lossy or LAN profiles"
    install = HOW_TO_INSTALL

    def check_environment(self) -> None:
        require_opensand()
        entry = entrypoint_path()
        if entry is None or not os.access(entry, os.X_OK):
            raise EnvironmentProblem(
                f"the OpenSAND entrypoint is missing ({entry or 'opensand/entrypoint.sh'}): "
                "run from a Clarke checkout, or set CLARKE_OPENSAND_ENTRYPOINT"
            )

    def check_profile(self, profile: LinkProfile, source: str = "link profile") -> None:
        """ValidationFailed naming every profile field OpenSAND cannot emulate (e.g. lan)."""
        derive(profile, source)

    def start(self, place: Place) -> RoleProcess:
        self.check_environment()
        entry = entrypoint_path()
        assert entry is not None
        return OpenSandRole.for_place(place, entry)
