#!/usr/bin/env bash
# Runs scripts/pi-simple-router.py (p4lang/PI's demo router, proto/demo_grpc/simple_router*, driven
# as PI's demo controller drives it) against pisa-switch, in a namespace of its own that is always
# deleted, then PI's tests/CLI/testdata/table_dump.in through simple_switch_CLI against a switch
# running PI's tests/testdata/simple_router.json:
#   bash scripts/pi-simple-router.sh PI_CHECKOUT [PISA_SWITCH_BINARY]
# Prints PASS/FAIL per check and "N of M pass" (gRPC part, CLI part, total). Extra switch
# arguments in PISA_SWITCH_ARGS (e.g. --trace), script arguments in
# SUITE_ARGS (e.g. --election-id none, --only swap); the switch logs are printed with KEEP_LOG=1.
# Needs root, iproute2, ethtool and the `shell` and `bmcli` venvs of scripts/py-clients.sh.
set -euo pipefail
pi=${1:?usage: pi-simple-router.sh PI_CHECKOUT [PISA_SWITCH]}
pi=$(cd "$pi" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
switch=${2:-$here/../target/release/pisa-switch}
venvs=${PISA_VENV_DIR:-/var/cache/pisa-switch/venvs}
py=$venvs/shell/bin/python
ns=pisa-pirouter-$$
dir=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
for f in proto/demo_grpc/simple_router.json proto/demo_grpc/simple_router.p4info.txt \
  proto/demo_grpc/simple_router_wcounter.json proto/demo_grpc/simple_router_wcounter.p4info.txt \
  tests/testdata/simple_router.json tests/CLI/testdata/table_dump.in; do
  [ -f "$pi/$f" ] || { echo "no $pi/$f: not a p4lang/PI checkout" >&2; exit 2; }
done
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
for i in 1 2; do
  ip netns exec "$ns" ip link add "sw$i" type veth peer name "p$i"
  for n in "sw$i" "p$i"; do
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$n.disable_ipv6=1"
    ip netns exec "$ns" ip link set "$n" up
    ip netns exec "$ns" ethtool -K "$n" tx off >/dev/null
  done
done
wait_port() {
  for _ in $(seq 100); do
    ip netns exec "$ns" ss -Hltn | grep -q ":$1 " && return 0
    sleep 0.1
  done
  echo "nothing listens on :$1" >&2
  return 1
}
echo "p4lang/PI at $(git -C "$pi" rev-parse --short HEAD 2>/dev/null || echo '?')"

# 1. The demo controller's behaviour over P4Runtime. The controller never sends an election id,
# which PI's server (simple_switch_grpc's) takes as 0; pisa-switch does so under its BMv2 election
# rule, --election-compat live-highest (under the spec's, an id-less client is a backup).
ip netns exec "$ns" "$switch" --no-p4 --io af-packet --election-compat live-highest -i 1@sw1 -i 2@sw2 ${PISA_SWITCH_ARGS:-} \
  -- --grpc-server-addr 127.0.0.1:9559 --cpu-port 64 > "$dir/switch.log" 2>&1 &
pid=$!
wait_port 9559
status=0
ip netns exec "$ns" "$py" "$here/pi-simple-router.py" grpc --grpc-addr 127.0.0.1:9559 \
  --demo-dir "$pi/proto/demo_grpc" ${SUITE_ARGS:-} | tee "$dir/grpc.out" || status=1
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
[ -n "${KEEP_LOG:-}" ] && cat "$dir/switch.log"

# 2. table_dump.in through simple_switch_CLI, against the older simple_router.json given as the
# switch's program (as PI's tests/CLI run simple_switch with it).
ip netns exec "$ns" "$switch" --io af-packet -i 1@sw1 -i 2@sw2 --thrift-port 9090 ${PISA_SWITCH_ARGS:-} \
  "$pi/tests/testdata/simple_router.json" > "$dir/switch-cli.log" 2>&1 &
pid=$!
if wait_port 9090; then
  ip netns exec "$ns" "$py" "$here/pi-simple-router.py" cli --cli "$venvs/bmcli/bin/simple_switch_CLI" \
    --cli-in "$pi/tests/CLI/testdata/table_dump.in" --cli-json "$pi/tests/testdata/simple_router.json" \
    --thrift-port 9090 | tee "$dir/cli.out" || status=1
else
  echo "FAIL cli/switch-start: $(tail -3 "$dir/switch-cli.log")" | tee "$dir/cli.out"
  echo "0 of 1 pass" >> "$dir/cli.out"
  status=1
fi
[ -n "${KEEP_LOG:-}" ] && cat "$dir/switch-cli.log"
total() { awk '/ of [0-9]+ pass$/ {p += $1; m += $3} END {print p " of " m " pass"}' "$@"; }
echo "total: $(total "$dir/grpc.out" "$dir/cli.out")"
exit $status
