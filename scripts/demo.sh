#!/usr/bin/env bash
# The main job (README): installs what it needs, builds, brings up a 4x4 leaf-spine with 16 hosts
# in network namespaces (one pisa-switch process per switch, running `basic`, AF_XDP ports, link
# rates enforced by the switches' traffic managers, 2:1 oversubscription), programs every switch
# over P4Runtime from a management namespace (routes with ECMP groups over every spine), proves
# all-pairs reachability over IPv4 and IPv6, runs iperf3 TCP flows across the spines, prints the
# per-flow throughput and the per-uplink load, plots the uplink load (target/fabric-demo/uplinks.png)
# and tears everything down (also on Ctrl-C or failure). Needs root.
#   bash scripts/demo.sh [pisa-fabric demo flags, e.g. --flows 12 --seconds 20 --host-rate 200M]
#   bash scripts/demo.sh --single-switch    two hosts behind one switch: ACL, shaping, counters
#   bash scripts/demo.sh --in-memory        the pipeline on in-memory ports, no namespaces
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --single-switch) exec bash scripts/demo-single.sh ;;
  --in-memory)
    bash scripts/setup.sh
    exec cargo run --release -q -p dataplane --bin pisa-demo -- --pcap target/demo-pcap ;;
esac
bash scripts/setup.sh
echo "== building (release)"
cargo build --release -q --bins
exec target/release/pisa-fabric demo --out target/fabric-demo "$@"
