#!/bin/sh
# Start influxd, create $INFLUXDB_DB once it answers, then stay with influxd: a TERM or
# INT to this script stops it, and its exit status is the container's.
set -u
influxd -config /etc/influxdb/influxdb.conf &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
i=0
until curl -fsS -o /dev/null http://127.0.0.1:8086/ping; do
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; exit $?; }
    i=$((i + 1))
    [ "$i" -lt 300 ] || { echo "influxdb-entrypoint: influxd did not answer in 30 s" >&2; exit 1; }
    sleep 0.1
done
if [ -n "${INFLUXDB_DB:-}" ]; then
    curl -fsS -o /dev/null -XPOST http://127.0.0.1:8086/query \
        --data-urlencode "q=CREATE DATABASE \"$INFLUXDB_DB\"" \
        || { echo "influxdb-entrypoint: could not create $INFLUXDB_DB" >&2; exit 1; }
    echo "influxdb-entrypoint: database $INFLUXDB_DB ready"
fi
# A signal interrupts `wait`; wait again until influxd has really stopped.
status=0
wait "$pid" || status=$?
while kill -0 "$pid" 2>/dev/null; do
    wait "$pid" || status=$?
done
exit "$status"
