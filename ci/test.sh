#!/usr/bin/env bash
# The test command (README): set up from nothing, lint, build the Rust parts, run every
# test. CI runs it as root (namespaces, TUN devices, congestion-control sysctls).
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/say.sh
source ci/bytecode.sh

ci/setup.sh

ci/lint-python.sh

source ci/cargo-target.sh
for crate_dir in satlink origin; do
  [[ -f $crate_dir/Cargo.toml ]] || continue
  say "cargo: $crate_dir"
  in_cargo_copy "$crate_dir" bash -euo pipefail -c '
    cargo fmt --all --check
    cargo clippy --locked --all-targets -- -D warnings
    cargo test --locked --release'
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

# Two phases (tests/conftest.py): the tests that judge a measured time, rate or delay
# one at a time with nothing else running, then all the others on several workers at
# once: most of a test's time is a browser or a link waiting, not computing. Extra
# arguments go to both phases.
workers=${CLARKE_TEST_WORKERS:-4}
status=0
timelines=$PWD/build/test-timeline  # absolute: a test may run pytest elsewhere
rm -rf "$timelines"
mkdir -p "$timelines"
phase() {
  local name=$1 code=0
  shift
  CLARKE_TEST_TIMELINE=$timelines/$name.jsonl uv run pytest "$@" || code=$?
  uv run python ci/suite_timeline.py "$timelines/$name.jsonl" || true
  # 5: nothing was selected (a filter given on the command line took every test out).
  if ((code != 0 && code != 5)); then status=$code; fi
}
say "pytest, phase 1 of 2: the tests that judge timing, one at a time"
phase timing -m timing "$@"
say "pytest, phase 2 of 2: the others, $workers at a time"
phase others -m "not timing" -n "$workers" --dist loadgroup "$@"
say "tests ended (exit status $status)"
exit "$status"
