#!/bin/bash
# Role entrypoint of the opensand image (and of opensand/verify-netns.sh, which runs it
# in network namespaces): wires one OpenSAND entity's network, checks its configuration
# with `opensand -c`, then runs OpenSAND in the foreground (exec: OpenSAND keeps this
# process's PID, so a container's PID 1 or a script's `$!` is OpenSAND itself).
#
#   entrypoint.sh            wire and run the entity named by OPENSAND_ROLE
#   entrypoint.sh health     exit 0 when that entity is running (image HEALTHCHECK); without
#                            OPENSAND_ROLE it checks the entity last started with this
#                            OPENSAND_RUN_DIR (its role is kept next to the pid file)
#
# The XML comes from Clarke's generator (`clarke.link.opensand.write`), mounted at
# OPENSAND_CONFIG_DIR: either that directory holds infrastructure.xml, topology.xml (and
# profile.xml for gw and st), or it holds the generator's gw/, st/, sat/ subdirectories.
# Nothing is generated here. In the opensand image Clarke's role agent (`clarke serve
# ROLE --implementation opensand`, clarke.link.opensand.entity) writes the XML and runs this
# script as its child; on the netns testbed the same agent runs it in each link role's namespace.
#
# Environment (docs/opensand.md, "Wiring"):
#   OPENSAND_ROLE           gw | st | sat                                     (required)
#   OPENSAND_CONFIG_DIR     the generated XML                  (default /etc/opensand)
#   OPENSAND_EMU_IFACE      interface on the emulation network        (default eth0)
#   OPENSAND_RUN_DIR        pid file and role file                     (default /run/opensand)
# gw and st only:
#   OPENSAND_BR_ADDRESS     this entity's address on bridge opensand_br, CIDR (required)
#   OPENSAND_PEER_BR_ADDRESS  the other ground entity's bridge address         (required)
#   OPENSAND_REMOTE_LAN     prefix behind the other ground entity, routed into the link
#                           (required; comma-separated for several)
#   OPENSAND_LAN_IFACE      the entity's LAN interface (forwarding on)        (optional)
#   OPENSAND_TAP_TBF        tbf rate on opensand_tap, e.g. 9800kbit (optional; the GW's
#                           forward workaround for GSE burst drops, docs/opensand.md)
#   OPENSAND_VERBOSE        1: OpenSAND's logs also on stderr              (default 0)
set -euo pipefail

readonly TAP=opensand_tap
readonly BR=opensand_br
readonly MAC_GW=00:00:00:00:00:01
readonly MAC_ST=00:00:00:00:00:02
# Measured: the GW's CPU on the return path drops from 50-65 % to 28 % with these.
readonly TUNABLES="glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912:glibc.malloc.top_pad=67108864"

ROLE=${OPENSAND_ROLE:-}
CONFIG_DIR=${OPENSAND_CONFIG_DIR:-/etc/opensand}
EMU_IFACE=${OPENSAND_EMU_IFACE:-eth0}
RUN_DIR=${OPENSAND_RUN_DIR:-/run/opensand}
# `health` in a container whose environment does not name the entity (the agent that
# started it did): the role the last start recorded.
if [[ -z $ROLE && ${1:-} == health && -r $RUN_DIR/opensand.role ]]; then
	ROLE=$(<"$RUN_DIR/opensand.role")
fi

die() {
	echo "opensand-entrypoint: error: $*" >&2
	exit 2
}

log() {
	echo "opensand-entrypoint[$ROLE]: $*" >&2
}

run() {
	echo "\$ $*" >&2
	"$@"
}

need_env() {
	local name
	for name in "$@"; do
		[[ -n ${!name:-} ]] || die "$name is required for role $ROLE"
	done
}

case $ROLE in
gw | st | sat) ;;
"") die "OPENSAND_ROLE is not set (gw, st or sat)" ;;
*) die "OPENSAND_ROLE must be gw, st or sat, not '$ROLE'" ;;
esac

# --- health ----------------------------------------------------------------------------
health() {
	local pid
	pid=$(cat "$RUN_DIR/opensand.pid" 2>/dev/null) || {
		echo "no pid file in $RUN_DIR" >&2
		return 1
	}
	[[ $(cat "/proc/$pid/comm" 2>/dev/null) == opensand ]] || {
		echo "opensand (pid $pid) is not running" >&2
		return 1
	}
	if [[ $ROLE != sat ]]; then
		ip -o link show dev "$TAP" 2>/dev/null | grep -q "state UP\|,UP" || {
			echo "$TAP is not up" >&2
			return 1
		}
	fi
	return 0
}

