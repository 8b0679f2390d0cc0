#!/bin/bash
# Run OpenSAND 8.2 (installed from its Debian 12 packages) with Clarke's generated XML in
# network namespaces and measure the link: idle RTT over 50 echoes and UDP / TCP
# throughput each way with iperf3. A manual check, not run in CI (needs root, OpenSAND,
# iperf3, ping, tc).
#
#   sudo opensand/verify-netns.sh [PROFILE]      (default geo; run from the checkout)
#
# Environment: DURATION (seconds per UDP run, default 10), TCP_DURATION (seconds per
# TCP run, default 20: slow start alone takes several seconds at 530 ms), UDP_RATE
# (offered UDP load, default 12M), RTT_ONLY (1: echoes only, no iperf3), TBF (rate for the GW TAP's tbf,
# e.g. 9800kbit; default none), OUT (directory for logs and results, default a new
# temporary directory).
#
# Namespaces (all named clarkeos-*, none has a route out, nothing touches the root
# namespace's interfaces), addresses from 198.19.232.0/21 only:
#
#   ws-st ──st-lan── st ══emu══ sat ══emu══ gw ──gw-lan── ws-gw
#   198.19.235.0/24        198.19.232.0/24           198.19.234.0/24
#   st .1, ws-st .2        st .1, sat .2, gw .3      gw .1, ws-gw .2
#   opensand_br (TAP network, across the link): 198.19.233.0/24, gw .1, st .2
#
# emu is a bridge in its own namespace (clarkeos-emu) with multicast snooping off. Each
# entity runs opensand/entrypoint.sh (network wiring, `opensand -c`, then OpenSAND) in
# its namespace; start order SAT, GW, ST. The script stops only the PIDs it started and
# deletes its namespaces on exit, also on failure or Ctrl-C.
set -euo pipefail

PROFILE=${1:-geo}
DURATION=${DURATION:-10}
TCP_DURATION=${TCP_DURATION:-20}
UDP_RATE=${UDP_RATE:-12M}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
OUT=${OUT:-$(mktemp -d -t clarkeos-verify.XXXXXX)}
NS=(clarkeos-emu clarkeos-sat clarkeos-gw clarkeos-st clarkeos-ws-gw clarkeos-ws-st)
PIDS=()  # background processes, all our children: unreaped, their PIDs stay ours
FG=      # the foreground measurement running now (see run_fg)

EMU_NET=198.19.232
BR_NET=198.19.233
GW_LAN=198.19.234
ST_LAN=198.19.235

say() { echo "== $*" >&2; }

# Run a measurement as a child we wait for, so that Ctrl-C or SIGTERM interrupts the
# wait at once (bash defers traps until a foreground command ends) and cleanup can stop
# it by its PID.
run_fg() {
	local rc=0
	"$@" &
	FG=$!
	wait "$FG" || rc=$?
	FG=
	return "$rc"
}

cleanup() {
	local rc=$? pid
	set +e
	[[ -n $FG ]] && PIDS+=("$FG")
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	for ns in "${NS[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
	echo "logs and results: $OUT" >&2
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[[ $(id -u) -eq 0 ]] || { echo "needs root" >&2; exit 3; }
for tool in opensand iperf3 ping ip tc; do
	command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 3; }
done
for ns in "${NS[@]}"; do
	if ip netns list | grep -qw "$ns"; then
		echo "namespace $ns exists already (another run?)" >&2
		NS=()
		exit 3
	fi
done

say "generating the XML for profile $PROFILE into $OUT/xml"
(cd "$REPO" && uv run --quiet python -m clarke.link.opensand "$PROFILE" "$OUT/xml" \
	"$EMU_NET.3" "$EMU_NET.1" "$EMU_NET.2" >/dev/null)
cp "$OUT/xml/MAPPING.md" "$OUT/mapping.md"

say "namespaces"
for ns in "${NS[@]}"; do
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
done
ip -n clarkeos-emu link add br-emu type bridge mcast_snooping 0
ip -n clarkeos-emu link set br-emu up
host=1
for role in st sat gw; do
	ip -n clarkeos-emu link add "emu-$role" type veth peer name emu netns "clarkeos-$role"
	ip -n clarkeos-emu link set "emu-$role" master br-emu up
	ip -n "clarkeos-$role" addr add "$EMU_NET.$host/24" dev emu
	ip -n "clarkeos-$role" link set emu up
	host=$((host + 1))
done
# The LANs behind the ground entities.
wire_lan() { # entity ws prefix
	ip -n "clarkeos-$1" link add lan type veth peer name lan netns "clarkeos-$2"
	ip -n "clarkeos-$1" addr add "$3.1/24" dev lan
	ip -n "clarkeos-$2" addr add "$3.2/24" dev lan
	ip -n "clarkeos-$1" link set lan up
	ip -n "clarkeos-$2" link set lan up
	for ns in "clarkeos-$1" "clarkeos-$2"; do
		ip netns exec "$ns" ethtool -K lan tso off gso off gro off >/dev/null 2>&1 || true
	done
}
wire_lan gw ws-gw "$GW_LAN"
wire_lan st ws-st "$ST_LAN"
ip -n clarkeos-ws-gw route add "$ST_LAN.0/24" via "$GW_LAN.1"
ip -n clarkeos-ws-st route add "$GW_LAN.0/24" via "$ST_LAN.1"

