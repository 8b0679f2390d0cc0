"""From a campaign file to a plan: the ordered list of runs, with stable run ids.

Order `listed`: link profile, then repetition, then HTTP version, congestion control,
recorded site, page model, size, connections per server, cross traffic, PEP and browser, each in the
order the file lists them (one repetition of every cell before the next repetition, so
slow drifts spread over all cells). Order `shuffled`: the runs of each link profile in a
random order drawn from `seed` (chosen and recorded when the file gives none). Runs that
several scenarios share are run once and list every scenario they serve."""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from clarke import profiles, schema
from clarke.campaign import dimensions
from clarke.campaign.dimension import Dimension
from clarke.campaign.dimensions import MODEL, PROFILE, SIZE, Cell, seal
from clarke.campaign.model import Campaign, Matrix, Order
from clarke.campaign.paths import contained, with_paths_checked
from clarke.campaign.sites import PlannedSite, read_sites
from clarke.errors import InputError, ValidationFailed
from clarke.json_value import JsonObject
from clarke.pages.models import Registry, Units


@dataclass(frozen=True)
class Run:
    index: int  # position in the plan, from 0
    run_id: str
    cell: Cell  # one value per dimension (campaign/dimensions.py)
    repetition: int  # from 1
    scenarios: tuple[str, ...] = field(default=())

    @property
    def page(self) -> str:
        return self.cell.page

    def to_dict(self) -> JsonObject:
        """The run as plan.json keeps it: each dimension under its record field, with
        what a dimension describes beyond that (the cross traffic's parameters)."""
        d: JsonObject = {"index": self.index, "run_id": self.run_id}
        for dim, value in self.cell.items():
            d[dim.name] = dim.record(value)
            if dim.describe is not None:
                d |= dim.describe(value)
        d |= {"repetition": self.repetition, "scenarios": list(self.scenarios)}
        d["page"] = self.page
        return d


class ShardBy(StrEnum):
    """How `--shard i/N` slices a plan.

    index: every N-th run of the plan, from the i-th (machines that should each finish a
    whole part of the plan; a cell may land on one shard only). repetition: by each run's
    repetition, shifted by its cell's place among the plan's cells, so that a cell with N
    or more repetitions has runs on every shard and the shards' sizes differ by at most
    one run per cell (`clarke run --parallel`, whose testbeds must be comparable)."""

    run_index = "index"
    repetition = "repetition"


def shard_numbers(runs: list[Run], count: int, by: ShardBy = ShardBy.run_index) -> dict[int, int]:
    """Each run's shard (1..count), by its index in the plan. `repetition`: the cells are
    numbered in sorted order, not plan order, so a shuffled plan assigns the same way."""
    if by is ShardBy.run_index:
        return {r.index: r.index % count + 1 for r in runs}
    cell_number = {cell: k for k, cell in enumerate(sorted({r.cell for r in runs}))}
    return {r.index: (r.repetition - 1 + cell_number[r.cell]) % count + 1 for r in runs}


@dataclass(frozen=True)
class CampaignPlan:
    campaign: Campaign
    source: Path
    seed: int | None
    runs: list[Run]
    # The recorded sites its runs replay, by the path the campaign gives (campaign/sites.py).
    sites: dict[str, PlannedSite] = field(default_factory=dict)
    # Its generated pages with server delays (docs/pages.md), which only a server that
    # holds each response as asked serves as they are (registry.check_supported).
    held_pages: tuple[str, ...] = ()

    def shard(self, index: int, count: int, by: ShardBy = ShardBy.run_index) -> list[Run]:
        """The index-th (from 1) of `count` disjoint slices; together they are the plan."""
        if not 1 <= index <= count:
            raise InputError(f"shard {index}/{count}: the index must be between 1 and {count}")
        numbers = shard_numbers(self.runs, count, by)
        return [r for r in self.runs if numbers[r.index] == index]


def _check_names(c: Campaign, source: Path, registry: Registry) -> None:
    problems: list[str] = []
    known_profiles = profiles.available()
    for _, prefix, m in c.matrices():
        for i, p in enumerate(m.axis(PROFILE) or []):
            if p not in known_profiles:
                problems.append(
                    f"{prefix}.{PROFILE.key}[{i}]: unknown link profile {p!r}; allowed: "
                    f"{', '.join(known_profiles)}"
                )
        for i, name in enumerate(m.axis(MODEL) or []):
            if name not in registry.names():
                problems.append(
                    f"{prefix}.{MODEL.key}[{i}]: unknown page model {name!r}; allowed: "
                    f"{', '.join(registry.names())}"
                )
                continue
            model = registry.get(name)
            for j, size in enumerate(m.axis(SIZE) or []):
                if size not in model.sizes:
                    problems.append(
                        f"{prefix}.{SIZE.key}[{j}]: page model {name!r} has no size {size!r}; "
                        f"allowed: {', '.join(model.sizes)}"
                    )
        for d in seal():
            if d.names is None:
                continue
            allowed = tuple(d.names())
            for i, name in enumerate(m.axis(d) or []):
                if name not in allowed:
                    problems.append(
                        f"{prefix}.{d.key}[{i}]: unknown {d.noun} {name!r}; allowed: "
                        f"{', '.join(allowed)}"
                    )
    if problems:
        raise ValidationFailed(str(source), problems)


