#!/usr/bin/env bash
# Runs the PTF tests of the ONF NG-SDN tutorial (github.com/opennetworkinglab/ngsdn-tutorial), their
# files unchanged, against pisa-switch in a namespace of its own that is always deleted:
#   bash scripts/ngsdn-ptf.sh NGSDN_TUTORIAL_REPO FINSY_REPO [PISA_SWITCH_BINARY] [PTF_ARGS...]
# NGSDN_TUTORIAL_REPO: a git checkout (or bare mirror) of ngsdn-tutorial holding commit $NGSDN_REV
#   (526792de, branch `py3`, "python3 support": the default branch `advanced` is Python 2), e.g.
#     git clone https://github.com/opennetworkinglab/ngsdn-tutorial && git -C ngsdn-tutorial checkout 526792de
#   Its ptf/lib/runner.py is run as upstream's ptf/run_tests does, on solution/ptf/tests (ptf/tests is
#   the exercise copy, with "MODIFY ME" placeholders). A plain directory (no git) is used as it is.
# FINSY_REPO: a git checkout (or bare mirror) of github.com/byllyfish/finsy, for the compiled program:
#   p4c is not needed, finsy ships ngsdn's solution/p4src/main.p4 compiled (BMv2 JSON + text P4Info).
#   We take it at $FINSY_REV (6f579a2): later finsy commits add a `magic_val` field to the packet_out
#   header, which the tutorial's tests do not know. At 6f579a2 finsy's main.p4 differs from the
#   tutorial's only in the clone to the CPU (clone_preserving_field_list of a copy of ingress_port in
#   local_metadata instead of clone3 of standard_metadata.ingress_port); the P4Info is the same. The
#   diff is printed.
# PTF_ARGS: passed to runner.py (so to ptf), e.g. a test name (`packetio.PacketInTest`) or a group.
# Extra switch arguments in PISA_SWITCH_ARGS (e.g. --trace); the switch's log is printed at the end
# with KEEP_LOG=1. Ports as upstream's ptf/lib/start_bmv2.sh: switch port N is veth(2N-2), ptf's
# port N is veth(2N-1), 8 pairs, MTU 9500, IPv6 off; CPU port 255; P4Runtime on localhost:28000,
# device id 1. Needs root, git, iproute2, ethtool, ifconfig (net-tools; runner.py calls it) and the
# `ngsdn` venv of scripts/py-clients.sh (ptf with scapy 2.5: the tests' convert.py refuses the str
# subclass scapy >= 2.6 gives for IPv6 addresses).
set -euo pipefail
usage="usage: ngsdn-ptf.sh NGSDN_TUTORIAL_REPO FINSY_REPO [PISA_SWITCH] [PTF_ARGS...]"
ngsdn=$(cd "${1:?$usage}" && pwd)
finsy=${2:?$usage}
here=$(cd "$(dirname "$0")" && pwd)
switch=${3:-$here/../target/release/pisa-switch}
shift $(($# < 3 ? $# : 3))
ngsdn_rev=${NGSDN_REV:-526792de0c4eae7bf1a3f1aae84b39b17a1c0017}
finsy_rev=${FINSY_REV:-6f579a2ccab2fc9fe48df7ed0f98440b0ccb2515}
venv=${PISA_VENV_DIR:-/var/cache/pisa-switch/venvs}/ngsdn
ns=pisa-ngsdn-$$
dir=$(mktemp -d)
cleanup() {
  [ -n "${pid:-}" ] && ip netns exec "$ns" kill "$pid" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

for tool in git ip ethtool ifconfig; do
  command -v "$tool" >/dev/null || { echo "ngsdn-ptf: $tool not found" >&2; exit 1; }
done
bash "$here/py-clients.sh" ngsdn
[ -x "$switch" ] || { echo "ngsdn-ptf: no pisa-switch at $switch" >&2; exit 1; }

# The tutorial's ptf/ and solution/, as they are at $ngsdn_rev.
if git -C "$ngsdn" rev-parse --git-dir >/dev/null 2>&1; then
  mkdir "$dir/ngsdn"
  git -C "$ngsdn" archive "$ngsdn_rev" ptf solution | tar -x -C "$dir/ngsdn"
  echo "ngsdn-tutorial at $(git -C "$ngsdn" rev-parse --short "$ngsdn_rev")"
  ngsdn=$dir/ngsdn
else
  echo "ngsdn-tutorial: $ngsdn (not a git repository, used as it is)"
fi
# The compiled program, from finsy's history.
p4=examples/ngsdn/ngsdn/p4
git -C "$finsy" show "$finsy_rev:$p4/main.json" >"$dir/bmv2.json"
git -C "$finsy" show "$finsy_rev:$p4/main.p4info.txt" >"$dir/p4info.txt"
git -C "$finsy" show "$finsy_rev:$p4/main.p4" >"$dir/main.p4"
echo "program: finsy $(git -C "$finsy" rev-parse --short "$finsy_rev"):$p4/main.json; its main.p4 against the tutorial's solution/p4src/main.p4:"
diff "$ngsdn/solution/p4src/main.p4" "$dir/main.p4" | sed 's/^/  /' || true

ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
ifaces=()
for idx in 0 1 2 3 4 5 6 7; do
  sw=veth$((idx * 2)) ptf=veth$((idx * 2 + 1))
  ip netns exec "$ns" ip link add "$sw" type veth peer name "$ptf"
  for n in "$sw" "$ptf"; do
    ip netns exec "$ns" ip link set "$n" mtu 9500 up
    ip netns exec "$ns" ethtool -K "$n" tx off >/dev/null
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$n.disable_ipv6=1"
  done
  ifaces+=(-i "$((idx + 1))@$sw")
done
# The tests were written against stratum_bmv2 and compare packet-in metadata byte for byte in its
# form, padded to the field's width (9-bit ingress_port 1 is 00 01); --padded-packet-in sends that
# form instead of the spec's canonical one (01).
# shellcheck disable=SC2086 # PISA_SWITCH_ARGS are words on purpose
ip netns exec "$ns" "$switch" --no-p4 --io af-packet --device-id 1 --padded-packet-in "${ifaces[@]}" ${PISA_SWITCH_ARGS:-} \
  -- --grpc-server-addr 127.0.0.1:28000 --cpu-port 255 >"$dir/switch.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  ip netns exec "$ns" ss -Hltn | grep -q 127.0.0.1:28000 && break
  sleep 0.1
done

# As ptf/run_tests, with the solution's tests; ptf writes ptf.log and ptf.pcap in the working directory.
status=0
(cd "$dir" && ip netns exec "$ns" env PATH="$venv/bin:$PATH" \
  "$venv/bin/python" "$ngsdn/ptf/lib/runner.py" \
  --bmv2-json "$dir/bmv2.json" \
  --p4info "$dir/p4info.txt" \
  --grpc-addr localhost:28000 \
  --device-id 1 \
  --ptf-dir "$ngsdn/solution/ptf/tests" \
  --cpu-port 255 \
  --port-map "$ngsdn/ptf/lib/port_map.json" "$@") || status=$?
[ -n "${KEEP_LOG:-}" ] && { echo "--- pisa-switch log"; cat "$dir/switch.log"; }
[ -n "${KEEP_PTF_LOG:-}" ] && { echo "--- ptf.log"; cat "$dir/ptf.log"; }
exit $status
