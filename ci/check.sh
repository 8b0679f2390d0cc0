#!/usr/bin/env bash
# The fast lane (`make check`): lint, the layer contract, types and the unit tests; no root,
# no browser, no testbed. Run it before every commit; `make test` runs all of it too.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/say.sh
source ci/bytecode.sh

say "ruff"
uv run ruff check runner tests dashboards ci
uv run ruff format --check runner tests dashboards ci
say "layer contract (import-linter; pyproject.toml [tool.importlinter])"
uv run lint-imports --no-logo
say "types (mypy; pyproject.toml [tool.mypy])"
uv run mypy
say "rustfmt (satlink, origin)"
for crate_dir in satlink origin; do
  [[ -f $crate_dir/Cargo.toml ]] || continue
  if command -v cargo >/dev/null 2>&1; then (cd "$crate_dir" && cargo fmt --all --check); fi
done
say "unit tests (one worker per CPU)"
uv run pytest tests/unit -q -n auto "$@"
