#!/usr/bin/env bash
# Runs scripts/bmv2-suite.py (the behaviour behavioral-model's simple_switch_grpc tests expect)
# against pisa-switch, in a namespace of its own that is always deleted:
#   bash scripts/bmv2-suite.sh BEHAVIORAL_MODEL_CHECKOUT [PISA_SWITCH_BINARY]
# Extra switch arguments in PISA_SWITCH_ARGS (e.g. --trace), suite arguments in SUITE_ARGS
# (e.g. --only test_pre); the switch's log is printed at the end with KEEP_LOG=1.
# Needs root, iproute2, ethtool and the `shell` and `bmcli` venvs of scripts/py-clients.sh.
set -euo pipefail
bm=${1:?usage: bmv2-suite.sh BEHAVIORAL_MODEL_CHECKOUT [PISA_SWITCH]}
here=$(cd "$(dirname "$0")" && pwd)
switch=${2:-$here/../target/release/pisa-switch}
venv=${PISA_VENV_DIR:-/var/cache/pisa-switch/venvs}/shell/bin/python
testdata=$bm/targets/simple_switch_grpc/tests/testdata
ns=pisa-bmsuite-$$
dir=$(mktemp -d)
cleanup() {
  [ -n "${pid:-}" ] && ip netns exec "$ns" kill "$pid" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
for i in 0 1 2 3 4; do
  ip netns exec "$ns" ip link add "sw$i" type veth peer name "p$i"
  for n in "sw$i" "p$i"; do
    ip netns exec "$ns" ip link set "$n" up
    ip netns exec "$ns" ethtool -K "$n" tx off >/dev/null
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$n.disable_ipv6=1"
  done
done
ip netns exec "$ns" "$switch" --no-p4 --io af-packet -i 0@sw0 -i 1@sw1 -i 2@sw2 -i 3@sw3 -i 4@sw4 \
  --thrift-port 9090 ${PISA_SWITCH_ARGS:-} -- --grpc-server-addr 127.0.0.1:9559 --cpu-port 64 > "$dir/switch.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  ip netns exec "$ns" ss -Hltn | grep -q 127.0.0.1:9559 && break
  sleep 0.1
done
echo "behavioral-model at $(git -C "$bm" rev-parse --short HEAD 2>/dev/null || echo '?')"
status=0
ip netns exec "$ns" "$venv" "$here/bmv2-suite.py" --grpc-addr 127.0.0.1:9559 --testdata "$testdata" \
  --core-testdata "$bm/tests/testdata" --simple-switch-testdata "$bm/targets/simple_switch/tests/testdata" \
  --cli "${PISA_VENV_DIR:-/var/cache/pisa-switch/venvs}/bmcli/bin/simple_switch_CLI" ${SUITE_ARGS:-} || status=$?
[ -n "${KEEP_LOG:-}" ] && cat "$dir/switch.log"
exit $status
