"""A campaign's shards as a Kubernetes Indexed Job and their merge as a Job
(`clarke submit k8s --emit`): manifests to apply with kubectl, written from the same
shard and merge steps as the Slurm batch scripts (steps.py), so the engines cannot drift.

Clarke applies nothing itself, and no cluster has run these here: they are checked by
parsing them and running their scripts (tests/integration/test_k8s.py). The campaign
travels inside the manifests (a ConfigMap), so a campaign with a page models file of its
own (`pages.models_file`) is refused: the file would not be there."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from clarke.errors import InputError
from clarke.submit.model import Submission
from clarke.submit.steps import merge_step, render, shard_step, template

SHARDS_MANIFEST = "clarke-campaign.yaml"
MERGE_MANIFEST = "clarke-merge.yaml"
# The InfluxDB the manifests start (Service `influxdb`), unless --influx names another.
IN_CLUSTER_INFLUX = "http://influxdb:8086/clarke"


@dataclass(frozen=True)
class K8sOptions:
    image: str = "clarke-client:latest"
    storage: str = "2Gi"  # the results volume (ReadWriteMany)
    max_restarts: int = 3  # replaced pods per shard (backoffLimitPerIndex)


def _scalar(value: str) -> str:
    """`value` as a YAML scalar: plain where it reads back as the same string."""
    try:
        if value and yaml.safe_load(f"k: {value}")["k"] == value:
            return value
    except yaml.YAMLError:
        pass
    return json.dumps(value)


def _block(text: str, indent: int) -> str:
    """`text` as a YAML literal block scalar whose lines are indented `indent` spaces
    (the indentation is stated, so lines that start with spaces stay as they are)."""
    chomp = "" if text.endswith("\n") and not text.endswith("\n\n") else "+"
    if not text.endswith("\n"):
        chomp = "-"
    body = "\n".join(" " * indent + line if line else "" for line in text.splitlines())
    return f"|2{chomp}\n{body}"


def _campaign_value(text: str) -> str:
    """The campaign file as the ConfigMap's value: a literal block when that reads back
    as the same bytes, else a JSON string (valid YAML, and exact)."""
    block = _block(text, 4)
    try:
        if yaml.safe_load(f"data:\n  campaign.yaml: {block}\n")["data"]["campaign.yaml"] == text:
            return block
    except yaml.YAMLError:
        pass
    return json.dumps(text)


def manifests(sub: Submission, options: K8sOptions) -> dict[str, str]:
    """The two manifests' texts, by file name."""
    if sub.models_file:
        raise InputError(
            f"{sub.campaign_file}: pages.models_file {sub.models_file!r}: the manifests carry "
            "only the campaign file; build an image that holds the models file and adapt the "
            "ConfigMap, or use the built-in page models"
        )
    common = {
        "campaign_id": sub.campaign_id,
        "campaign_id_q": _scalar(sub.campaign_id),
        "shards": str(sub.shards),
        "image": _scalar(options.image),
    }
    shards = render(
        template("k8s-shards.yaml"),
        {
            **common,
            "campaign_name": sub.campaign_name,
            "runs": str(sub.runs),
            "campaign_yaml": _campaign_value(sub.campaign_file.read_text(encoding="utf-8")),
            "storage": _scalar(options.storage),
            "max_restarts": str(options.max_restarts),
            "influx_q": _scalar(sub.influx or IN_CLUSTER_INFLUX),
            "shard_step": shard_step(sub),
        },
    )
    merge = render(template("k8s-merge.yaml"), {**common, "merge_step": merge_step()})
    return {SHARDS_MANIFEST: shards, MERGE_MANIFEST: merge}


def write(sub: Submission, options: K8sOptions, out: Path) -> list[Path]:
    texts = manifests(sub, options)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in texts.items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
