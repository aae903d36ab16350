#!/usr/bin/env bash
# The single-switch demo (`bash scripts/demo.sh --single-switch`): builds pisa-switch, brings up two
# hosts behind one switch running `basic` in network namespaces (AF_XDP ports), proves
# reachability, runs TCP and UDP through it, shows an ACL drop and a run-time shaping change, the
# switch's counters and queues, and tears everything down (also on Ctrl-C or failure). Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== building (release)"
cargo build --release -q --bins
BIN=$PWD/target/release
TAG="pd$$"
H1="${TAG}h1" SW="${TAG}sw" H2="${TAG}h2"
WORK=$(mktemp -d)
SWPID=""
cleanup() {
  [ -n "$SWPID" ] && kill -TERM "$SWPID" 2>/dev/null && wait "$SWPID" 2>/dev/null || true
  for ns in "$H1" "$SW" "$H2"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

echo "== topology: $H1 (10.0.1.1) -- port 1 [switch: basic] port 2 -- $H2 (10.0.2.1)"
for ns in "$H1" "$SW" "$H2"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip link add "${TAG}a" netns "$H1" type veth peer name "${TAG}p1" netns "$SW"
ip link add "${TAG}p2" netns "$SW" type veth peer name "${TAG}b" netns "$H2"
host() { # ns if mac ip gw
  ip -n "$1" link set "$2" address "$3"
  ip -n "$1" addr add "$4/24" dev "$2"
  ip -n "$1" link set "$2" up
  ip -n "$1" route add default via "$5"
  ip -n "$1" neigh add "$5" lladdr 02:00:00:00:00:fe dev "$2"
  ip netns exec "$1" ethtool -K "$2" tx off >/dev/null  # no partial checksums across the switch
}
host "$H1" "${TAG}a" 02:00:00:00:01:01 10.0.1.1 10.0.1.254
host "$H2" "${TAG}b" 02:00:00:00:02:01 10.0.2.1 10.0.2.254
ip -n "$SW" link set "${TAG}p1" up
ip -n "$SW" link set "${TAG}p2" up

cat > "$WORK/entries.txt" <<EOT
act_prof_create_member ecmp_selector 1 set_nhop 02:00:00:00:01:01 02:00:00:00:00:fe 1
act_prof_create_member ecmp_selector 2 set_nhop 02:00:00:00:02:01 02:00:00:00:00:fe 2
table_indirect_add ipv4_lpm 10.0.1.0/24 => 1
table_indirect_add ipv4_lpm 10.0.2.0/24 => 2
table_add acl ingress.drop 0&&&0 0&&&0 0x800&&&0xffff 0&&&0 0&&&0 6&&&0xff 0&&&0 23&&&0xffff => 10
EOT
echo "== starting pisa-switch (AF_XDP, entries from a BMv2-style commands file)"
ip netns exec "$SW" "$BIN/pisa-switch" --program basic -i "1@${TAG}p1" -i "2@${TAG}p2" \
  --entries "$WORK/entries.txt" --admin-socket "$WORK/admin.sock" --workers 1 \
  > "$WORK/switch.log" 2>&1 &
SWPID=$!
for _ in $(seq 100); do [ -S "$WORK/admin.sock" ] && break; sleep 0.1; done
[ -S "$WORK/admin.sock" ] || { cat "$WORK/switch.log"; exit 1; }
cli() { "$BIN/pisa-cli" "$WORK/admin.sock" "$@"; }

echo "== ping $H1 -> $H2 through the switch"
ip netns exec "$H1" ping -c 5 -i 0.2 10.0.2.1 | tail -2
echo "== iperf3 TCP, 3 s"
ip netns exec "$H2" iperf3 -s -1 -B 10.0.2.1 >/dev/null 2>&1 &
sleep 0.5
ip netns exec "$H1" iperf3 -c 10.0.2.1 -t 3 | grep -E "sender|receiver"
echo "== telnet is dropped by the ACL (TCP port 23): connection attempt times out"
if ip netns exec "$H1" timeout 2 bash -c 'echo > /dev/tcp/10.0.2.1/23' 2>/dev/null; then
  echo "unexpected: port 23 reachable"; else echo "dropped, as configured"; fi
echo "== shaping port 2 to 20 Mb/s at run time, iperf3 UDP at 50 Mb/s offered"
cli "set_port_rate 20000000 2"
ip netns exec "$H2" iperf3 -s -1 -B 10.0.2.1 >/dev/null 2>&1 &
sleep 0.5
ip netns exec "$H1" iperf3 -c 10.0.2.1 -u -b 50M -t 3 | grep -E "receiver" || true
echo "== switch counters"
cli show_ports
echo "-- drops by reason"
cli show_drops | awk '$2 > 0'
echo "-- port 2 queues (queue depth bytes enqueued dropped marked)"
cli "show_queues 2" | head -2
echo "-- ingress.port_rx[1] (packets bytes)"
cli "counter_read port_rx 1"
echo "== done: tearing down"
