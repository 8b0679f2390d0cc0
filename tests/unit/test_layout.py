"""The runner's shape: no module over 600 lines (STYLE.md: split by role); the tests' names."""

from __future__ import annotations

from pathlib import Path

RUNNER = Path(__file__).resolve().parents[2] / "runner" / "clarke"
LIMIT = 600


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(RUNNER)): n
        for p in RUNNER.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > LIMIT
    }
    assert not long, f"split these modules (over {LIMIT} lines): {long}"


def test_no_two_test_modules_share_a_name() -> None:
    """pytest imports tests/ without packages (rootdir-relative basenames): two modules of
    one name stop the whole collection, which `make check` (unit tests only) would not
    show."""
    tests = Path(__file__).resolve().parents[1]
    seen: dict[str, list[str]] = {}
    for p in tests.rglob("test_*.py"):
        seen.setdefault(p.name, []).append(str(p.relative_to(tests)))
    assert not {n: ps for n, ps in seen.items() if len(ps) > 1}


def test_the_layers_in_the_docs_are_the_contracts_layers() -> None:
    """docs/architecture.md's layer table has one row per layer of the import-linter
    contract, in order, naming the same modules; and every module of the package is in
    a layer, so that none escapes the contract."""
    import re
    import tomllib

    root = RUNNER.parents[1]
    contracts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = contracts["contracts"][0]["layers"]
    contract = [sorted(re.split(r"\s*[|:]\s*", layer)) for layer in layers]
    doc = (root / "docs" / "architecture.md").read_text()
    table = doc.split("| layer | packages (runner/clarke/) | what |")[1].split("\n\n")[0]
    rows = [r for r in table.strip().splitlines()[1:] if r.startswith("|")]
    packages = [re.split(r"(?<!\\)\|", r)[2] for r in rows]  # the second column
    named = [
        sorted({m.removesuffix(".py").rstrip("/") for m in re.findall(r"`([a-z_*]+[./]\w*)`", c)})
        for c in packages
    ]
    cli = [m for m in contract[0] if m.startswith("cli")]
    assert named[0] == ["cli"] and contract[0] == cli
    assert named[1:] == contract[1:]
    listed = {m for layer in contract for m in layer}
    top = {p.stem if p.is_file() else p.name for p in RUNNER.iterdir()}
    top = {m for m in top if not m.startswith(("_", "."))} - {"py.typed"}
    assert top - listed == set(), "modules in no layer of the contract"
