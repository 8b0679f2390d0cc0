#!/usr/bin/env bash
# Builds Clarke's Rust parts (satlink and splittcp, origin) in release mode from their lock files.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/cargo-target.sh
source ci/say.sh
for crate_dir in satlink origin; do
  say "cargo build --release: $crate_dir"
  in_cargo_copy "$crate_dir" cargo build --locked --release --quiet
done
