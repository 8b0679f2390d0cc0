#!/usr/bin/env bash
# Installs what Clarke needs on a fresh Debian 12 machine, as root: system packages, uv
# (pinned, in its own virtual environment: never into the system Python, which PEP 668
# protects) and the locked Python environment (a virtual environment that uv makes).
# Safe to run again: it installs only what is missing.
#
#   ci/setup.sh demo   what `make demo` needs: the netns testbed, Firefox, InfluxDB (a fresh
#                      machine's first `make demo` waits for no more); ci/demo.sh builds
#                      geckodriver (ci/geckodriver.sh) beside Clarke's Rust parts
#   ci/setup.sh        everything (the default: `make test`, `make corpus`): the demo's
#                      parts and geckodriver, and Chromium, Browsertime, mitmproxy,
#                      tshark, Slurm and munge, the documentation packages of the site
#                      corpus
#
# Rust (cargo >= 1.85) and Node.js >= 20 must be there already: Debian 12 packages older
# ones (Rust 1.63, Node.js 18).
set -euo pipefail
cd "$(dirname "$0")/.."

WHAT=${1:-all}
case $WHAT in
  demo|all) ;;
  *) echo "usage: ci/setup.sh [demo|all]" >&2; exit 2 ;;
esac
UV_VERSION=0.13.9
# mitmproxy records sites (docs/sites.md). 11.0.2 is the last release for Debian 12's
# Python 3.11 (12.x needs 3.12), and it pins aioquic apart from Clarke's: so it lives in
# a virtual environment of its own, like uv.
MITMPROXY_VERSION=11.0.2
NODE_MAJOR_MIN=20
# The demo: namespaces, the link checks (ping, iperf3), InfluxDB, Firefox and its NSS
# tools, the Rust builds' C toolchain and rsync (ci/cargo-target.sh), git (the results'
# revision).
APT_PACKAGES=(iproute2 iputils-ping iperf3 ethtool curl influxdb procps
              firefox-esr libnss3-tools iptables nftables
              python3 python3-venv git gcc libc6-dev pkg-config rsync)
# The rest: the other browser, captures, the Slurm tests' cluster; python3.11-doc and
# debian-handbook are the pages of the offline site corpus (make corpus; docs/sites.md).
if [[ $WHAT == all ]]; then
  APT_PACKAGES+=(chromium chromium-driver tcpdump tshark slurm-wlm munge
                 python3.11-doc debian-handbook)
fi

source ci/say.sh

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    say "missing system packages: ${missing[*]} (run as root, or install them)"
    exit 3
  fi
  say "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian packages may start influxd on its default ports, and munged and Slurm's
# daemons with /etc's configuration; Clarke's tests start their own (InfluxDB on free
# loopback ports, a Slurm cluster with its own configuration, key and namespaces), so
# system ones do not matter either way.

# uv, pinned, in a virtual environment of its own, linked into the PATH.
# A pinned tool's virtual environment (tool_venv) and where it is linked into the PATH
# (bin_dir): system-wide as root, the user's own otherwise.
tool_dirs() {
  if [[ $(id -u) -eq 0 ]]; then
    tool_venv=/opt/clarke-$1 bin_dir=/usr/local/bin
  else
    tool_venv=${XDG_DATA_HOME:-$HOME/.local/share}/clarke-$1 bin_dir=$HOME/.local/bin
  fi
}
# link_tool COMMAND CHECK WHAT: the tool's COMMAND linked into bin_dir, then CHECK must
# find the pinned version first in the PATH.
link_tool() {
  mkdir -p "$bin_dir"
  ln -sf "$tool_venv/bin/$1" "$bin_dir/$1"
  hash -r
  if ! "$2"; then
    say "$3 is in $bin_dir, but the PATH finds $(command -v "$1" || echo nothing) first: put $bin_dir first in PATH"
    exit 3
  fi
}

uv_ok() { command -v uv >/dev/null 2>&1 && [[ "$(uv --version | cut -d' ' -f2)" == "$UV_VERSION" ]]; }
if ! uv_ok; then
  tool_dirs uv
  say "uv $UV_VERSION: pip install into the virtual environment $tool_venv"
  rm -rf "$tool_venv"
  python3 -m venv "$tool_venv"
  "$tool_venv/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
  link_tool uv uv_ok "uv $UV_VERSION"
fi
say "uv sync --frozen"
uv sync --frozen --quiet

mitm_ok() { mitmdump --version 2>/dev/null | grep -q "^Mitmproxy: $MITMPROXY_VERSION\$"; }
if [[ $WHAT == all ]] && ! mitm_ok; then
  tool_dirs mitmproxy
  say "mitmproxy $MITMPROXY_VERSION: uv pip install into the virtual environment $tool_venv"
  rm -rf "$tool_venv"
  uv venv --quiet --python /usr/bin/python3 "$tool_venv"
  VIRTUAL_ENV=$tool_venv uv pip install --quiet "mitmproxy==$MITMPROXY_VERSION"
  link_tool mitmdump mitm_ok "mitmproxy $MITMPROXY_VERSION"
fi

if ! command -v cargo >/dev/null 2>&1; then
  say "cargo (Rust >= 1.85) is needed to build geckodriver and Clarke's Rust parts: install it with rustup"
  exit 3
fi

# The demo builds geckodriver beside Clarke's Rust parts (ci/demo.sh): each build leaves
# a core idle part of the time.
[[ $WHAT == all ]] || exit 0
ci/geckodriver.sh

# Node.js >= 20 for Browsertime (its package says so; Debian 12 packages 18).
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if ((node_major < NODE_MAJOR_MIN)) || ! command -v npm >/dev/null 2>&1; then
  say "Node.js >= $NODE_MAJOR_MIN with npm is needed for Browsertime (found: $(node --version 2>/dev/null || echo none)); Debian 12 packages 18: install a current Node.js LTS"
  exit 3
fi

# Browsertime, pinned by runner/browsertime/package-lock.json; Clarke gives it the same
# geckodriver, so the drivers' own downloads are skipped.
if [[ ! -x runner/browsertime/node_modules/.bin/browsertime ]]; then
  say "npm ci (Browsertime)"
  (cd runner/browsertime && GECKODRIVER_SKIP_DOWNLOAD=true CHROMEDRIVER_SKIP_DOWNLOAD=true \
     EDGEDRIVER_SKIP_DOWNLOAD=true npm ci --no-audit --no-fund --loglevel=error)
fi
