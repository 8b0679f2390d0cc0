#!/usr/bin/env bash
# geckodriver, pinned, built from crates.io (Debian does not package it) into cargo's bin
# directory, when the one on the PATH is not this version.
#
# Built without optimization (opt-level 0): one minute on two cores instead of two. It only
# relays the WebDriver commands that start a load and read its results; a page's timings
# are the browser's own (Navigation and Paint Timing), which geckodriver does not take
# part in.
set -euo pipefail
GECKODRIVER_VERSION=0.37.1
if geckodriver --version 2>/dev/null | grep -q "^geckodriver $GECKODRIVER_VERSION"; then
  exit 0
fi
printf '==> cargo install geckodriver %s (about a minute)\n' "$GECKODRIVER_VERSION" >&2
CARGO_PROFILE_RELEASE_OPT_LEVEL=0 cargo install --locked --quiet "geckodriver@$GECKODRIVER_VERSION"
