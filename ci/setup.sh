#!/usr/bin/env bash
# Installs what Clarke's commands and tests need on a fresh Debian 12 / Ubuntu machine,
# as root: system packages, uv (pinned) and the locked Python environment. Safe to run
# again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9
GECKODRIVER_VERSION=0.37.1
APT_PACKAGES=(iproute2 iputils-ping iperf3 ethtool curl influxdb procps
              firefox-esr libnss3-tools iptables nftables chromium chromium-driver)

say() { printf '==> %s\n' "$*" >&2; }

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    say "missing system packages: ${missing[*]} (run as root, or install them)"
    exit 3
  fi
  say "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian package may start influxd on its default ports; Clarke's tests start their
# own on free loopback ports, so a system one does not matter either way.

if ! command -v uv >/dev/null 2>&1 || [[ "$(uv --version | cut -d' ' -f2)" != "$UV_VERSION" ]]; then
  say "pip install uv==$UV_VERSION"
  python3 -m pip install -q "uv==$UV_VERSION"
fi
say "uv sync --frozen"
uv sync --frozen --quiet

# geckodriver is not packaged by Debian: build the pinned release from crates.io.
if ! command -v cargo >/dev/null 2>&1; then
  say "cargo (Rust >= 1.85) is needed to build geckodriver and Clarke's Rust parts: install it with rustup"
  exit 3
fi
if ! geckodriver --version 2>/dev/null | grep -q "^geckodriver $GECKODRIVER_VERSION"; then
  say "cargo install geckodriver $GECKODRIVER_VERSION (about 3 minutes)"
  cargo install --locked --quiet "geckodriver@$GECKODRIVER_VERSION"
fi

# Browsertime, pinned by runner/browsertime/package-lock.json; Clarke gives it the same
# geckodriver, so the drivers' own downloads are skipped.
if [[ ! -x runner/browsertime/node_modules/.bin/browsertime ]]; then
  say "npm ci (Browsertime)"
  (cd runner/browsertime && GECKODRIVER_SKIP_DOWNLOAD=true CHROMEDRIVER_SKIP_DOWNLOAD=true \
     EDGEDRIVER_SKIP_DOWNLOAD=true npm ci --no-audit --no-fund --loglevel=error)
fi
