#!/usr/bin/env bash
# Sourced by ci/build.sh and ci/test.sh: each Rust workspace's target/ is a link to a
# directory of the machine's cache, shared by every clone on the machine, so that a
# fresh clone compiles only what differs from the last build (its own crates; the
# dependencies, the bulk of the time, are already there). CLARKE_CARGO_TARGETS names
# another place; a target/ that is a directory of its own, or a link that leads somewhere, is
# left as it is.
cargo_targets=${CLARKE_CARGO_TARGETS:-${XDG_CACHE_HOME:-$HOME/.cache}/clarke/cargo-targets}
for crate_dir in satlink origin; do
  [[ -f $crate_dir/Cargo.toml ]] || continue
  # A link that leads nowhere (made inside ci/debian-container, say) is made anew.
  if [[ ! -e $crate_dir/target ]]; then
    mkdir -p "$cargo_targets/$crate_dir"
    ln -sfn "$cargo_targets/$crate_dir" "$crate_dir/target"
  fi
done
