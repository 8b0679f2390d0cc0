"""PEP presets: peps/<name>.yaml, read into typed models, like link profiles. A preset is
what a campaign's `pep:` axis and `clarke load --pep` name: an implementation of the
registry's `pep` kind with its settings, each documented and cited (docs/peps.md).

    implementation   splittcp | pepsal
    mode             splittcp: split (each station relays over a connection of its
                     own, opened per client connection) or accelerated (pre-opened hop
                     connections, tuned to start at the link's rate)
    hop              the satellite hop's connection: its congestion control (the run's,
                     or a name), socket buffers in bandwidth-delay products, and in the
                     accelerated mode its first window in BDPs and its pacing
    pool             accelerated only: hop connections kept ready, opened at once,
                     kept beyond that when clients give theirs back

How the numbers follow from a link profile (run/session/pep.py): BDP = rate x idle RTT, per
direction; the first window in segments of HOP_MSS bytes."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import Field, model_validator

from clarke import paths, schema
from clarke.errors import UnknownName
from clarke.schema import StrictModel, located_error
from clarke.vocab import PEP_NONE, CongestionControl, PepImplementation

RUN_CC: Literal["run"] = "run"


# split: each station relays over a connection of its own; accelerated: pre-opened hop
# connections that start at the link's rate.
Mode = Literal["split", "accelerated"]
SPLIT: Final = "split"
ACCELERATED: Final = "accelerated"


class Pacing(StrEnum):
    none = "none"
    link_rate = "link_rate"  # SO_MAX_PACING_RATE at the profile's rate, per direction


class Hop(StrictModel):
    congestion_control: CongestionControl | Literal["run"] = RUN_CC
    buffer_bdp: float = Field(default=2.0, ge=0, le=64, allow_inf_nan=False)
    initial_window_bdp: float = Field(default=0.0, ge=0, le=4, allow_inf_nan=False)
    pacing: Pacing = Pacing.none


class Pool(StrictModel):
    size: int = Field(default=8, ge=0, le=256)
    max_opening: int = Field(default=4, ge=1, le=64)
    spare: int = Field(default=8, ge=0, le=256)


class Preset(StrictModel):
    description: str
    sources: Annotated[list[str], Field(default_factory=list)]
    implementation: PepImplementation
    mode: Mode = SPLIT
    hop: Hop = Hop()
    pool: Pool | None = None

    @model_validator(mode="after")
    def _what_each_takes(self) -> Preset:
        if self.implementation is PepImplementation.pepsal:
            if self.mode != SPLIT:
                raise located_error(("mode",), "PEPsal splits only (mode: split)")
            if self.hop != Hop(congestion_control=self.hop.congestion_control):
                raise located_error(
                    ("hop",), "PEPsal takes only hop.congestion_control (it sizes the rest)"
                )
        if self.mode == ACCELERATED and self.pool is None:
            raise located_error(("pool",), "the accelerated mode needs its pool (size, ...)")
        if self.mode == SPLIT:
            if self.pool is not None:
                raise located_error(("pool",), "only the accelerated mode has a pool")
            tuned = self.hop.initial_window_bdp > 0 or self.hop.pacing is not Pacing.none
            if tuned:
                raise located_error(
                    ("hop",),
                    "initial_window_bdp and pacing apply to the accelerated mode (the pure "
                    "split's hop is the kernel's own)",
                )
        return self


def preset_dir() -> Path:
    return paths.data_dir("peps")


def available() -> list[str]:
    return sorted(p.stem for p in preset_dir().glob("*.yaml"))


def names() -> tuple[str, ...]:
    """What a campaign's `pep:` and `clarke load --pep` take: none, then the presets."""
    return (PEP_NONE, *available())


def read(name: str) -> Preset:
    """A shipped preset by name."""
    path = preset_dir() / f"{name}.yaml"
    if name == PEP_NONE or not path.is_file():
        raise UnknownName("PEP", name, list(names()))
    return schema.read(Preset, path)


def help_text() -> str:
    """The presets and what each is, for --help."""
    try:
        return "; ".join(f"{n}: {read(n).description.split('. ')[0].strip()}" for n in available())
    except FileNotFoundError:
        return "PEP presets (peps/NAME.yaml)."
