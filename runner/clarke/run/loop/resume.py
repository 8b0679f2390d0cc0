"""What a resume must find: the same campaign, the same shard, in a results directory
this runner may write to."""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml

from clarke import schema
from clarke.campaign.model import Campaign
from clarke.campaign.plan import CampaignPlan
from clarke.errors import ClarkeError, InputError
from clarke.results import store


def require_same_campaign(directory: Path, given: CampaignPlan) -> None:
    """Refuse a resume of `directory` with another campaign than it was started with,
    showing where they differ."""
    difference = campaign_difference(directory / store.CAMPAIGN_COPY, given)
    if difference:
        raise InputError(
            f"{given.source} is not the campaign {directory} was started with; a resume "
            f"runs the same campaign (start a new results directory for another):\n"
            f"{difference}"
        )


def campaign_difference(stored: Path, given: CampaignPlan) -> str:
    """Where the campaign given to a resume differs from the one the results directory
    was started with, as a unified diff of both campaigns' values (comments and layout
    do not count); empty when they are the same campaign."""
    try:
        before = schema.read(Campaign, stored).model_dump(mode="json")
    except ClarkeError as e:
        raise InputError(f"{stored}: the stored campaign cannot be read: {e}") from e
    after = given.campaign.model_dump(mode="json")
    if before == after:
        return ""
    lines = difflib.unified_diff(
        yaml.safe_dump(before, sort_keys=True).splitlines(),
        yaml.safe_dump(after, sort_keys=True).splitlines(),
        fromfile=str(stored),
        tofile=str(given.source),
        lineterm="",
        n=1,
    )
    return "\n".join(lines)
