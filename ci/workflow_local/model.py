"""A GitHub Actions workflow file, read into typed models: the parts the local runner
acts on. Keys it does not act on (concurrency, permissions, timeouts, defaults of
inputs) are kept as they are and reported, never silently misread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class WorkflowError(ValueError):
    """A workflow file the local runner cannot read or run (file and key in the message)."""


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str | None = None
    name: str | None = None
    uses: str | None = None
    run: str | None = None
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    env: dict[str, Any] = Field(default_factory=dict)
    if_: str | bool | None = Field(default=None, alias="if")
    shell: str | None = None
    continue_on_error: bool = Field(default=False, alias="continue-on-error")
    working_directory: str | None = Field(default=None, alias="working-directory")
    timeout_minutes: float | None = Field(default=None, alias="timeout-minutes")

    @field_validator("shell")
    @classmethod
    def _bash_only(cls, v: str | None) -> str | None:
        if v not in (None, "bash"):
            raise ValueError(f"shell {v!r}: the local runner runs bash steps only")
        return v

    def title(self) -> str:
        if self.name:
            return self.name
        if self.uses:
            return self.uses
        first = (self.run or "").strip().splitlines()
        return f"Run {first[0]}" if first else "Run"


class Container(BaseModel):
    model_config = ConfigDict(extra="forbid")

    image: str
    options: str = ""
    volumes: list[str] = Field(default_factory=list)
    env: dict[str, Any] = Field(default_factory=dict)


class Job(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str | None = None
    runs_on: str | list[str] = Field(alias="runs-on")
    needs: list[str] = Field(default_factory=list)
    if_: str | bool | None = Field(default=None, alias="if")
    env: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, str] = Field(default_factory=dict)
    strategy: dict[str, Any] = Field(default_factory=dict)
    container: Container | None = None
    services: dict[str, Any] | None = None
    timeout_minutes: float | None = Field(default=None, alias="timeout-minutes")
    steps: list[Step]

    @field_validator("needs", mode="before")
    @classmethod
    def _needs_list(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("container", mode="before")
    @classmethod
    def _container_image(cls, v: Any) -> Any:
        return {"image": v} if isinstance(v, str) else v

    @field_validator("services")
    @classmethod
    def _no_services(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v:
            raise ValueError("service containers are not supported by the local runner")
        return v


class Workflow(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str | None = None
    on: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    jobs: dict[str, Job]

    def inputs(self) -> dict[str, Any]:
        dispatch = self.on.get("workflow_dispatch") or {}
        return dict(dispatch.get("inputs") or {})

    def order(self, wanted: list[str]) -> list[str]:
        """The jobs to run: the ones asked for (all when none), each after its needs."""
        for job in wanted:
            if job not in self.jobs:
                raise WorkflowError(f"no job {job!r}; the jobs are: {', '.join(self.jobs)}")
        done: list[str] = []

        def visit(name: str, stack: tuple[str, ...]) -> None:
            if name in done:
                return
            if name in stack:
                raise WorkflowError(f"jobs need each other in a cycle: {' -> '.join(stack)}")
            for need in self.jobs[name].needs:
                if need not in self.jobs:
                    raise WorkflowError(f"job {name!r} needs {need!r}, which does not exist")
                visit(need, (*stack, name))
            done.append(name)

        for name in self.jobs:
            visit(name, ())
        return [j for j in done if not wanted or j in wanted]


def load(path: Path) -> Workflow:
    """Read and check a workflow file; a bad file gives a WorkflowError, not a traceback."""
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as e:
        raise WorkflowError(f"{path}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise WorkflowError(f"{path}: not YAML: {e}") from e
    if not isinstance(raw, dict):
        raise WorkflowError(f"{path}: expected a mapping at the top")
    if True in raw:  # YAML 1.1 reads the key `on` as true
        raw["on"] = raw.pop(True)
    if isinstance(raw.get("on"), str | list):
        events = [raw["on"]] if isinstance(raw["on"], str) else raw["on"]
        raw["on"] = {e: None for e in events}
    raw["on"] = {k: (v or {}) for k, v in (raw.get("on") or {}).items()}
    try:
        return Workflow.model_validate(raw)
    except ValidationError as e:
        lines = [
            f"{path}: {'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
        ]
        raise WorkflowError("\n".join(lines)) from None
