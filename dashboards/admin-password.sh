#!/bin/sh
# The compose stack's grafana-secret service: Grafana's admin password, generated on the
# first run and kept in .env as GRAFANA_ADMIN_PASSWORD (read it there), written to the
# file Grafana reads it from (GF_SECURITY_ADMIN_PASSWORD__FILE). There is never a
# default password. Usage: admin-password.sh ENV_FILE SECRET_FILE
set -eu
env_file=$1
secret=$2
password=$(sed -n 's/^GRAFANA_ADMIN_PASSWORD=//p' "$env_file" 2>/dev/null | tail -n 1)
if [ -z "$password" ]; then
    password=$(head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24)
    [ ${#password} -eq 24 ] || { echo "grafana-secret: could not make a password" >&2; exit 1; }
    # Keep whatever .env has; start on a new line.
    if [ -s "$env_file" ] && [ -n "$(tail -c 1 "$env_file")" ]; then
        echo >>"$env_file"
    fi
    echo "GRAFANA_ADMIN_PASSWORD=$password" >>"$env_file"
    echo "grafana-secret: generated Grafana's admin password (user admin): see GRAFANA_ADMIN_PASSWORD in .env"
fi
umask 077
printf '%s' "$password" >"$secret"
# Grafana runs as uid 472 in group 0.
chown 0:0 "$secret"
chmod 0440 "$secret"
