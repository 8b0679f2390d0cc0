"""Grafana's expansion of provisioning values, as its sources define it (read, not run:
no Grafana can be had here), for tests of the files Grafana reads.

pkg/services/provisioning/values/values.go (interpolateValue): the value is split on
"$$" (a literal "$"); each part goes through setting.ExpandVar, then Go's os.ExpandEnv;
the parts are joined with "$". pkg/setting/expanders.go (ExpandVar): every match of
`\\$(|__\\w+){([^}]+)}` whose prefix is `__env` or empty is replaced by the environment
variable of that name (the whole text between the braces is the name), `__file` by the
file's contents with surrounding white space trimmed; expanders run env (-10), then file
(-5). os.ExpandEnv takes `${NAME}` (all up to `}`) or `$NAME` (letters, digits, `_`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

_EXPANDER = re.compile(r"\$(|__\w+)\{([^}]+)\}")
_SPECIAL = set("*#$@!?-0123456789")


def _go_expand(text: str, lookup: Callable[[str], str]) -> str:
    """Go's os.Expand: `$` then `{name}` or a name; a bad `${` drops the `$`."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
            continue
        rest = text[i + 1 :]
        if rest[0] == "{":
            if len(rest) > 2 and rest[1] in _SPECIAL and rest[2] == "}":
                out.append(lookup(rest[1]))
                i += 4
                continue
            end = rest.find("}")
            if end <= 1:  # "${}" or no closing brace: bad syntax, Go drops "${"
                i += 2
                continue
            out.append(lookup(rest[1:end]))
            i += end + 2
            continue
        if rest[0] in _SPECIAL:
            out.append(lookup(rest[0]))
            i += 2
            continue
        m = re.match(r"[A-Za-z0-9_]+", rest)
        if m is None:  # "$" before anything else stays as it is
            out.append("$")
            i += 1
            continue
        out.append(lookup(m.group()))
        i += 1 + m.end()
    return "".join(out)


def expand(value: str, env: Mapping[str, str], read_file: Callable[[str], str]) -> str:
    """One provisioning value as Grafana reads it, with `env` as its environment."""

    def lookup(name: str) -> str:
        return env.get(name, "")

    def expand_var(part: str) -> str:
        def file_contents(path: str) -> str:
            return read_file(path).strip()

        for prefix, replace in (("__env", lookup), ("__file", file_contents)):
            for m in list(_EXPANDER.finditer(part)):
                if m.group(1) == prefix or (m.group(1) == "" and prefix == "__env"):
                    part = part.replace(m.group(0), replace(m.group(2)), 1)
        return part

    return "$".join(_go_expand(expand_var(p), lookup) for p in value.split("$$"))


def expand_tree(node: object, env: Mapping[str, str], read_file: Callable[[str], str]) -> object:
    """Every string in a parsed provisioning file, expanded."""
    if isinstance(node, str):
        return expand(node, env, read_file)
    if isinstance(node, list):
        return [expand_tree(v, env, read_file) for v in node]
    if isinstance(node, dict):
        return {k: expand_tree(v, env, read_file) for k, v in node.items()}
    return node