def _check_link_points(c: Campaign, source: Path) -> None:
    """Each link point the matrices sweep (a profile with parameters over it:
    clarke.link_points), read as a profile file holding its values would be."""
    problems: list[str] = []
    read: set[str] = set()
    for _, prefix, m in c.matrices():
        for cell in cells_of(c, m):
            if cell.link == cell[PROFILE] or cell.link in read:
                continue
            read.add(cell.link)
            try:
                profiles.read(cell.link)
            except InputError as e:
                problems.append(f"{prefix}: link {cell.link}: {e}")
    if problems:
        raise ValidationFailed(str(source), problems)


def page_registry(c: Campaign, source: Path) -> Registry:
    extra = []
    if c.pages.models_file:
        extra.append(contained(source, c.pages.models_file, "pages.models_file"))
        if not extra[0].is_file():
            raise ValidationFailed(str(source), [f"pages.models_file: file not found: {extra[0]}"])
    return Registry.default(extra)


def _read(path: Path) -> tuple[Campaign, dict[str, PlannedSite], tuple[str, ...]]:
    """The campaign, checked, the sites it replays, read and checked, and its generated
    pages with server delays (which servers hold them is the registry's check)."""
    c = with_paths_checked(schema.read(Campaign, path), path)
    sites = read_sites(c, path)
    registry = page_registry(c, path)
    _check_names(c, path, registry)
    _check_link_points(c, path)
    # Building every page spec catches model/size combinations too small for a JPEG.
    held: list[str] = []
    for _, _, m in c.matrices():
        for model in m.axis(MODEL) or []:
            for size in m.axis(SIZE) or []:
                if registry.get(model).page(size, Units(c.pages.units)).server_delays:
                    held.append(f"{model}-{size}")
    return c, sites, tuple(dict.fromkeys(held))


def cells_of(c: Campaign, m: Matrix) -> list[Cell]:
    """A matrix's cells, in order: the product of its axes, dimension after dimension
    in their declared order (a dimension the matrix does not give takes its default,
    which may depend on the coordinates before it)."""
    partial: list[JsonObject] = [{}]
    for d in dimensions.seal():
        given = m.axis(d)

        def values(coords: JsonObject, d: Dimension[Any] = d, given: Any = given) -> Any:
            if given and (d.applies is None or d.applies(coords)):
                return given
            return [d.default_for(coords, c.browser)]

        partial = [{**coords, d.name: value} for coords in partial for value in values(coords)]
    # A dimension that does not apply to some cells (a site's page model) makes them once.
    return list(dict.fromkeys(Cell(coords) for coords in partial))


def run_id(c: Campaign, cell: Cell, repetition: int) -> str:
    """Every required dimension's part, then the part of each other dimension a matrix
    of the campaign gives, then the repetition: geo-h2-bbr-uniform-1m-c6-r1."""
    varied: dict[str, bool] = {}

    def carried(d: Dimension[Any]) -> bool:
        if d.name not in varied:
            varied[d.name] = d.required or c.varies(d)
        return varied[d.name]

    parts = [d.run_id(v) for d, v in cell.items() if carried(d)]
    # A part may be empty: a value that says nothing (a site's cell has no page model).
    return "-".join([*(p for p in parts if p), f"r{repetition}"])


def expand(c: Campaign, source: Path, seed: int | None = None) -> CampaignPlan:
    cells: dict[Cell, list[str]] = {}
    for scenario, _, m in c.matrices():
        for cell in cells_of(c, m):
            cells.setdefault(cell, []).append(scenario)
    profile_order = list(dict.fromkeys(cell.link for cell in cells))
    if c.order is Order.shuffled:
        seed = (
            seed
            if seed is not None
            else (c.seed if c.seed is not None else secrets.randbelow(2**31))
        )
    else:
        seed = None
    repetitions = {cell: c.repetitions_of(names) for cell, names in cells.items()}
    runs: list[Run] = []
    for profile in profile_order:
        block = [
            (rep, cell)
            for rep in range(1, max(repetitions.values()) + 1)
            for cell in cells
            if cell.link == profile and rep <= repetitions[cell]
        ]
        if seed is not None:
            random.Random(f"{seed}:{profile}").shuffle(block)
        for rep, cell in block:
            runs.append(
                Run(
                    index=len(runs),
                    run_id=run_id(c, cell, rep),
                    cell=cell,
                    repetition=rep,
                    scenarios=tuple(cells[cell]),
                )
            )
    return CampaignPlan(c, source, seed, runs)


def plan_file(path: Path, seed: int | None = None) -> CampaignPlan:
    c, sites, held = _read(path)
    return replace(expand(c, path, seed), sites=sites, held_pages=held)


def positions_per_profile(runs: list[Run]) -> dict[int, tuple[int, int]]:
    """Each run's (k, n): its place among the n runs of its profile, in plan order. From
    the whole plan, so that a shard or a resumed campaign aims every load where the
    whole campaign would (slot_phase sweep)."""
    by_profile: dict[str, list[int]] = {}
    for r in runs:
        by_profile.setdefault(r.cell.link, []).append(r.index)
    return {i: (k, len(idx)) for idx in by_profile.values() for k, i in enumerate(idx)}
