#!/usr/bin/env bash
# What the compose tests need, on a fresh Debian 12 machine as root: Docker from Debian
# (docker.io), Docker Compose v2 (Debian 12 packages only v1: v2 is built from the Go
# module proxy, pinned), debootstrap (ci/offline-images), a running dockerd, the base
# images of the offline stack, and cubic and bbr allowed on the host.
#
# A dockerd this script starts is recorded in $DOCKERD_PIDFILE; `ci/docker-setup.sh
# stop` stops that one (by PID) and nothing else. A daemon that was already running
# is used as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

COMPOSE_VERSION=v2.29.7
DOCKERD_PIDFILE=${DOCKERD_PIDFILE:-/run/clarke-dockerd.pid}
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/clarke-dockerd.log}
PLUGINS=/usr/local/lib/docker/cli-plugins

source ci/say.sh

if [[ ${1:-} == stop ]]; then
  if [[ -f $DOCKERD_PIDFILE ]]; then
    pid=$(cat "$DOCKERD_PIDFILE")
    if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == dockerd ]]; then
      say "stopping the dockerd this script started (pid $pid)"
      kill -TERM "$pid"
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
    rm -f "$DOCKERD_PIDFILE"
  fi
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  say "the compose tests need root (Docker, TUN devices, sysctls)"
  exit 3
fi

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if ((${#missing[@]})); then
  say "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! docker compose version >/dev/null 2>&1; then
  command -v go >/dev/null 2>&1 || { say "Go is needed to build Docker Compose $COMPOSE_VERSION"; exit 3; }
  say "go install Docker Compose $COMPOSE_VERSION (a few minutes)"
  gobin=$(mktemp -d)
  GOBIN=$gobin GOFLAGS=-mod=mod go install \
    -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
    "github.com/docker/compose/v2/cmd@$COMPOSE_VERSION"
  install -D -m 0755 "$gobin/cmd" "$PLUGINS/docker-compose"
  rm -rf "$gobin"
fi
docker compose version >&2

if ! docker info >/dev/null 2>&1; then
  say "starting dockerd (log: $DOCKERD_LOG)"
  mkdir -p "$(dirname "$DOCKERD_LOG")"
  dockerd >>"$DOCKERD_LOG" 2>&1 &
  echo $! >"$DOCKERD_PIDFILE"
  for _ in $(seq 1 150); do
    docker info >/dev/null 2>&1 && break
    kill -0 "$(cat "$DOCKERD_PIDFILE")" 2>/dev/null || { tail -n 20 "$DOCKERD_LOG" >&2; exit 1; }
    sleep 0.2
  done
  docker info >/dev/null
fi

# The server's congestion controls must be allowed in the host's root namespace for a
# container to use them (the stack's hostcheck refuses to start otherwise).
allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
for cc in cubic bbr; do
  if [[ " $allowed " != *" $cc "* ]]; then
    modprobe "tcp_$cc" 2>/dev/null || true
    allowed="$allowed $cc"
    say "sysctl net.ipv4.tcp_allowed_congestion_control='$allowed'"
    sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed"
  fi
done

ci/offline-images
