#!/bin/sh
# The compose stack's `secrets` service: every secret the stack needs, made on the first
# `up` (256-bit random, base64 alphabet less '+/='), kept while the `secrets` volume
# lives (`down -v` removes it), each file created under umask 077. Nothing of the host is
# mounted: read a secret with `docker compose exec grafana cat /run/clarke-secrets/NAME`.
#
#   agent-token              the role agents' bearer token (root, 0600)
#   grafana-admin-password   Grafana's admin password (root:0, 0440: Grafana runs as
#                            uid 472 in group 0)
#   influx-admin-password    InfluxDB's admin (user admin; root, 0600)
#   influx-writer-password   the runner's InfluxDB user (clarke: all on the database)
#   influx-reader-password   Grafana's InfluxDB user (grafana: read only; 0440 root:0)
#
# The `secrets` volume (DIR) is mounted here only. Each service mounts a volume of its
# own at /run/clarke-secrets holding only the secrets it uses; with SHARES, every
# directory SHARES/<share> that exists (a mounted volume) gets its share's files, copied
# with their owner and mode, and loses any other file:
#
#   agents     agent-token                         terminal, satellite, gateway, server
#   client     agent-token influx-writer-password  the client (the runner)
#   influxdb   influx-admin-password influx-writer-password influx-reader-password
#   grafana    grafana-admin-password influx-reader-password
#
# Usage: secrets.sh DIR [SHARES]
set -eu
umask 077
dir=${1:?usage: secrets.sh DIR [SHARES]}
shares=${2:-}

make_secret() {  # NAME MODE
    f=$dir/$1
    if [ ! -s "$f" ]; then
        value=$(head -c 64 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 43)
        [ ${#value} -eq 43 ] || { echo "secrets: could not make $1" >&2; exit 1; }
        printf '%s' "$value" >"$f.new"
        mv "$f.new" "$f"
        echo "secrets: made $1"
    fi
    chown 0:0 "$f"
    chmod "$2" "$f"
}

share() {  # SHARE NAME...: SHARES/SHARE holds exactly these secrets
    to=$shares/$1
    shift
    [ -d "$to" ] || return 0
    for f in "$to"/* "$to"/.[!.]*; do
        [ -e "$f" ] || [ -L "$f" ] || continue
        keep=no
        for name in "$@"; do [ "${f##*/}" = "$name" ] && keep=yes; done
        [ $keep = yes ] || rm -rf -- "$f"
    done
    for name in "$@"; do
        cp -p -- "$dir/$name" "$to/.$name.new"
        mv -- "$to/.$name.new" "$to/$name"
    done
}

make_secret agent-token 0600
make_secret grafana-admin-password 0440
make_secret influx-admin-password 0600
make_secret influx-writer-password 0600
make_secret influx-reader-password 0440

if [ -n "$shares" ]; then
    share agents agent-token
    share client agent-token influx-writer-password
    share influxdb influx-admin-password influx-writer-password influx-reader-password
    share grafana grafana-admin-password influx-reader-password
    echo "secrets: each service's share written"
fi
