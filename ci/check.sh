#!/usr/bin/env bash
# The fast lane (`make check`): lint, the layer contract, types and the unit tests; no root,
# no browser, no testbed. Run it before every commit; `make test` runs all of it too.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/say.sh
source ci/bytecode.sh

ci/lint-python.sh
say "rustfmt (satlink, origin)"
for crate_dir in satlink origin; do
  [[ -f $crate_dir/Cargo.toml ]] || continue
  if command -v cargo >/dev/null 2>&1; then (cd "$crate_dir" && cargo fmt --all --check); fi
done
say "unit tests (one worker per CPU)"
uv run pytest tests/unit -q -n auto "$@"
