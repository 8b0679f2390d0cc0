"""A campaign's shards as a Kubernetes Indexed Job and their merge as a Job
(`clarke submit k8s --emit`): manifests to apply with kubectl, written from the same
shard and merge steps as the Slurm batch scripts (steps.py), so the engines cannot drift.

Clarke applies nothing itself, and no cluster has run these here: they are checked by
parsing them and running their scripts (tests/integration/test_k8s.py). The campaign
travels inside the manifests (a ConfigMap), so a campaign with a page models file of its
own (`pages.models_file`) is refused: the file would not be there.

An `--influx` URL with a password is split: the shards' env gets the URL without its
user and password, which go into a Secret of a manifest of their own
(clarke-influx-secret.yaml), so the other manifests hold nothing secret and may be
shared as they are. That file alone is created 0600 (replace_file: the mode is set
before it holds anything), in a directory made 0700 (or one of the user's own that
nobody else may change). The pods take the user from the Secret (`secretKeyRef`) and
mount the password as a file only root reads, which clarke reads as
CLARKE_INFLUX_PASSWORD_FILE (clarke.results.influx): never in the environment of the
testbed's processes."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import yaml

from clarke.errors import InputError
from clarke.private_files import FILE_MODE, check_private_dir, replace_file
from clarke.submit.model import Submission, check_written
from clarke.submit.steps import merge_step, render, shard_step, template

SHARDS_MANIFEST = "clarke-campaign.yaml"
MERGE_MANIFEST = "clarke-merge.yaml"
SECRET_MANIFEST = "clarke-influx-secret.yaml"  # only with a password in --influx
# The InfluxDB the manifests start (Service `influxdb`), unless --influx names another.
IN_CLUSTER_INFLUX = "http://influxdb:8086/clarke"
# The Secret with --influx's user and password, and where a shard pod finds the password.
INFLUX_SECRET = "clarke-influx"
PASSWORD_DIR = "/run/secrets/clarke-influx"
# What the shard container gets when there is a Secret: at the placeholders of the same
# names in templates/k8s-shards.yaml, indented as they are.
INFLUX_ENV = f"""\
# --influx's user and password, from the Secret in
# clarke-influx-secret.yaml; the password as a file only root
# reads (clarke refuses one that others may read).
- name: CLARKE_INFLUX_USER
  valueFrom:
    secretKeyRef: {{name: {INFLUX_SECRET}, key: username}}
- name: CLARKE_INFLUX_PASSWORD_FILE
  value: {PASSWORD_DIR}/password"""
INFLUX_MOUNT = f"""\
- name: influx-password
  mountPath: {PASSWORD_DIR}
  readOnly: true"""
INFLUX_VOLUME = f"""\
- name: influx-password
  secret:
    secretName: {INFLUX_SECRET}
    defaultMode: 256 # 0400: root's alone
    items:
      - {{key: password, path: password}}"""


IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
QUANTITY = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[KMGTPE]i|[kMGTPE])?")


@dataclass(frozen=True)
class K8sOptions:
    """What the manifests are given besides the submission; checked here (InputError
    naming the option): plain values, no control character."""

    image: str = "clarke-client:latest"
    storage: str = "2Gi"  # the results volume (ReadWriteMany)
    max_restarts: int = 3  # replaced pods per shard (backoffLimitPerIndex)

    def __post_init__(self) -> None:
        allowed = (
            "an image reference such as registry.example:5000/clarke-client:1.0 (letters, "
            "digits and . _ / : @ + -)"
        )
        check_written(self.image, "--image", allowed, IMAGE)
        allowed = "a size such as 2Gi, 500Mi or 1T (a Kubernetes quantity)"
        check_written(self.storage, "--storage", allowed, QUANTITY)


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


def split_influx(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` without its user and password, and them, when it holds a password (as
    clarke.results.influx takes them from a URL: as written there)."""
    parts = urlsplit(url)
    if not parts.password:
        return url, None
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return bare, (parts.username or "", parts.password)


def manifests(sub: Submission, options: K8sOptions) -> dict[str, str]:
    """The manifests' texts, by file name: the shards' and the merge's, and the
    Secret's when --influx holds a password."""
    if sub.models_file:
        raise InputError(
            f"{sub.campaign_file}: pages.models_file {sub.models_file!r}: the manifests carry "
            "only the campaign file; build an image that holds the models file and adapt the "
            "ConfigMap, or use the built-in page models"
        )
    influx, credentials = split_influx(sub.influx or IN_CLUSTER_INFLUX)
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
            "influx_q": _scalar(influx),
            "influx_env": INFLUX_ENV if credentials else "",
            "influx_mount": INFLUX_MOUNT if credentials else "",
            "influx_volume": INFLUX_VOLUME if credentials else "",
            "shard_step": shard_step(sub),
        },
    )
    merge = render(template("k8s-merge.yaml"), {**common, "merge_step": merge_step()})
    texts = {}
    if credentials:  # first: what is applied first
        texts[SECRET_MANIFEST] = render(
            template("k8s-influx-secret.yaml"),
            {
                "campaign_id": sub.campaign_id,
                "secret": INFLUX_SECRET,
                "username": _scalar(credentials[0]),
                "password": _scalar(credentials[1]),
            },
        )
    return texts | {SHARDS_MANIFEST: shards, MERGE_MANIFEST: merge}


def _secret_dir(out: Path) -> None:
    """`out` made 0700 (whatever the umask), or adopted if it is the user's own and
    nobody else may change it or a directory above it (exit 3 otherwise): another user
    could have planted a link where the Secret goes, or swap the file afterwards."""
    check_private_dir(out, "--out")
    try:
        out.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    else:
        out.chmod(0o700)  # new and still empty
    check_private_dir(out, "--out")  # made by us, or by someone else just before us


def write(sub: Submission, options: K8sOptions, out: Path) -> dict[str, Path]:
    """The manifests written into `out`, by file name; the Secret's 0600 from the start."""
    texts = manifests(sub, options)
    if SECRET_MANIFEST in texts:
        _secret_dir(out)
    else:
        out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, text in texts.items():
        path = out / name
        if name == SECRET_MANIFEST:
            replace_file(path, text.encode(), FILE_MODE)
        else:
            path.write_text(text, encoding="utf-8")
        paths[name] = path
    return paths
