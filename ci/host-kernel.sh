#!/usr/bin/env bash
# What Clarke needs from the host's kernel, as root: Cubic and BBR allowed as TCP
# congestion control, and the TUN device (satlink, OpenSAND). A network namespace or a
# container can only use a congestion control that the host's own namespace allows, and
# that list is read-only anywhere else: run this on the host, not in a container.
#
# Changes only what is missing (loads tcp_bbr, adds cubic and bbr to the allowed list,
# makes /dev/net/tun), then prints the state. The GitHub workflows run it on the runner
# before they start containers; ci/debian-container asks for it when something is missing.
set -euo pipefail
say() { printf '==> %s\n' "$*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
  say "the host's congestion controls and TUN device need root: sudo $0"
  exit 3
fi

available=$(cat /proc/sys/net/ipv4/tcp_available_congestion_control)
for cc in cubic bbr; do
  if [[ " $available " != *" $cc "* ]]; then
    say "modprobe tcp_$cc"
    modprobe "tcp_$cc"
  fi
done

allowed=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
wanted=$allowed
for cc in cubic bbr; do
  [[ " $wanted " == *" $cc "* ]] || wanted="$wanted $cc"
done
if [[ "$wanted" != "$allowed" ]]; then
  say "sysctl net.ipv4.tcp_allowed_congestion_control=\"$wanted\""
  sysctl -qw net.ipv4.tcp_allowed_congestion_control="$wanted"
fi

if [[ ! -c /dev/net/tun ]]; then
  say "modprobe tun; mknod /dev/net/tun"
  modprobe tun || true
  mkdir -p /dev/net
  [[ -c /dev/net/tun ]] || mknod -m 0666 /dev/net/tun c 10 200
fi

echo "tcp_allowed_congestion_control: $(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)"
ls -l /dev/net/tun