start_entity() { # role extra-env...
	local role=$1
	shift
	ip netns exec "clarkeos-$role" env OPENSAND_ROLE="$role" OPENSAND_CONFIG_DIR="$OUT/xml" \
		OPENSAND_EMU_IFACE=emu OPENSAND_RUN_DIR="$OUT/run-$role" "$@" \
		"$HERE/entrypoint.sh" >"$OUT/$role.log" 2>&1 &
	PIDS+=($!)
	local pid=$!
	# Up when the entrypoint has handed over to OpenSAND (pid file) and it still runs.
	for _ in $(seq 150); do
		kill -0 "$pid" 2>/dev/null || { cat "$OUT/$role.log" >&2; echo "$role exited" >&2; exit 1; }
		if ip netns exec "clarkeos-$role" env OPENSAND_ROLE="$role" OPENSAND_RUN_DIR="$OUT/run-$role" \
			"$HERE/entrypoint.sh" health 2>/dev/null; then
			say "$role running (pid $pid)"
			return 0
		fi
		sleep 0.2
	done
	echo "$role did not come up" >&2
	exit 1
}

say "starting OpenSAND: SAT, GW, ST"
start_entity sat
sleep 1
start_entity gw OPENSAND_BR_ADDRESS="$BR_NET.1/24" OPENSAND_PEER_BR_ADDRESS="$BR_NET.2" \
	OPENSAND_REMOTE_LAN="$ST_LAN.0/24" OPENSAND_LAN_IFACE=lan ${TBF:+OPENSAND_TAP_TBF=$TBF}
sleep 1
start_entity st OPENSAND_BR_ADDRESS="$BR_NET.2/24" OPENSAND_PEER_BR_ADDRESS="$BR_NET.1" \
	OPENSAND_REMOTE_LAN="$GW_LAN.0/24" OPENSAND_LAN_IFACE=lan

say "waiting for the terminal's logon (echoes across the link)"
ok=0
for _ in $(seq 30); do
	if ip netns exec clarkeos-ws-st ping -c 1 -W 2 "$GW_LAN.2" >/dev/null 2>&1; then
		ok=1
		break
	fi
done
[[ $ok -eq 1 ]] || { echo "no echo crossed the link in 60 s" >&2; exit 1; }

say "idle RTT: 50 echoes, 0.2 s apart"
run_fg ip netns exec clarkeos-ws-st ping -n -c 50 -i 0.2 "$GW_LAN.2" >"$OUT/ping.txt"
python3 - "$OUT/ping.txt" >"$OUT/rtt.json" <<'EOF'
import json, re, statistics, sys
rtts = [float(m) for m in re.findall(r"time=([\d.]+) ms", open(sys.argv[1]).read())]
s = sorted(rtts)
q = lambda p: s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]
print(json.dumps({"n": len(s), "mean": round(statistics.mean(s), 1),
                  "sd": round(statistics.stdev(s), 1), "min": s[0], "p50": q(50),
                  "p99": q(99), "max": s[-1]}))
EOF
cat "$OUT/rtt.json"
if [[ ${RTT_ONLY:-0} == 1 ]]; then
	say "done (RTT only)"
	exit 0
fi

ip netns exec clarkeos-ws-gw iperf3 -s -B "$GW_LAN.2" >"$OUT/iperf3-server.log" 2>&1 &
PIDS+=($!)
sleep 1

measure() { # name seconds iperf3-args...
	local name=$1 seconds=$2
	shift 2
	if run_fg ip netns exec clarkeos-ws-st iperf3 -c "$GW_LAN.2" -t "$seconds" -J "$@" >"$OUT/$name.json"; then
		python3 - "$OUT/$name.json" "$name" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
end = r["end"]
if "sum_received" in end and "lost_percent" not in end.get("sum", {}):  # TCP
    rx = end["sum_received"]["bits_per_second"] / 1e6
    rates = [i["sum"]["bits_per_second"] / 1e6 for i in r["intervals"]]
    half = rates[len(rates) // 2 :]
    print(f"{sys.argv[2]}: {rx:.2f} Mb/s received, second half {sum(half) / len(half):.2f}"
          f" (retransmits {end['sum_sent'].get('retransmits')})")
if "sum_received" in end and "lost_percent" in end.get("sum", {}):  # UDP
    # Received bytes over the sending time: the receiver's own clock also counts the
    # last packets' 0.5 s flight, which would understate a GEO link's rate.
    sent, got = end["sum_sent"], end["sum_received"]
    print(f"{sys.argv[2]}: {got['bytes'] * 8 / sent['seconds'] / 1e6:.2f} Mb/s received"
          f" of {sent['bits_per_second'] / 1e6:.2f} sent, lost {end['sum']['lost_percent']:.1f} %")
EOF
	else
		echo "$name: iperf3 failed" >&2
	fi
	sleep 2
}

say "throughput: UDP ${DURATION} s at $UDP_RATE, TCP ${TCP_DURATION} s (forward = iperf3 -R)"
echo "load average before: $(cat /proc/loadavg)" >&2
measure udp-forward "$DURATION" -u -b "$UDP_RATE" -R
measure udp-return "$DURATION" -u -b "$UDP_RATE"
measure tcp-forward-cubic "$TCP_DURATION" -C cubic -R
measure tcp-return-cubic "$TCP_DURATION" -C cubic
measure tcp-forward-bbr "$TCP_DURATION" -C bbr -R
measure tcp-return-bbr "$TCP_DURATION" -C bbr
echo "load average after: $(cat /proc/loadavg)" >&2
say "done"
