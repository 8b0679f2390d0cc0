"""The two steps every engine runs, and the renderer that writes the engines' files.

The shard step (templates/shard-step.sh) runs `clarke run --shard $SHARD/$SHARDS` with
the campaign id, into $RESULTS, resuming the shard's directory when a first attempt made
it; the merge step (templates/merge-step.sh) runs `clarke results merge
--require-complete` and `clarke report`. An engine's file only sets the variables the
steps read (CAMPAIGN_FILE, CAMPAIGN_ID, SHARDS, RESULTS, SHARD) and says how the engine
numbers its tasks, so the engines cannot drift apart.

Templates hold `{{ name }}` placeholders. A placeholder alone on its line takes a
multi-line value indented as the placeholder is (a script inside a YAML block scalar),
and an empty value removes that line. Every placeholder must be given a value and every
value must be used: a mistake is a bug, not a half-written script."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from clarke.submit.model import Submission

TEMPLATES = Path(__file__).resolve().parent / "templates"
PLACEHOLDER = re.compile(r"\{\{ ([a-z_]+) \}\}")
_ALONE = re.compile(r"^([ \t]*)\{\{ ([a-z_]+) \}\}[ \t]*$")


def template(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def render(text: str, values: Mapping[str, str]) -> str:
    """`text` with its placeholders filled (see the module's docstring)."""
    used = set(PLACEHOLDER.findall(text))
    missing, unused = used - values.keys(), values.keys() - used
    if missing or unused:
        raise ValueError(
            f"template placeholders without a value: {sorted(missing)}; values without a "
            f"placeholder: {sorted(unused)}"
        )
    lines = []
    for line in text.splitlines():
        alone = _ALONE.fullmatch(line)
        if alone:
            indent, value = alone.group(1), values[alone.group(2)]
            if value:
                lines += [indent + v if v else "" for v in value.splitlines()]
            continue
        lines.append(PLACEHOLDER.sub(lambda m: values[m.group(1)], line))
    return "\n".join(lines) + "\n"


def quote(value: str | Path) -> str:
    """A shell word."""
    return shlex.quote(str(value))


def shard_step(sub: Submission) -> str:
    """The shard step with this submission's `clarke run` options."""
    options = "".join(" " + quote(a) for a in sub.run.argv())
    return render(template("shard-step.sh"), {"run_options": options}).rstrip("\n")


def merge_step() -> str:
    return template("merge-step.sh").rstrip("\n")
