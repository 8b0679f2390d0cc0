#!/usr/bin/env bash
# Builds the offline corpus (docs/sites.md) into $1 (default build/corpus), anew: pages
# of Debian's python3.11-doc and debian-handbook served on loopback under seven host
# names (three or four per page), each recorded by `clarke site record` through
# mitmproxy in headless Firefox. It runs in a network
# namespace of its own that has only a loopback interface (unshare --net), so nothing
# can reach beyond the machine whatever the browser tries. Needs root. Beside it, the
# generated site of seed 1 (`clarke site generate`, docs/sites.md "Generated sites"),
# which campaigns/sites/generated-geo.yaml replays.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/corpus}
if [[ $(id -u) -ne 0 ]]; then
  printf '==> the corpus is recorded in a network namespace of its own: run as root\n' >&2
  exit 3
fi
rm -rf "$out"
clarke=$PWD/.venv/bin/clarke
# shellcheck disable=SC2016  # expanded by the inner shell
unshare --net -- sh -c 'ip link set lo up && exec "$0" site corpus --out "$1"' "$clarke" "$out"
"$clarke" site generate --out "$out/generated-1" --seed 1 > /dev/null
