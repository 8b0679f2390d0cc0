"""Every protocol, browser, engine, congestion control, queue discipline and PEP name is
written once: in clarke.vocab (or, for a role's implementation, in the module that
declares it), and read from there everywhere else. A string literal equal to one of
those names anywhere else in the runner fails this test."""

from __future__ import annotations

import ast
from pathlib import Path

from clarke import registry
from clarke.vocab import (
    BROWSERS,
    CONGESTION_CONTROLS,
    ENGINES,
    Browser,
    CongestionControl,
    HttpVersion,
    QueueDiscipline,
)

RUNNER = Path(__file__).resolve().parents[2] / "runner" / "clarke"
NAMES = (
    set(BROWSERS)
    | set(CONGESTION_CONTROLS)
    | set(ENGINES)
    | {CongestionControl.reno.quic}
    | {v.tag for v in HttpVersion}
    | {v.next_hop_protocol for v in HttpVersion}
    | {d.value for d in QueueDiscipline}
    | set(registry.names("pep"))
)
# (module, literal): where such a string is not the vocabulary's value but happens to be
# spelt alike, or is a declaration itself.
ALLOWED = {
    ("vocab.py", None): "the declarations",
    # A browser's executable names, which Debian and Mozilla spell like the browser.
    ("browser/firefox.py", Browser.firefox.value): "executable names",
    ("browser/chromium.py", Browser.chromium.value): "executable names",
    # A request field that names the --firefox start-up option (refused in requests).
    ("browser/load.py", Browser.firefox.value): "the --firefox option's field",
    ("cli/serve.py", Browser.firefox.value): "the --firefox option's field",
    # A PEP implementation's module declares its name, and runs its binary of that name.
    ("pep/splittcp.py", "splittcp"): "its own declaration and binary",
    ("pep/pepsal.py", "pepsal"): "its own declaration and binary",
    # satlink's drop causes (its event log): CoDel's drops are named like the discipline.
    ("run/session/timeline.py", QueueDiscipline.codel.value): "satlink's drop cause",
}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            out.add(id(first.value))
    return out


def test_no_vocabulary_name_is_written_outside_its_declaration() -> None:
    found = []
    for path in sorted(RUNNER.rglob("*.py")):
        rel = str(path.relative_to(RUNNER))
        if (rel, None) in ALLOWED:
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in NAMES
                and id(node) not in docs
                and (rel, node.value) not in ALLOWED
            ):
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not found, "use the declared value (clarke.vocab) instead:\n" + "\n".join(found)
