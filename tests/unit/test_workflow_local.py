"""ci/run-workflow-locally's parts that need no container: GitHub's expression language
as the workflows use it, file commands, the workflow model, and that every `uses:` in
Clarke's workflows has a local stand-in (so a new action cannot be silently ignored)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workflow_local import actions, expr
from workflow_local.model import WorkflowError, load
from workflow_local.runner import parse_file_command

WORKFLOWS = sorted(Path(".github/workflows").glob("*.yml"))


def ev(text: str, failed: bool = False, **values: Any) -> Any:
    return expr.evaluate(text, expr.Context(values, failed=failed))


def test_or_returns_the_first_truthy_operand_as_github_does() -> None:
    assert ev("inputs.campaign || 'nightly'", inputs={}) == "nightly"  # schedule: no inputs
    assert ev("inputs.campaign || 'nightly'", inputs={"campaign": "smoke"}) == "smoke"
    assert ev("inputs.shards || '2'", inputs={"shards": ""}) == "2"
    assert ev("a && b", a="x", b="") == ""
    assert ev("a && b", a=0, b="y") == 0


def test_equality_is_loose_and_case_insensitive() -> None:
    assert ev("needs.plan.result == 'success'", needs={"plan": {"result": "Success"}}) is True
    assert ev("x == 1", x="1") is True
    assert ev("x != 1", x="2") is True
    assert ev("missing.deep.property == ''", missing=None) is True  # null == '' (both 0)
    assert ev("!x", x=None) is True
    assert ev("2 > 10") is False and ev("'b' > 'A'") is True


def test_functions() -> None:
    assert ev("fromJSON(s)", s="[1, 2]") == [1, 2]
    assert ev("contains(fromJSON('[\"a\",\"b\"]'), 'B')") is True
    assert ev("startsWith(github.ref, 'refs/heads/')", github={"ref": "refs/heads/main"})
    assert ev("format('{0}-{1}', 'a', 1)") == "a-1"
    assert ev("always() && false") is False
    assert ev("failure()", failed=True) is True and ev("success()", failed=True) is False
    with pytest.raises(expr.ExprError, match="hashFiles"):
        ev("hashFiles('**/Cargo.lock')")
    with pytest.raises(expr.ExprError):
        ev("github.event.*.name", github={})


def test_render_keeps_a_whole_expression_typed_and_interpolates_text() -> None:
    ctx = expr.Context(
        {"matrix": {"shard": 1}, "inputs": {}, "needs": {"p": {"outputs": {"s": "[1,2]"}}}}
    )
    assert expr.render("${{ fromJSON(needs.p.outputs.s) }}", ctx) == [1, 2]
    assert expr.render("${{ matrix.shard }}/${{ inputs.shards || '2' }}", ctx) == "1/2"
    assert expr.render({"a": ["x-${{ matrix.shard }}"]}, ctx) == {"a": ["x-1"]}
    assert expr.render("${{ inputs.none }}", ctx) is None and expr.to_text(None) == ""


def test_conditions_add_an_implicit_success() -> None:
    ok, bad = expr.Context({}), expr.Context({}, failed=True)
    assert expr.condition(None, ok) and not expr.condition(None, bad)
    assert expr.condition("always()", bad)
    assert not expr.condition("${{ true }}", bad)  # no status function: success() && true
    assert expr.condition("${{ always() && true }}", bad)


def test_file_commands() -> None:
    text = "a=1\nshards=[1,2]\nbody<<EOF\nline one\nline=two\nEOF\nempty=\n"
    assert parse_file_command(text) == {
        "a": "1",
        "shards": "[1,2]",
        "body": "line one\nline=two",
        "empty": "",
    }


def test_every_action_of_every_workflow_has_a_local_stand_in() -> None:
    assert WORKFLOWS, "no workflows found"
    seen = set()
    for path in WORKFLOWS:
        for job in load(path).jobs.values():
            for step in job.steps:
                if step.uses:
                    actions.emulation(step.uses)  # raises ActionError if there is none
                    seen.add(step.uses.partition("@")[0])
    assert {"actions/checkout", "actions/upload-artifact", "actions/setup-go"} <= seen


def test_an_unknown_action_is_refused_before_anything_runs() -> None:
    with pytest.raises(actions.ActionError, match="no local stand-in"):
        actions.emulation("someone/something@v1")
    with pytest.raises(actions.ActionError, match="no version"):
        actions.emulation("actions/checkout")


def test_a_toolchain_of_another_version_is_refused() -> None:
    with pytest.raises(actions.ActionError, match="must pin the version this host has"):
        actions._same("actions/setup-go", "go-version", "1.99.0", "1.26.8")


def test_jobs_run_after_what_they_need(tmp_path: Path) -> None:
    nightly = load(Path(".github/workflows/nightly.yml"))
    assert nightly.order([]) == ["plan", "shard", "merge", "update-baseline"]
    assert nightly.order(["merge"]) == ["merge"]
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: true\n        shell: sh\n"
    )
    with pytest.raises(WorkflowError, match="bash steps only"):
        load(bad)
    with pytest.raises(WorkflowError, match="no job 'nope'"):
        nightly.order(["nope"])


def test_hash_files_as_github_computes_it(tmp_path: Path) -> None:
    """SHA-256 over each matching file's SHA-256 digest, in path order, of the commit's
    tree (not the work tree); empty when nothing matches; exclusions refused."""
    import hashlib
    import subprocess

    from workflow_local.hashfiles import hash_files

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    git("init", "-q")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "Cargo.lock").write_text("one")
    (tmp_path / "Cargo.lock").write_text("two")
    (tmp_path / "setup.sh").write_text("three")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    (tmp_path / "Cargo.lock").write_text("changed after the commit")
    sha = git("rev-parse", "HEAD")

    def expected(*contents: bytes) -> str:
        outer = hashlib.sha256()
        for c in contents:
            outer.update(hashlib.sha256(c).digest())
        return outer.hexdigest()

    assert hash_files(tmp_path, sha, "**/Cargo.lock") == expected(b"two", b"one")
    assert hash_files(tmp_path, sha, "**/Cargo.lock", "setup.sh") == expected(
        b"two", b"one", b"three"
    )
    assert hash_files(tmp_path, sha, "*.toml") == ""
    with pytest.raises(expr.ExprError, match="exclusion"):
        hash_files(tmp_path, sha, "!a/**")
