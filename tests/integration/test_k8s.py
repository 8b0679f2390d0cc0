"""The example Kubernetes manifests (k8s/), which are `clarke submit k8s --emit`'s
output for the nightly campaign: that they are, their structure and wiring, parsed with
PyYAML (no cluster here), and their shell scripts run: the shard script with recording
stand-ins for `mount`, `mknod` and `clarke`, the merge script with the real `clarke` on
recorded shards. With an InfluxDB password in `--influx`, the Secret that carries it
and the shard pod's env and volume that take it from there."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from clarke.results import store
from clarke.results.influx import InfluxTarget
from clarke.results.journal import Journal
from helpers import split_results

K8S = Path("k8s")
# How the committed examples were written.
EMIT = [
    "submit", "k8s", "campaigns/nightly.yaml", "--shards", "4",
    "--campaign-id", "nightly-20261122T010000Z", "--emit",
]  # fmt: skip


def test_the_examples_are_what_clarke_submit_k8s_writes(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run_cli(*EMIT, "--out", str(tmp_path))
    assert code == 0, err
    for name in ("clarke-campaign.yaml", "clarke-merge.yaml"):
        assert (K8S / name).read_text() == (tmp_path / name).read_text(), (
            f"k8s/{name} differs from the generated one: clarke {' '.join(EMIT)} --out k8s"
        )


def _docs(name: str) -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in docs}


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


def test_shards_are_an_indexed_job_wired_to_a_shared_influxdb() -> None:
    docs = _docs("clarke-campaign.yaml")
    job = docs["Job/clarke-shards"]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"]
    assert pod["restartPolicy"] == "Never"
    (c,) = pod["containers"]
    env = _env(c)
    assert int(env["SHARDS"]) == spec["completions"]
    assert env["CAMPAIGN_ID"] and env["CAMPAIGN_FILE"] == "/campaign/campaign.yaml"
    # Each shard is retried on its own, and not at all for bad input or a missing part.
    assert spec["backoffLimitPerIndex"] >= 1 and "backoffLimit" not in spec
    (rule,) = spec["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailIndex" and rule["onExitCodes"]["values"] == [2, 3]
    assert rule["onExitCodes"]["containerName"] == c["name"]
    assert c["image"].startswith("clarke-client")
    script = c["args"][0]
    assert "JOB_COMPLETION_INDEX" in script and "--campaign-id" in script
    # the shared InfluxDB: a Service in front of the Deployment, on the port the URL names
    svc, dep = docs["Service/influxdb"], docs["Deployment/influxdb"]
    assert env["CLARKE_INFLUX"] == f"http://influxdb:{svc['spec']['ports'][0]['port']}/clarke"
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    # volumes: every mount is declared, the results claim exists and is shared
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert {m["name"] for m in c["volumeMounts"]} <= volumes.keys()
    claim = volumes["results"]["persistentVolumeClaim"]["claimName"]
    assert docs[f"PersistentVolumeClaim/{claim}"]["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volumes["campaign"]["configMap"]["name"] == "clarke-campaign"
    # The campaign travels in the ConfigMap, byte for byte.
    campaign = docs["ConfigMap/clarke-campaign"]["data"]["campaign.yaml"]
    assert campaign == Path("campaigns/nightly.yaml").read_text()


def test_shard_pods_hold_the_capabilities_of_the_netns_substrate_and_no_more() -> None:
    c = _docs("clarke-campaign.yaml")["Job/clarke-shards"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    sc = c["securityContext"]
    assert sc["privileged"] is False
    assert set(sc["capabilities"]["add"]) == {"NET_ADMIN", "SYS_ADMIN", "NET_RAW"}
    assert sc["appArmorProfile"]["type"] == "Unconfined"
    assert sc["seccompProfile"]["type"] == "RuntimeDefault"
    assert (
        "hostNetwork"
        not in _docs("clarke-campaign.yaml")["Job/clarke-shards"]["spec"]["template"]["spec"]
    )


def _recording_path(tmp_path: Path, names: list[str]) -> dict[str, str]:
    """A PATH whose `names` print their argument lists (one per line) instead of acting."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for n in names:
        f = bindir / n
        f.write_text(f'#!/bin/sh\necho "{n} $*" >> "{tmp_path}/calls"\n')
        f.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


