#!/usr/bin/env bash
# Python's checks, the same in `make check` and `make test`: ruff, the layer contract and
# the types.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/say.sh

say "ruff"
uv run ruff check runner tests dashboards ci
uv run ruff format --check runner tests dashboards ci
say "layer contract (import-linter; pyproject.toml [tool.importlinter])"
uv run lint-imports --no-logo
say "types (mypy; pyproject.toml [tool.mypy])"
uv run mypy
