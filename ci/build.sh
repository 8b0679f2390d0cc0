#!/usr/bin/env bash
# Builds Clarke's Rust parts (satlink and splittcp, origin) in release mode from their lock files.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/cargo-target.sh
for crate_dir in satlink origin; do
  printf '==> cargo build --release: %s\n' "$crate_dir" >&2
  (cd "$crate_dir" && cargo build --locked --release --quiet)
done
