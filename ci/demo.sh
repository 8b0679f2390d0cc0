#!/usr/bin/env bash
# The main job (README): install what is missing, build the Rust parts, start InfluxDB on
# loopback, run campaigns/demo.yaml on a network-namespace testbed, print the summary and
# write the HTML report. Needs root (namespaces, TUN devices).
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/say.sh
source ci/bytecode.sh

if [[ $(id -u) -ne 0 ]]; then
  say "the demo builds network namespaces: run it as root"
  exit 3
fi
ci/setup.sh demo
# geckodriver and Clarke's Rust parts build at once: each build leaves a core idle part of
# the time.
ci/geckodriver.sh &
geckodriver_build=$!
ci/build.sh
wait "$geckodriver_build"

# The demo's own InfluxDB (ci/demo_influxdb.py): on 127.0.0.1:${CLARKE_INFLUX_PORT:-8087}
# (the compose stack publishes its own on 8086: the two coexist), authentication on,
# data and credentials in build/influxdb/ (0700; each password 0600). It prints
# INFLUX_URL and the writer's user and password file, which clarke reads from the
# environment (CLARKE_INFLUX_USER, CLARKE_INFLUX_PASSWORD_FILE).
influx_env=$(uv run python ci/demo_influxdb.py start)
eval "$influx_env"
export CLARKE_INFLUX_USER CLARKE_INFLUX_PASSWORD_FILE

# The demo is a first look: the quick link check (10 pings, 5 s of iperf3 each way) is
# enough to show the link is the profile's; campaigns meant for results keep the full one.
uv run clarke run campaigns/demo.yaml --influx "${INFLUX_URL}/clarke" --results results \
  --link-check quick
latest=$(ls -1dt results/demo-* | head -n 1)
uv run clarke report "$latest"
say "results: $latest (journal.jsonl, report.html); InfluxDB: ${INFLUX_URL}, database clarke"
say "InfluxDB keeps running (user ${CLARKE_INFLUX_USER}, password in ${CLARKE_INFLUX_PASSWORD_FILE}; read-only: user grafana, build/influxdb/credentials/influx-reader-password); stop it with: uv run python ci/demo_influxdb.py stop"
