#!/usr/bin/env python3
"""`gh` inside ci/run-workflow-locally's runner containers, where GitHub's API cannot be
reached: `gh run list` and `gh run download` answered from the earlier local runs kept
in /opt/gha-local/runs (each run directory's state.json and artifacts/). Any other use
fails, saying so. Standard library only: it runs on the container's python3."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STORE = Path("/opt/gha-local/runs")


def _runs() -> Iterator[dict[str, Any]]:
    for state in STORE.glob("*/state.json"):
        try:
            run = json.loads(state.read_text())
        except (OSError, ValueError):
            continue
        run["dir"] = state.parent
        yield run


def _list(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="gh run list")
    for opt in ("--workflow", "--branch", "--status", "--json", "--jq"):
        p.add_argument(opt)
    p.add_argument("--limit", type=int, default=20)
    a = p.parse_args(argv)
    if a.json != "databaseId" or a.jq != ".[].databaseId":
        print("gh run list (local): only --json databaseId --jq '.[].databaseId'", file=sys.stderr)
        return 1
    found = [
        r
        for r in _runs()
        if (not a.workflow or r.get("workflow") == a.workflow)
        and (not a.branch or r.get("ref_name") == a.branch)
        and (not a.status or r.get("conclusion") == a.status)
    ]
    for run in sorted(found, key=lambda r: r["run_id"], reverse=True)[: a.limit]:
        print(run["run_id"])
    return 0


def _download(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="gh run download")
    p.add_argument("run_id")
    p.add_argument("--name", "-n", required=True)
    p.add_argument("--dir", "-D", default=".")
    a = p.parse_args(argv)
    for run in _runs():
        if str(run["run_id"]) == a.run_id:
            src = run["dir"] / "artifacts" / a.name
            if not src.is_dir():
                print(f"no artifact {a.name!r} in local run {a.run_id}", file=sys.stderr)
                return 1
            shutil.copytree(src, a.dir, dirs_exist_ok=True)
            return 0
    print(f"no local run {a.run_id}", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    if argv[:2] == ["run", "list"]:
        return _list(argv[2:])
    if argv[:2] == ["run", "download"]:
        return _download(argv[2:])
    print(
        f"gh {' '.join(argv)}: not available in a local run (ci/run-workflow-locally emulates "
        "only `gh run list` and `gh run download`, from earlier local runs)",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