if [[ ${1:-} == health ]]; then
	health
	exit
fi
[[ $# -eq 0 ]] || die "unexpected arguments: $* (only 'health' is accepted)"

# --- configuration ---------------------------------------------------------------------
dir=$CONFIG_DIR
[[ -f $dir/$ROLE/infrastructure.xml ]] && dir=$dir/$ROLE
files=(infrastructure.xml topology.xml)
[[ $ROLE == sat ]] || files+=(profile.xml)
for f in "${files[@]}"; do
	[[ -f $dir/$f ]] || die "missing $dir/$f: mount the generator's output (clarke.link.opensand.write) at $CONFIG_DIR"
done
args=(-i "$dir/infrastructure.xml" -t "$dir/topology.xml")
[[ $ROLE == sat ]] || args+=(-p "$dir/profile.xml")
[[ ${OPENSAND_VERBOSE:-0} == 1 ]] && args=(-v "${args[@]}")

# --- network ---------------------------------------------------------------------------
ip link show dev "$EMU_IFACE" >/dev/null 2>&1 || die "no emulation interface $EMU_IFACE (set OPENSAND_EMU_IFACE)"
run ip link set dev "$EMU_IFACE" up
# The satellite reaches the gateway and the terminal by UDP multicast (239.137.194.x).
run ip route replace 224.0.0.0/4 dev "$EMU_IFACE"

set_sysctl() {
	local key=$1 value=$2 path
	path=/proc/sys/${1//.//}
	[[ $(cat "$path" 2>/dev/null) == "$value" ]] && return 0
	echo "$value" >"$path" 2>/dev/null || die "cannot set $key=$value (run with --sysctl $key=$value or privileges)"
}

if [[ $ROLE != sat ]]; then
	need_env OPENSAND_BR_ADDRESS OPENSAND_PEER_BR_ADDRESS OPENSAND_REMOTE_LAN
	[[ -c /dev/net/tun ]] || die "/dev/net/tun is missing (the TAP device needs it)"
	if [[ $ROLE == gw ]]; then
		mac=$MAC_GW peer_mac=$MAC_ST
	else
		mac=$MAC_ST peer_mac=$MAC_GW
	fi
	ip link del "$TAP" >/dev/null 2>&1 || true
	ip link del "$BR" >/dev/null 2>&1 || true
	run ip tuntap add mode tap "$TAP"
	run ip link set dev "$TAP" address "$mac"
	run ip link add name "$BR" type bridge
	run ip address add "$OPENSAND_BR_ADDRESS" dev "$BR"
	run ip link set dev "$TAP" master "$BR"
	run ip link set dev "$BR" up
	run ip link set dev "$TAP" up
	set_sysctl net.ipv4.ip_forward 1
	set_sysctl "net.ipv4.conf.$BR.forwarding" 1
	set_sysctl "net.ipv4.conf.$EMU_IFACE.forwarding" 1
	if [[ -n ${OPENSAND_LAN_IFACE:-} ]]; then
		set_sysctl "net.ipv4.conf.$OPENSAND_LAN_IFACE.forwarding" 1
	fi
	# No ARP across the emulated link: the peer's bridge address is pinned to its TAP MAC.
	run ip neighbor replace to "$OPENSAND_PEER_BR_ADDRESS" dev "$BR" lladdr "$peer_mac" nud permanent
	IFS=, read -r -a lans <<<"$OPENSAND_REMOTE_LAN"
	for lan in "${lans[@]}"; do
		run ip route replace "$lan" via "$OPENSAND_PEER_BR_ADDRESS" dev "$BR"
	done
	if [[ -n ${OPENSAND_TAP_TBF:-} ]]; then
		run tc qdisc replace dev "$TAP" root tbf rate "$OPENSAND_TAP_TBF" burst 32kbit latency 400ms
	fi
fi

# --- check, then run -------------------------------------------------------------------
export GLIBC_TUNABLES=$TUNABLES
mkdir -p "$RUN_DIR"
log "checking the configuration: opensand -c ${args[*]}"
check_out=$(opensand -c "${args[@]}" 2>&1) || {
	printf '%s\n' "$check_out" >&2
	die "opensand -c rejected the configuration in $dir"
}
echo "$ROLE" >"$RUN_DIR/opensand.role"
echo $$ >"$RUN_DIR/opensand.pid"
log "starting: opensand ${args[*]}"
exec opensand "${args[@]}"
