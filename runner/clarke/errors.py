"""Clarke's exceptions. `clarke.cli.main` catches `ClarkeError`, prints `Kind: message`
and exits with the error's exit code; anything else is a bug and shows a traceback.

    ClarkeError                 exit 1
    ├── InputError              exit 2: a file or an argument is malformed
    │   ├── ValidationFailed    a YAML/JSON file does not match its schema
    │   └── UnknownName         a page model, profile, size … that does not exist
    ├── EnvironmentProblem      exit 3: missing tool, not root, no /dev/net/tun …
    ├── CommandFailed           exit 1: an external command returned non-zero
    └── SinkError               exit 1: a results sink (InfluxDB) could not be written
"""

from __future__ import annotations


class ClarkeError(Exception):
    exit_code = 1
    kind = "Error"


class InputError(ClarkeError):
    exit_code = 2
    kind = "Invalid input"


class ValidationFailed(InputError):
    """One file, one or more problems, each naming the field path."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {source}: {p}" for p in problems)
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"{source}: {len(problems)} {noun}\n{lines}")


class UnknownName(InputError):
    def __init__(self, what: str, name: str, allowed: list[str]) -> None:
        self.what, self.name, self.allowed = what, name, allowed
        super().__init__(f"unknown {what} {name!r}; allowed: {', '.join(allowed) or '(none)'}")


class EnvironmentProblem(ClarkeError):
    exit_code = 3
    kind = "Environment"


class CommandFailed(ClarkeError):
    kind = "Command failed"


class SinkError(ClarkeError):
    kind = "Results sink"
