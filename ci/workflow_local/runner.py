"""Runs a workflow's jobs the way a GitHub-hosted runner would, in Debian 12 containers
(machine.py): each `run:` step as GitHub runs it (bash -eo pipefail, the job's and
step's env, expressions substituted first, GITHUB_OUTPUT/ENV/PATH/STEP_SUMMARY read back),
`if:` conditions and job needs and matrices as GitHub evaluates them, and each `uses:`
step by its local stand-in (actions.py). What was run, emulated or skipped, each step's
result and time go to the run directory's summary.md and state.json; a later
invocation with the same --run-dir continues with the jobs that need earlier ones."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import expr
from .actions import ActionError, Outcome, RunInfo, StepIO, emulation
from .hashfiles import hash_files
from .machine import Machine, Mount, say
from .model import Job, Step, Workflow, WorkflowError

WORK = "/home/runner/work"
TEMP = f"{WORK}/_temp"
STORE_MOUNT = "/opt/gha-local/runs"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
GH_SHIM = Path(__file__).with_name("gh_shim.py")


@dataclass
class Options:
    workflow_path: Path
    jobs: list[str]
    inputs: dict[str, str]
    vars: dict[str, str]
    matrix: dict[str, str]
    event: str | None
    run_dir: Path | None
    offline_stack: bool
    keep: bool
    load_images: list[str]
    repository: str = "local/clarke"
    default_branch: str | None = None  # None: the branch the run is for
    ref_name: str | None = None


@dataclass(frozen=True)
class ScriptEnvironment:
    """What a `run:` step sees: its environment, and the job's PATH entries and environment,
    which its GITHUB_PATH and GITHUB_ENV files add to for the steps after it."""

    env: dict[str, str]
    paths: list[str]
    job_env: dict[str, str]


@dataclass
class StepRecord:
    name: str
    handling: str  # ran, emulated, skipped (a GitHub service), not run (its if:)
    result: str
    seconds: float
    note: str = ""


@dataclass
class JobRecord:
    job: str
    matrix: dict[str, Any]
    result: str = "success"
    outputs: dict[str, str] = field(default_factory=dict)
    steps: list[StepRecord] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    annotations: list[str] = field(default_factory=list)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def parse_file_command(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT / GITHUB_ENV content: `name=value` lines and `name<<DELIM` blocks."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            continue
        m = re.match(r"^([^=<]+)<<(.+)$", line)
        if m:
            block: list[str] = []
            while i < len(lines) and lines[i] != m.group(2):
                block.append(lines[i])
                i += 1
            i += 1
            out[m.group(1)] = "\n".join(block)
        elif "=" in line:
            k, _, v = line.partition("=")
            out[k] = v
        else:
            raise WorkflowError(f"unreadable file command line: {line!r}")
    return out


class LocalRun:
    def __init__(self, opts: Options, workflow: Workflow) -> None:
        self.o = opts
        self.wf = workflow
        self.repo = Path(_git(opts.workflow_path.parent, "rev-parse", "--show-toplevel"))
        self.sha = _git(self.repo, "rev-parse", "HEAD")
        ref = opts.ref_name or _git(self.repo, "rev-parse", "--abbrev-ref", "HEAD")
        self.ref_name = "main" if ref == "HEAD" else ref
        dirty = bool(_git(self.repo, "status", "--porcelain", "--untracked-files=no"))
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        self.run_dir = (
            opts.run_dir or self.repo / "build/workflow-runs" / f"{workflow_file(opts)}-{stamp}"
        ).resolve()
        state_file = self.run_dir / "state.json"
        self.state: dict[str, Any] = (
            json.loads(state_file.read_text()) if state_file.exists() else {}
        )
        if self.state and self.state.get("workflow") != workflow_file(opts):
            raise WorkflowError(f"{self.run_dir} holds a run of {self.state.get('workflow')}")
        if not self.state:
            self.state = {
                "workflow": workflow_file(opts),
                # Microseconds, not seconds: the job containers are named after it, and
                # two runs that start in the same second (the suite's workers) clashed.
                "run_id": time.time_ns() // 1000,
                "sha": self.sha,
                "ref_name": self.ref_name,
                "event": self._event(),
                "inputs": self._inputs(),
                "jobs": {},
                "conclusion": None,
            }
        elif self.state["sha"] != self.sha:
            raise WorkflowError(
                f"{self.run_dir} ran commit {self.state['sha'][:12]}; HEAD is {self.sha[:12]}"
            )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.info = RunInfo(
            self.repo, self.sha, self.ref_name, dirty, self.run_dir, opts.offline_stack
        )
        self.records: list[JobRecord] = []

    # --- contexts -----------------------------------------------------------------------
    def _ctx(self, values: dict[str, Any], failed: bool = False) -> expr.Context:
        def hash_files_fn(*globs: str) -> str:
            return hash_files(self.repo, self.sha, *globs)

        return expr.Context(values, failed=failed, functions={"hashfiles": hash_files_fn})

    def _event(self) -> str:
        if self.o.event:
            return self.o.event
        return (
            "workflow_dispatch"
            if "workflow_dispatch" in self.wf.on
            else next(iter(self.wf.on), "push")
        )

    def _inputs(self) -> dict[str, Any]:
        declared = self.wf.inputs()
        unknown = set(self.o.inputs) - set(declared)
        if unknown:
            raise WorkflowError(
                f"unknown inputs {sorted(unknown)}; the workflow has {sorted(declared)}"
            )
        if self._event() != "workflow_dispatch":
            return {}
        values: dict[str, Any] = {}
        for name, spec in declared.items():
            value: Any = self.o.inputs.get(name, (spec or {}).get("default"))
            if (spec or {}).get("type") == "boolean" and isinstance(value, str):
                value = value.lower() == "true"
            values[name] = value
        return values

    def github(self, job: str) -> dict[str, Any]:
        name = self.o.repository.split("/")[-1]
        return {
            "event_name": self.state["event"],
            "sha": self.sha,
            "ref": f"refs/heads/{self.ref_name}",
            "ref_name": self.ref_name,
            "repository": self.o.repository,
            "workspace": f"{WORK}/{name}/{name}",
            "run_id": str(self.state["run_id"]),
            "run_number": "1",
            "job": job,
            "workflow": self.wf.name or workflow_file(self.o),
            "token": "",
            "event": {
                "repository": {"default_branch": self.o.default_branch or self.ref_name},
                "inputs": self.state["inputs"],
            },
        }

    def needs_ctx(self, name: str, job: Job) -> dict[str, Any]:
        ctx = {}
        for need in job.needs:
            if need not in self.state["jobs"]:
                raise WorkflowError(
                    f"job {name} needs {need!r}, which has not run in {self.run_dir}:"
                    " run it first, with the same --run-dir"
                )
            ctx[need] = self.state["jobs"][need]
        return ctx

    # --- jobs ---------------------------------------------------------------------------
    def run(self) -> int:
        order = self.wf.order(self.o.jobs)
        self.preflight(order)
        failed = False
        for name in order:
            failed |= self.run_job(name) == "failure"
        jobs = self.state["jobs"]
        if all(j in jobs for j in self.wf.jobs):
            self.state["conclusion"] = (
                "failure" if any(v["result"] == "failure" for v in jobs.values()) else "success"
            )
        self.save()
        self.write_summary()
        return 1 if failed else 0

    def preflight(self, order: list[str]) -> None:
        """Every `uses:` must have a stand-in, before any container starts."""
        problems = []
        for name in order:
            for step in self.wf.jobs[name].steps:
                if step.uses:
                    try:
                        emulation(step.uses)
                    except ActionError as e:
                        problems.append(f"job {name}: {e}")
            if self.wf.jobs[name].container is not None:
                problems.append(f"job {name}: job containers are not supported by the local runner")
        if problems:
            raise WorkflowError("\n".join(problems))

    def matrices(self, name: str, job: Job, base: dict[str, Any]) -> list[dict[str, Any]]:
        spec = job.strategy.get("matrix")
        if not spec:
            return [{}]
        spec = expr.render(spec, self._ctx(base))
        if not isinstance(spec, dict) or {"include", "exclude"} & set(spec):
            raise WorkflowError(f"job {name}: only a plain matrix of lists is supported")
        keys = list(spec)
        combos = [
            dict(zip(keys, vals, strict=True))
            for vals in itertools.product(*(spec[k] for k in keys))
        ]
        for key, want in self.o.matrix.items():
            combos = [c for c in combos if expr.to_text(c.get(key)) == want]
        if not combos:
            raise WorkflowError(f"job {name}: no matrix combination matches {self.o.matrix}")
        return combos

    def run_job(self, name: str) -> str:
        job = self.wf.jobs[name]
        base = {
            "github": self.github(name),
            "inputs": self.state["inputs"],
            "vars": self.o.vars,
            "secrets": {},
            "needs": self.needs_ctx(name, job),
            "runner": {"os": "Linux", "arch": "X64", "temp": TEMP},
        }
        needs_failed = any(n["result"] != "success" for n in base["needs"].values())
        if not expr.condition(job.if_, self._ctx(base, failed=needs_failed)):
            say(f"job {name}: skipped (its if: is false)")
            self.state["jobs"][name] = {"result": "skipped", "outputs": {}}
            self.records.append(JobRecord(name, {}, result="skipped"))
            return "skipped"
        results = []
        outputs: dict[str, str] = {}
        for combo in self.matrices(name, job, base):
            rec = self.run_one(name, job, {**base, "matrix": combo})
            results.append(rec.result)
            outputs.update(rec.outputs)
        result = "failure" if "failure" in results else "success"
        self.state["jobs"][name] = {"result": result, "outputs": outputs}
        self.save()
        return result

    def run_one(self, name: str, job: Job, ctx: dict[str, Any]) -> JobRecord:
        rec = JobRecord(name, ctx.get("matrix", {}))
        self.records.append(rec)
        label = name + "".join(f" ({k}={expr.to_text(v)})" for k, v in rec.matrix.items())
        wf_env = {k: expr.to_text(v) for k, v in expr.render(self.wf.env, self._ctx(ctx)).items()}
        job_env = {
            k: expr.to_text(v)
            for k, v in expr.render(job.env, self._ctx({**ctx, "env": wf_env})).items()
        }
        env = {**wf_env, **job_env}
        ws = ctx["github"]["workspace"]
        mounts = [Mount(str(self.run_dir.parent), STORE_MOUNT)]
        for step in job.steps:
            if step.uses:
                inputs = expr.render(step.with_, self._ctx({**ctx, "env": env}))
                mounts += emulation(step.uses).mounts(inputs)
        suffix = re.sub(
            r"[^A-Za-z0-9_.-]", "-", "-".join(expr.to_text(v) for v in rec.matrix.values())
        )
        machine = Machine(
            f"clarke-gha-{self.state['run_id']}-{name}" + (f"-{suffix}" if suffix else ""),
            self.o.keep,
        )
        started = time.monotonic()
        say(f"job {label}: a Debian 12 container stands in for {job.runs_on}")
        try:
            machine.start(mounts, self.o.load_images)
            rec.notes += machine.notes
            machine.sh(f"mkdir -p {ws} {TEMP}/_runner_file_commands")
            machine.write("/usr/local/bin/gh", GH_SHIM.read_bytes(), "0755")
            self.steps(rec, job, machine, ctx, env, started)
        finally:
            machine.stop()
        rec.seconds = time.monotonic() - started
        if job.timeout_minutes and rec.seconds > job.timeout_minutes * 60:
            rec.notes.append(
                f"took {rec.seconds / 60:.1f} min, over the job's timeout-minutes"
                f" ({job.timeout_minutes:g}): GitHub would have cancelled it (its runners are"
                " faster than a shared 2-core machine)"
            )
        self.save()
        return rec

    def steps(
        self,
        rec: JobRecord,
        job: Job,
        machine: Machine,
        ctx: dict[str, Any],
        env: dict[str, str],
        started: float,
    ) -> None:
        steps_ctx: dict[str, Any] = {}
        paths: list[str] = []
        ws = ctx["github"]["workspace"]
        for n, step in enumerate(job.steps, 1):
            failed = rec.result == "failure"
            sctx = {
                **ctx,
                "env": env,
                "steps": steps_ctx,
                "job": {"status": "failure" if failed else "success"},
            }
            title = expr.to_text(expr.render(step.title(), self._ctx(sctx)))
            if not expr.condition(step.if_, self._ctx(sctx, failed=failed)):
                rec.steps.append(
                    StepRecord(title, "not run", "skipped", 0.0, f"if: {step.if_ or 'success()'}")
                )
                continue
            t0 = time.monotonic()
            step_env = {
                k: expr.to_text(v) for k, v in expr.render(step.env, self._ctx(sctx)).items()
            }
            say(f"{rec.job} step {n}: {title}")
            if step.uses:
                io = StepIO(
                    machine,
                    expr.render(step.with_, self._ctx({**sctx, "env": {**env, **step_env}})),
                    ws,
                    self.info,
                )
                out: Outcome = emulation(step.uses).run(io)
                handling, result, note = out.handling, out.result, f"{step.uses}: {out.note}"
                env.update(out.env)
                paths[:0] = out.path
                outputs = out.outputs
                print(f"    {handling}: {note}", flush=True)
            else:
                result, outputs = self.run_script(
                    rec, n, step, machine, sctx, ScriptEnvironment({**env, **step_env}, paths, env)
                )
                handling, note = "ran", ""
            if step.id:
                steps_ctx[step.id] = {"outputs": outputs, "outcome": result, "conclusion": result}
            if result == "failure" and not step.continue_on_error:
                rec.result = "failure"
            rec.steps.append(StepRecord(title, handling, result, time.monotonic() - t0, note))
        rec.outputs = {
            k: expr.to_text(expr.render(v, self._ctx({**ctx, "env": env, "steps": steps_ctx})))
            for k, v in job.outputs.items()
        }

    def run_script(
        self,
        rec: JobRecord,
        n: int,
        step: Step,
        machine: Machine,
        sctx: dict[str, Any],
        environment: ScriptEnvironment,
    ) -> tuple[str, dict[str, str]]:
        env, paths, job_env = environment.env, environment.paths, environment.job_env
        script = expr.to_text(expr.render(step.run or "", self._ctx(sctx)))
        files = {
            k: f"{TEMP}/_runner_file_commands/{k}_{n}"
            for k in ("set_output", "set_env", "add_path", "step_summary")
        }
        machine.write(f"{TEMP}/step_{n}.sh", script.encode())
        machine.sh("touch " + " ".join(files.values()))
        gh = sctx["github"]
        full = {
            "HOME": "/root",
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKFLOW": gh["workflow"],
            "GITHUB_RUN_ID": gh["run_id"],
            "GITHUB_RUN_NUMBER": "1",
            "GITHUB_JOB": gh["job"],
            "GITHUB_SHA": gh["sha"],
            "GITHUB_REF": gh["ref"],
            "GITHUB_REF_NAME": gh["ref_name"],
            "GITHUB_REPOSITORY": gh["repository"],
            "GITHUB_EVENT_NAME": gh["event_name"],
            "GITHUB_WORKSPACE": gh["workspace"],
            "RUNNER_OS": "Linux",
            "RUNNER_ARCH": "X64",
            "RUNNER_TEMP": TEMP,
            "GITHUB_OUTPUT": files["set_output"],
            "GITHUB_ENV": files["set_env"],
            "GITHUB_PATH": files["add_path"],
            "GITHUB_STEP_SUMMARY": files["step_summary"],
            **env,
            "PATH": ":".join([*paths, BASE_PATH]),
        }
        cwd = step.working_directory or gh["workspace"]
        argv = ["docker", "exec", "-i", "-w", cwd]
        for k, v in full.items():
            argv += ["-e", f"{k}={v}"]
        argv += [
            machine.name,
            "bash",
            "--noprofile",
            "--norc",
            "-eo",
            "pipefail",
            f"{TEMP}/step_{n}.sh",
        ]
        log = self.run_dir / "logs" / rec.job / f"{n:02d}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as f:
            f.write(f"$ {shlex.join(['bash', '-eo', 'pipefail'])} <<'EOF'\n{script}\nEOF\n")
            proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                f.write(line)
                sys.stdout.write("    " + line)
                if line.startswith(("::error", "::warning")):
                    rec.annotations.append(line.strip())
            code = proc.wait()
            f.write(f"# exit {code}\n")
        sys.stdout.flush()
        outputs = parse_file_command(machine.read(files["set_output"]))
        job_env.update(parse_file_command(machine.read(files["set_env"])))
        added = [p for p in machine.read(files["add_path"]).splitlines() if p.strip()]
        paths[:0] = list(reversed(added))
        summary = machine.read(files["step_summary"])
        if summary.strip():
            with (self.run_dir / f"step-summary-{rec.job}.md").open("a") as f:
                f.write(summary)
        if code != 0:
            print(f"    exit {code} (log: {log})", flush=True)
        return ("success" if code == 0 else "failure"), outputs

    # --- records ------------------------------------------------------------------------
    def save(self) -> None:
        recs = {f"{r.job}{json.dumps(r.matrix, sort_keys=True)}": asdict(r) for r in self.records}
        old = {
            f"{r['job']}{json.dumps(r['matrix'], sort_keys=True)}": r
            for r in self.state.get("records", [])
        }
        self.state["records"] = list({**old, **recs}.values())
        tmp = self.run_dir / "state.json.tmp"
        tmp.write_text(json.dumps(self.state, indent=2))
        os.replace(tmp, self.run_dir / "state.json")

    def write_summary(self) -> None:
        lines = [
            f"# Local run of {workflow_file(self.o)}"
            f" (commit {self.sha[:12]}, event {self.state['event']})",
            "",
            "Each job ran in a Debian 12 container (debian:bookworm-slim + runner tools)",
            "standing in for GitHub's hosted runner; `uses:` steps emulated or skipped as noted.",
            "",
        ]
        for r in self.state["records"]:
            matrix = ", ".join(f"{k}={expr.to_text(v)}" for k, v in r["matrix"].items())
            title = f"{r['job']} ({matrix})" if matrix else r["job"]
            lines += [
                f"## {title}: {r['result']} in {r['seconds']:.0f} s",
                "",
            ]
            lines += [f"- {n}" for n in r["notes"] + r["annotations"]]
            lines += ["", "| step | how | result | s | note |", "|---|---|---|---:|---|"]
            for s in r["steps"]:
                note = s["note"].replace("|", "\\|")
                cells = [s["name"], s["handling"], s["result"], f"{s['seconds']:.0f}", note]
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
        text = "\n".join(lines)
        (self.run_dir / "summary.md").write_text(text)
        print(text)
        print(f"(run directory: {self.run_dir})")


def workflow_file(opts: Options) -> str:
    return opts.workflow_path.name
