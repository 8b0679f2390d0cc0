"""The names a resolver answers, read from a JSON file:

    {"ttl": 300, "names": {"www.example.org": "198.18.2.10", ...}}

Names are kept lowercase without the final dot, as the site archive keeps host names.
Addresses are IPv4, inside the testbed's 198.18.0.0/15: a zone never points anywhere
real."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from clarke import schema
from clarke.schema import StrictModel

TESTBED_RANGE = ipaddress.IPv4Network("198.18.0.0/15")
DEFAULT_TTL = 300


class Zone(StrictModel):
    ttl: Annotated[int, Field(ge=0, le=86_400)] = DEFAULT_TTL
    names: dict[str, str]

    @field_validator("names")
    @classmethod
    def _names(cls, names: dict[str, str]) -> dict[str, str]:
        out = {}
        for name, address in names.items():
            key = name.lower().rstrip(".")
            if not key or any(not label or len(label) > 63 for label in key.split(".")):
                raise ValueError(f"{name!r}: not a host name")
            try:
                ip = ipaddress.IPv4Address(address)
            except ValueError:
                raise ValueError(f"{name}: {address!r} is not an IPv4 address") from None
            if ip not in TESTBED_RANGE:
                raise ValueError(f"{name}: {address} is outside the testbed range {TESTBED_RANGE}")
            out[key] = str(ip)
        return out

    def lookup(self, name: str) -> str | None:
        return self.names.get(name.lower().rstrip("."))


def read(path: Path) -> Zone:
    """The zone in `path`, or an error naming the file and the field (exit 2)."""
    return schema.read(Zone, path)
