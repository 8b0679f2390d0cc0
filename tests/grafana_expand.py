"""Grafana's expansion of provisioning values and its interpolation of dashboard queries,
as its sources define them (read, not run: no Grafana can be had here), for tests of the
files Grafana reads.

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
from typing import Any

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


# Grafana's escapeRegex (public/app/core/utils/kbn and the InfluxDB datasource): the
# characters it escapes in a variable's value inside a /regex/.
_REGEX_SPECIAL = re.compile(r"[\\^$*+?.()|[\]{}/]")


def variable_value(var: dict[str, object], value: str) -> str:
    """A template variable as the InfluxDB datasource interpolates it: "All" is the
    variable's allValue as it is; a chosen value of a multi or include-all variable is
    regex-escaped; any other variable's value goes in unchanged."""
    if value == "$__all":
        return str(var["allValue"])
    if var.get("multi") or var.get("includeAll"):
        return _REGEX_SPECIAL.sub(lambda m: "\\" + m.group(), value)
    return value


def dashboard_query(
    query: str, values: dict[str, str], board: dict[str, Any], window: tuple[int, int]
) -> str:
    """The query Grafana's InfluxQL backend runs: $timeFilter as `time >= Fms and time
    <= Tms` over the dashboard's time range, $__interval / $interval / $__interval_ms
    from the range over Grafana's 1000 data points (at least 1 ms), then the dashboard's
    variables (the longest names first, as $name and ${name})."""
    start_ms, end_ms = window
    interval_ms = max(1, (end_ms - start_ms) // 1000)
    query = query.replace("$timeFilter", f"time >= {start_ms}ms and time <= {end_ms}ms")
    query = query.replace("$__interval_ms", str(interval_ms))
    for macro in ("$__interval", "$interval"):
        query = query.replace(macro, f"{interval_ms}ms")
    variables = {v["name"]: v for v in board["templating"]["list"]}
    for name in sorted(variables, key=len, reverse=True):
        if name in values:
            value = variable_value(variables[name], values[name])
            query = query.replace("${" + name + "}", value).replace("$" + name, value)
    assert "$" not in query.replace("$/", ""), f"left unsubstituted: {query}"
    return query
