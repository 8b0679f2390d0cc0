"""GitHub Actions expressions (`${{ ... }}`), the part of the language Clarke's workflows
use, evaluated as GitHub documents them: contexts and property access (a missing
property is null), literals, `!`, `==`, `!=`, `<`, `<=`, `>`, `>=`, `&&` and `||` (which
return an operand, not a boolean), loose equality (strings compare case-insensitively,
other mixed types as numbers), and the functions always, success, failure, cancelled,
fromJSON, toJSON, contains, startsWith, endsWith, format and join, plus functions a
Context brings (the runner's hashFiles). Anything else (object filters, say) raises
ExprError naming the expression, so a workflow the local runner does not understand
fails loudly instead of running with a wrong value."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

STATUS_FUNCTIONS = ("always", "success", "failure", "cancelled")
_EMBEDDED = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?))
    | (?P<str>'(?:[^']|'')*')
    | (?P<op>&&|\|\||==|!=|<=|>=|[<>!()\[\],.*])
    | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
    )""",
    re.VERBOSE,
)


class ExprError(ValueError):
    """An expression the local runner cannot evaluate (syntax, or an unsupported part)."""


@dataclass
class Context:
    """The contexts (github, env, inputs, matrix, needs, steps, ...) and the job status
    the status functions read."""

    values: Mapping[str, Any]
    failed: bool = False
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExprError(f"cannot read the expression at {text[pos:]!r} in {text!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _num(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        s = value.strip()
        if s == "":
            return 0.0
        try:
            return float(int(s, 16)) if s.lower().startswith("0x") else float(s)
        except ValueError:
            return math.nan
    return math.nan


def truthy(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0 and not math.isnan(value)
    return value != ""


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    if type(a) is type(b) and not isinstance(a, int | float | bool | str):
        return a is b or a == b
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return _num(a) == _num(b)


def to_text(value: Any) -> str:
    """The string GitHub puts into a template for a value."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, indent=2)
    return str(value)


_COMPARISONS = ("<", "<=", ">", ">=")


def _compare(op: str, a: Any, b: Any) -> bool:
    """GitHub's ordering: strings case-insensitively, anything else as numbers."""
    if isinstance(a, str) and isinstance(b, str):
        x: Any = a.casefold()
        y: Any = b.casefold()
    else:
        x, y = _num(a), _num(b)
    return bool({"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op])


class _Parser:
    def __init__(self, text: str, ctx: Context) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.ctx = ctx

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise ExprError(f"expected {value or 'more'} in {self.text!r}")
        self.i += 1
        return tok

    def parse(self) -> Any:
        value = self.or_()
        rest = self.peek()
        if rest is not None:
            raise ExprError(f"unexpected {rest[1]!r} in {self.text!r}")
        return value

    def _operators(
        self, operand: Callable[[], Any], ops: Mapping[str, Callable[[Any, Any], Any]]
    ) -> Any:
        """Operands joined by any of `ops`, left to right (every operand is parsed: the
        operators choose between values, they do not skip parsing)."""
        value = operand()
        while (tok := self.peek()) is not None and tok[0] == "op" and tok[1] in ops:
            self.take()
            value = ops[tok[1]](value, operand())
        return value

    def or_(self) -> Any:
        return self._operators(self.and_, {"||": lambda a, b: a if truthy(a) else b})

    def and_(self) -> Any:
        return self._operators(self.eq, {"&&": lambda a, b: b if truthy(a) else a})

    def eq(self) -> Any:
        return self._operators(self.cmp, {"==": _equal, "!=": lambda a, b: not _equal(a, b)})

    def cmp(self) -> Any:
        return self._operators(self.unary, {op: partial(_compare, op) for op in _COMPARISONS})

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            return not truthy(self.unary())
        return self.postfix(self.primary())

    def primary(self) -> Any:
        kind, text = self.take()
        if kind == "num":
            n = float(int(text, 16)) if text.lower().startswith(("0x", "-0x")) else float(text)
            return n
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if (kind, text) == ("op", "("):
            value = self.or_()
            self.take(")")
            return value
        if kind != "name":
            raise ExprError(f"unexpected {text!r} in {self.text!r}")
        if text in ("true", "false"):
            return text == "true"
        if text == "null":
            return None
        if self.peek() == ("op", "("):
            self.take()
            args: list[Any] = []
            if self.peek() != ("op", ")"):
                args.append(self.or_())
                while self.peek() == ("op", ","):
                    self.take()
                    args.append(self.or_())
            self.take(")")
            return self.call(text, args)
        return self.ctx.values.get(text)

    def postfix(self, value: Any) -> Any:
        while self.peek() in (("op", "."), ("op", "[")):
            if self.take()[1] == ".":
                kind, name = self.take()
                if kind != "name":
                    raise ExprError(f"object filters ({name!r}) are not supported: {self.text!r}")
                value = _get(value, name)
            else:
                key = self.or_()
                self.take("]")
                value = _get(value, key)
        return value

    def call(self, name: str, args: list[Any]) -> Any:
        fname = name.lower()
        if fname in self.ctx.functions:
            return self.ctx.functions[fname](*args)
        if fname == "always":
            return True
        if fname == "success":
            return not self.ctx.failed
        if fname == "failure":
            return self.ctx.failed
        if fname == "cancelled":
            return False
        if fname == "fromjson":
            return json.loads(args[0])
        if fname == "tojson":
            return json.dumps(args[0], indent=2)
        if fname == "contains":
            hay, needle = args
            if isinstance(hay, list):
                return any(_equal(x, needle) for x in hay)
            return to_text(needle).casefold() in to_text(hay).casefold()
        if fname == "startswith":
            return to_text(args[0]).casefold().startswith(to_text(args[1]).casefold())
        if fname == "endswith":
            return to_text(args[0]).casefold().endswith(to_text(args[1]).casefold())
        if fname == "format":
            out = to_text(args[0])
            for i, arg in enumerate(args[1:]):
                out = out.replace("{" + str(i) + "}", to_text(arg))
            return out
        if fname == "join":
            sep = to_text(args[1]) if len(args) > 1 else ","
            return sep.join(to_text(x) for x in args[0]) if isinstance(args[0], list) else args[0]
        raise ExprError(f"{name}() is not supported by the local runner: {self.text!r}")


def _get(value: Any, key: Any) -> Any:
    if isinstance(value, Mapping):
        if key in value:
            return value[key]
        if isinstance(key, str):  # context property names are case-insensitive
            for k, v in value.items():
                if isinstance(k, str) and k.casefold() == key.casefold():
                    return v
        return None
    if isinstance(value, list) and not isinstance(key, str):
        i = int(_num(key))
        return value[i] if 0 <= i < len(value) else None
    return None


def evaluate(text: str, ctx: Context) -> Any:
    """Evaluate one expression (the text between `${{` and `}}`)."""
    return _Parser(text, ctx).parse()


def render(value: Any, ctx: Context) -> Any:
    """A workflow value with its `${{ }}` parts evaluated: a string that is exactly one
    expression gives the expression's value (e.g. a list for a matrix), any other string
    the text with each expression substituted; lists and mappings are rendered item by
    item."""
    if isinstance(value, str):
        whole = _EMBEDDED.fullmatch(value.strip())
        if whole and value.count("${{") == 1:
            return evaluate(whole.group(1), ctx)
        return _EMBEDDED.sub(lambda m: to_text(evaluate(m.group(1), ctx)), value)
    if isinstance(value, list):
        return [render(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: render(v, ctx) for k, v in value.items()}
    return value


def condition(text: str | bool | None, ctx: Context) -> bool:
    """An `if:` condition. Without a status function GitHub runs the step or job only
    when nothing before it failed (an implicit `success() &&`)."""
    if text is None:
        return not ctx.failed
    if isinstance(text, bool):
        return text and not ctx.failed
    inner = text.strip()
    m = _EMBEDDED.fullmatch(inner)
    if m:
        inner = m.group(1)
    has_status = any(re.search(rf"\b{f}\s*\(", inner, re.IGNORECASE) for f in STATUS_FUNCTIONS)
    if not has_status and ctx.failed:
        return False
    return truthy(evaluate(inner, ctx))