def test_shard_script_passes_index_plus_one_of_n(tmp_path: Path) -> None:
    c = _docs("clarke-campaign.yaml")["Job/clarke-shards"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    env = {**_recording_path(tmp_path, ["mount", "mknod", "clarke"]), **_env(c)}
    results = tmp_path / "results"
    env["RESULTS"] = str(results)
    script = c["args"][0]
    for index in range(int(env["SHARDS"])):
        env["JOB_COMPLETION_INDEX"] = str(index)
        proc = subprocess.run([*c["command"], script], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    runs = [shlex.split(line) for line in calls if line.startswith("clarke ")]
    n = env["SHARDS"]
    assert [r[r.index("--shard") + 1] for r in runs] == [f"{i}/{n}" for i in range(1, int(n) + 1)]
    assert all(r[r.index("--campaign-id") + 1] == env["CAMPAIGN_ID"] for r in runs)
    assert all(r[2] == "/campaign/campaign.yaml" for r in runs)
    assert all(r[r.index("--results") + 1] == str(results) for r in runs)
    assert sum(line == "mount -o remount,rw /proc/sys" for line in calls) == int(n)
    assert not any("--resume" in r for r in runs)
    # A retried pod of index 1 (shard 2) finds its shard's directory and resumes it.
    shard2 = results / f"{env['CAMPAIGN_ID']}-shard2of{n}"
    shard2.mkdir(parents=True)
    (shard2 / "meta.json").write_text("{}")
    env["JOB_COMPLETION_INDEX"] = "1"
    subprocess.run([*c["command"], script], env=env, check=True)
    last = shlex.split((tmp_path / "calls").read_text().splitlines()[-1])
    assert last[-2:] == ["--resume", str(shard2)] and last[last.index("--shard") + 1] == f"2/{n}"


def test_merge_job_merges_the_shards_for_real(tmp_path: Path) -> None:
    shard_job = _docs("clarke-campaign.yaml")["Job/clarke-shards"]
    merge_job = _docs("clarke-merge.yaml")["Job/clarke-merge"]
    (c,) = merge_job["spec"]["template"]["spec"]["containers"]
    env = _env(c)
    assert env["SHARDS"] == str(shard_job["spec"]["completions"])
    assert (
        env["CAMPAIGN_ID"]
        == _env(shard_job["spec"]["template"]["spec"]["containers"][0])["CAMPAIGN_ID"]
    )
    assert merge_job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"] == {
        "claimName": "clarke-results"
    }
    # Run the script on recorded data split into shards as `clarke run --shard` names them.
    results = tmp_path / "results"
    shards = split_results(Path("tests/data/recorded-repeats"), results, int(env["SHARDS"]))
    script = c["args"][0]
    run_env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "CAMPAIGN_ID": "recorded-repeats",
        "SHARDS": env["SHARDS"],
        "RESULTS": str(results),
    }
    proc = subprocess.run(
        [*c["command"], script], env=run_env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    merged = results / "recorded-repeats"
    assert len(list(Journal.in_dir(merged).records())) == sum(
        len(list(Journal.in_dir(s).records())) for s in shards
    )
    assert (merged / "report.html").is_file() and (merged / store.META).is_file()


def test_an_influx_password_reaches_the_shards_through_a_secret(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pod is put together as the kubelet would: its env's `secretKeyRef`s read from
    the Secret, the Secret's volume as files of its `defaultMode` at their mountPath
    (under tmp_path). Its shard script, run with a stand-in `clarke` that records its
    environment, hands clarke a URL without the password, and clarke.results.influx
    reads that environment back to the URL's user and password."""
    url = "http://clarke:pa55-w0rd@influx.example:8086/clarke"
    out = tmp_path / "k8s"
    code, _, err = run_cli(*EMIT, "--influx", url, "--out", str(out))
    assert code == 0, err
    docs = {
        f"{d['kind']}/{d['metadata']['name']}": d
        for name in ("clarke-influx-secret.yaml", "clarke-campaign.yaml")
        for d in yaml.safe_load_all((out / name).read_text())
        if d
    }
    secret = docs["Secret/clarke-influx"]
    data = secret["stringData"]
    assert data == {"username": "clarke", "password": "pa55-w0rd"}
    assert "pa55-w0rd" not in (out / "clarke-campaign.yaml").read_text()
    pod = docs["Job/clarke-shards"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    root = tmp_path / "pod"
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    secret_volumes = [v for v in pod["volumes"] if "secret" in v]
    assert len(secret_volumes) == 1
    for v in secret_volumes:
        assert v["secret"]["secretName"] == secret["metadata"]["name"]
        assert v["secret"]["defaultMode"] == 0o400 and mounts[v["name"]]["readOnly"] is True
        where = root / mounts[v["name"]]["mountPath"].lstrip("/")
        where.mkdir(parents=True)
        for item in v["secret"]["items"]:
            (where / item["path"]).write_text(data[item["key"]])
            (where / item["path"]).chmod(v["secret"]["defaultMode"])
    env: dict[str, str] = {}
    for e in c["env"]:
        if "valueFrom" in e:
            ref = e["valueFrom"]["secretKeyRef"]
            assert ref["name"] == secret["metadata"]["name"]
            env[e["name"]] = data[ref["key"]]
        else:
            env[e["name"]] = e["value"]
    assert env["CLARKE_INFLUX"] == "http://influx.example:8086/clarke"
    assert "pa55-w0rd" not in "".join(env.values())
    env["CLARKE_INFLUX_PASSWORD_FILE"] = str(root / env["CLARKE_INFLUX_PASSWORD_FILE"].lstrip("/"))
    # The shard script, with stand-ins; `clarke` records its environment.
    run_env = {**_recording_path(tmp_path, ["mount", "mknod"]), **env}
    (tmp_path / "bin" / "clarke").write_text(f'#!/bin/sh\nenv > "{tmp_path}/clarke-env"\n')
    (tmp_path / "bin" / "clarke").chmod(0o755)
    run_env |= {"RESULTS": str(tmp_path / "results"), "JOB_COMPLETION_INDEX": "0"}
    proc = subprocess.run(
        [*c["command"], c["args"][0]], env=run_env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    seen = dict(
        line.split("=", 1)
        for line in (tmp_path / "clarke-env").read_text().splitlines()
        if line.startswith("CLARKE_INFLUX")
    )
    for name in ("CLARKE_INFLUX_USER", "CLARKE_INFLUX_PASSWORD_FILE"):
        monkeypatch.setenv(name, seen[name])
    target = InfluxTarget.parse(seen["CLARKE_INFLUX"])
    assert (
        target.auth == ("clarke", "pa55-w0rd")
        and str(target) == "http://influx.example:8086/clarke"
    )
