"""`clarke campaign …`: check a campaign file and show the runs it expands into."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import click

from clarke import profiles, registry
from clarke.campaign.dimensions import CONNECTIONS
from clarke.campaign.plan import plan_file
from clarke.vocab import CONGESTION_CONTROLS, HTTP_VERSIONS

CAMPAIGN_FILE = click.Path(path_type=Path, dir_okay=False)


@click.group()
def campaign() -> None:
    """Campaign files: a matrix of link profiles x HTTP versions x congestion controls x
    pages x repetitions (see docs/campaigns.md)."""


@campaign.command()
@click.argument("file", type=CAMPAIGN_FILE)
def validate(file: Path) -> None:
    """Check FILE against the campaign schema, its names (profiles, page models, sizes,
    implementations), whether its link can emulate each profile and whether its
    implementations take every value of its matrix; exit 2 naming every bad field."""
    p = plan_file(file)
    c = p.campaign
    registry.check_names(c, str(file))
    cells = list(dict.fromkeys(r.cell for r in p.runs))
    names = sorted({cell.link for cell in cells})
    on = []
    for link_name, server_name in c.implementations.combinations():
        link, server = registry.get("link", link_name), registry.get("server", server_name)
        registry.check_profiles(link, [(n, profiles.read(n)) for n in names])
        source = f"{file} ({link.name} link, {server.name} server)"
        registry.check_supported(cells, [link, server], source, p.held_pages)
        on.append(f"link {link.name}, server {server.name}")
    click.echo(f"{file}: valid campaign {c.name!r} ({'; '.join(on)})")


PLAN_HELP = (
    "Print the runs FILE expands into, in the order they will run, and their count.\n\n"
    f"HTTP versions: {', '.join(HTTP_VERSIONS)}; "
    f"congestion controls: {', '.join(CONGESTION_CONTROLS)}."
)


@campaign.command(help=PLAN_HELP)
@click.argument("file", type=CAMPAIGN_FILE)
@click.option("--seed", type=int, help="Seed for a shuffled order (overrides the file's).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def plan(file: Path, seed: int | None, as_json: bool) -> None:
    p = plan_file(file, seed)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "campaign": p.campaign.name,
                    "order": p.campaign.order.value,
                    "seed": p.seed,
                    "count": len(p.runs),
                    **({"sites": {k: s.describe() for k, s in p.sites.items()}} if p.sites else {}),
                    "runs": [r.to_dict() for r in p.runs],
                },
                indent=2,
            )
        )
        return
    for r in p.runs:
        # Each dimension as the record names it; the optional ones where a matrix gives
        # them or their value is not the default.
        shown = " ".join(
            f"{d.name}={d.text(v)}"
            for d, v in r.cell.items()
            if d.required or p.campaign.varies(d) or d.name == CONNECTIONS.name
        )
        click.echo(
            f"{r.index:>5}  {r.run_id:<40} {shown} rep={r.repetition} "
            f"scenarios={','.join(r.scenarios)}"
        )
    per_profile = Counter(r.cell.link for r in p.runs)
    order = p.campaign.order.value + (f" (seed {p.seed})" if p.seed is not None else "")
    cells = len({r.cell for r in p.runs})
    repetitions = p.campaign.repetitions
    reps = f"{repetitions} repetitions" if isinstance(repetitions, int) else repetitions.describe()
    more = {s.name: s.repetitions for s in p.campaign.scenarios or () if s.repetitions is not None}
    if more:
        reps += " (" + ", ".join(f"{name}: {n}" for name, n in more.items()) + ")"
    click.echo(
        f"{len(p.runs)} runs: {cells} cells x {reps}; "
        + ", ".join(f"{k}: {v}" for k, v in per_profile.items())
        + f"; order {order}"
    )
