#!/usr/bin/env bash
# Sourced by ci/build.sh and ci/test.sh. Cargo runs on a copy of each Rust workspace kept
# at a fixed place of the machine's cache, with its target directory beside it, shared by
# every clone on the machine, so that a fresh clone compiles only what differs from the
# last build. A fixed place because cargo decides a workspace crate is stale by its files'
# modification times: a clone's files are all new, so building in the clone compiled its
# own crates again every time (3 min 21 s of each `make test` on a 2-core machine). The
# copy is made with `rsync --checksum` and without keeping times: a file whose content
# changed is written anew (new time: rebuilt), one whose content did not is left as it
# was (its time and artifacts stand).
#
# CLARKE_CARGO_TARGETS and CLARKE_CARGO_SOURCES name other places. Each clone's target/
# is a link to the shared target directory (where the tests find the binaries); a target/
# that is a directory of its own, or a link that leads somewhere, is left as it is.
cargo_targets=${CLARKE_CARGO_TARGETS:-${XDG_CACHE_HOME:-$HOME/.cache}/clarke/cargo-targets}
cargo_sources=${CLARKE_CARGO_SOURCES:-$(dirname "$cargo_targets")/cargo-sources}
for crate_dir in satlink origin; do
  [[ -f $crate_dir/Cargo.toml ]] || continue
  # A link that leads nowhere (made inside ci/debian-container, say) is made anew.
  if [[ ! -e $crate_dir/target ]]; then
    mkdir -p "$cargo_targets/$crate_dir"
    ln -sfn "$cargo_targets/$crate_dir" "$crate_dir/target"
  fi
done

# in_cargo_copy CRATE_DIR COMMAND...: brings the machine's copy of CRATE_DIR to this
# clone's content and runs COMMAND there, the copy locked meanwhile (another clone's
# `make test` waits rather than build a mix of two commits).
in_cargo_copy() {
  local crate_dir=$1
  shift
  local copy=$cargo_sources/$crate_dir
  mkdir -p "$copy" "$cargo_targets/$crate_dir"
  (
    flock 9
    rsync --recursive --links --perms --checksum --delete --exclude=/target \
      "$crate_dir/" "$copy/"
    ln -sfn "$(realpath "$crate_dir/target")" "$copy/target"
    cd "$copy"
    "$@"
  ) 9>"$cargo_sources/$crate_dir.lock"
}
