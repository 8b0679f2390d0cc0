"""Command line of ci/run-workflow-locally (docs/ci.md)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import NoReturn

from . import expr
from .actions import ActionError, emulation
from .machine import BASE_IMAGE, MachineError
from .model import WorkflowError, load
from .runner import LocalRun, Options

OFFLINE_BASES = ["clarke-rust:local", "clarke-node:local"]


def _pairs(values: list[str], what: str) -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key:
            raise WorkflowError(f"{what} {v!r}: expected NAME=VALUE")
        out[key] = val
    return out


def _list(opts: Options) -> None:
    wf = load(opts.workflow_path)
    for name in wf.order(opts.jobs):
        job = wf.jobs[name]
        print(f"{name} (runs-on {job.runs_on}; here: a Debian 12 container)")
        for step in job.steps:
            if step.uses:
                try:
                    em = emulation(step.uses)
                    how = "skipped" if hasattr(em, "note") else "emulated"
                except ActionError as e:
                    how = f"NO STAND-IN: {e}"
            else:
                how = "run"
            print(f"  - {step.title()}: {how}")


def _terminate(signum: int, frame: object) -> NoReturn:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="ci/run-workflow-locally",
        description="Run a GitHub Actions workflow's jobs in Debian 12 containers (docs/ci.md).",
    )
    p.add_argument("workflow", help="ci, nightly, or a path to a workflow file")
    p.add_argument(
        "jobs", nargs="*", help="jobs to run (default: all), each after the jobs it needs"
    )
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a workflow_dispatch input",
    )
    p.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a repository variable (vars.NAME)",
    )
    p.add_argument(
        "--matrix",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="run only these matrix values",
    )
    p.add_argument(
        "--event",
        help="the triggering event (default: workflow_dispatch where the workflow has it)",
    )
    p.add_argument(
        "--run-dir",
        type=Path,
        help="the run directory; reuse one to run jobs that need earlier ones",
    )
    p.add_argument(
        "--offline-stack",
        action="store_true",
        help="replace docker-compose.yml in the checkout by the canonical stack with "
        "docker-compose.offline.yml (the canonical images need their registries)",
    )
    p.add_argument(
        "--load-image",
        action="append",
        default=[],
        metavar="IMAGE",
        help="copy this host's image into each job's Docker",
    )
    p.add_argument("--ref-name", help="the branch the run is for (default: the current branch)")
    p.add_argument(
        "--default-branch",
        help="the repository's default branch (github.event.repository.default_branch; "
        "default: the branch the run is for)",
    )
    p.add_argument("--keep", action="store_true", help="keep the job containers (for debugging)")
    p.add_argument(
        "--list", action="store_true", help="list the jobs and how each step would be handled"
    )
    a = p.parse_args(argv)
    path = Path(a.workflow)
    if not path.suffix:
        path = Path(".github/workflows") / f"{a.workflow}.yml"
    images = [BASE_IMAGE, *a.load_image] + (OFFLINE_BASES if a.offline_stack else [])
    signal.signal(signal.SIGTERM, _terminate)
    try:
        opts = Options(
            workflow_path=path.resolve(),
            jobs=a.jobs,
            inputs=_pairs(a.input, "--input"),
            vars=_pairs(a.var, "--var"),
            matrix=_pairs(a.matrix, "--matrix"),
            event=a.event,
            run_dir=a.run_dir,
            offline_stack=a.offline_stack,
            keep=a.keep,
            load_images=list(dict.fromkeys(images)),
            ref_name=a.ref_name,
            default_branch=a.default_branch,
        )
        if a.list:
            _list(opts)
            return 0
        return LocalRun(opts, load(opts.workflow_path)).run()
    except (WorkflowError, ActionError, MachineError, expr.ExprError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: job containers removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
