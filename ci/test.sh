#!/usr/bin/env bash
# The test command (README): set up from nothing, lint, build the Rust parts, run every
# test. CI runs it as root (namespaces, TUN devices, congestion-control sysctls).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '==> %s\n' "$*" >&2; }

ci/setup.sh

say "ruff"
uv run ruff check runner tests dashboards ci
uv run ruff format --check runner tests dashboards ci
say "layer contract (import-linter)"
uv run lint-imports --no-logo
say "types (mypy; pyproject.toml [tool.mypy])"
uv run mypy

for crate_dir in satlink origin; do
  [[ -f $crate_dir/Cargo.toml ]] || continue
  say "cargo: $crate_dir"
  (
    cd "$crate_dir"
    cargo fmt --all --check
    cargo clippy --locked --all-targets -- -D warnings
    cargo test --locked --release
  )
done
ci/build.sh

say "actionlint (GitHub workflows)"
if command -v go >/dev/null 2>&1 || [[ "${CI:-}" == "true" ]]; then
  ci/lint-workflows.sh
else
  say "no Go toolchain: workflows not linted"
fi

# The compose tests: Docker, Compose v2, the offline base images. A dockerd started here
# is stopped again when the tests end.
trap 'ci/docker-setup.sh stop' EXIT
ci/docker-setup.sh

say "pytest"
uv run pytest "$@"
