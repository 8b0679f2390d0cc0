#!/bin/sh
# Start influxd, set up its database and users once it answers (what the official
# influxdb:1.x image's first start does, from the same variables), then stay with
# influxd: a TERM or INT to this script stops it, and its exit status is the container's.
#   INFLUXDB_DB                                   the database (made if missing)
#   INFLUXDB_HTTP_AUTH_ENABLED=true               authentication on (influxd reads it)
#   INFLUXDB_ADMIN_USER, INFLUXDB_ADMIN_PASSWORD  an admin with all privileges
#   INFLUXDB_USER, INFLUXDB_USER_PASSWORD         all privileges on INFLUXDB_DB
#   INFLUXDB_READ_USER, INFLUXDB_READ_USER_PASSWORD   read on INFLUXDB_DB
# Unlike the official image it sets passwords on every start, so users follow the
# secrets even on a kept data volume.
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

admin=${INFLUXDB_ADMIN_USER:-}
query() {  # INFLUXQL; as the admin once there is one
    if [ -n "$admin" ]; then
        set -- -u "$admin:$INFLUXDB_ADMIN_PASSWORD" --data-urlencode "q=$1"
    else
        set -- --data-urlencode "q=$1"
    fi
    out=$(curl -sS -XPOST http://127.0.0.1:8086/query "$@") || return 1
    case $out in *'"error"'*) echo "$out" >&2; return 1 ;; esac
}
fail() { echo "influxdb-entrypoint: $*" >&2; kill -TERM "$pid"; wait "$pid"; exit 1; }

if [ -n "$admin" ]; then
    # The first user may be made without credentials; afterwards only by an admin.
    users=$(curl -sS -XPOST http://127.0.0.1:8086/query -u "$admin:$INFLUXDB_ADMIN_PASSWORD" \
        --data-urlencode "q=SHOW USERS")
    case $users in
        *"\"$admin\""*) query "SET PASSWORD FOR \"$admin\" = '$INFLUXDB_ADMIN_PASSWORD'" ;;
        *) admin_new=$admin; admin=
           query "CREATE USER \"$admin_new\" WITH PASSWORD '$INFLUXDB_ADMIN_PASSWORD' WITH ALL PRIVILEGES" \
               || fail "could not create the admin user $admin_new"
           admin=$admin_new ;;
    esac
fi
if [ -n "${INFLUXDB_DB:-}" ]; then
    query "CREATE DATABASE \"$INFLUXDB_DB\"" || fail "could not create $INFLUXDB_DB"
    echo "influxdb-entrypoint: database $INFLUXDB_DB ready"
fi
user_with() {  # USER PASSWORD PRIVILEGE
    [ -n "$1" ] || return 0
    query "CREATE USER \"$1\" WITH PASSWORD '$2'" 2>/dev/null \
        || query "SET PASSWORD FOR \"$1\" = '$2'" || fail "could not set up user $1"
    query "GRANT $3 ON \"$INFLUXDB_DB\" TO \"$1\"" || fail "could not grant $3 to $1"
    echo "influxdb-entrypoint: user $1 ($3 on $INFLUXDB_DB)"
}
user_with "${INFLUXDB_USER:-}" "${INFLUXDB_USER_PASSWORD:-}" ALL
user_with "${INFLUXDB_READ_USER:-}" "${INFLUXDB_READ_USER_PASSWORD:-}" READ

# A signal interrupts `wait`; wait again until influxd has really stopped.
status=0
wait "$pid" || status=$?
while kill -0 "$pid" 2>/dev/null; do
    wait "$pid" || status=$?
done
exit "$status"
