#!/usr/bin/env bash
# The main job (README): install what is missing, build the Rust parts, start InfluxDB on
# loopback, run campaigns/demo.yaml on a network-namespace testbed, print the summary and
# write the HTML report. Needs root (namespaces, TUN devices).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '==> %s\n' "$*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
  say "the demo builds network namespaces: run it as root"
  exit 3
fi
ci/setup.sh
ci/build.sh

INFLUX_PORT=${CLARKE_INFLUX_PORT:-8086}
INFLUX_URL="http://127.0.0.1:${INFLUX_PORT}"
# Whose server answers on the port: the demo's own (its pid file), or someone else's,
# named, so results never go to an unknown server without a word.
owner() {
  ss -Hltnp "sport = :${INFLUX_PORT}" 2>/dev/null | grep -o 'users:((.*))' | head -n 1
}
if curl -fs -o /dev/null "${INFLUX_URL}/ping"; then
  ours=$(cat build/influxdb/influxd.pid 2>/dev/null || true)
  if [[ -n $ours ]] && owner | grep -q "pid=${ours},"; then
    say "InfluxDB started by an earlier make demo answers at ${INFLUX_URL} (pid ${ours})"
  else
    say "an InfluxDB not started by make demo answers at ${INFLUX_URL}: $(owner || echo 'process unknown')"
    say "the results go there; to use the demo's own instead, stop that one (on a systemd host: systemctl disable --now influxdb) or set CLARKE_INFLUX_PORT to a free port"
  fi
else
  mkdir -p build/influxdb
  cat > build/influxdb/influxdb.conf <<CONF
reporting-disabled = true
bind-address = "127.0.0.1:$((INFLUX_PORT + 2))"
[meta]
  dir = "$PWD/build/influxdb/meta"
[data]
  dir = "$PWD/build/influxdb/data"
  wal-dir = "$PWD/build/influxdb/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[http]
  bind-address = "127.0.0.1:${INFLUX_PORT}"
  log-enabled = false
CONF
  say "starting InfluxDB on ${INFLUX_URL} (data in build/influxdb/)"
  nohup influxd -config build/influxdb/influxdb.conf > build/influxdb/influxd.log 2>&1 &
  echo $! > build/influxdb/influxd.pid
  for _ in $(seq 1 100); do
    curl -fs -o /dev/null "${INFLUX_URL}/ping" && break  # quiet while it starts
    sleep 0.2
  done
  curl -fsS -o /dev/null "${INFLUX_URL}/ping" || { say "InfluxDB did not start: build/influxdb/influxd.log"; exit 1; }
  say "InfluxDB keeps running for Grafana and later pushes; stop it with: kill \$(cat build/influxdb/influxd.pid)"
fi

# The demo is a first look: the quick link check (10 pings, 5 s of iperf3 each way) is
# enough to show the link is the profile's; campaigns meant for results keep the full one.
uv run clarke run campaigns/demo.yaml --influx "${INFLUX_URL}/clarke" --results results \
  --link-check quick
latest=$(ls -1dt results/demo-* | head -n 1)
uv run clarke report "$latest"
say "results: $latest (journal.jsonl, report.html); InfluxDB: ${INFLUX_URL}, database clarke"
